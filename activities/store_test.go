package activities

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSaveJSONIsPrivate: the learned logs are written 0600 in a 0700
// directory, replacing an older file's looser mode, with no temporary
// file left behind.
func TestSaveJSONIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	path := filepath.Join(dir, "stock-logs.json")
	if err := saveJSON(path, map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil { // as an older refuel wrote it
		t.Fatal(err)
	}
	if err := saveJSON(path, map[string]int{"a": 2}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode().Perm(); got != want {
			t.Errorf("%s: mode %04o, want %04o", p, got, want)
		}
	}
	var got map[string]int
	if err := loadJSON(path, "test", &got); err != nil || got["a"] != 2 {
		t.Errorf("reloaded %v, %v", got, err)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary file left: %v", err)
	}
}
