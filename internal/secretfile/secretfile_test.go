package secretfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadRefusesWhatOthersMayRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte("s3cret"), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err == nil || !strings.Contains(err.Error(), "chmod 600 "+path) {
		t.Errorf("group-readable file: got %v, want an error saying chmod 600", err)
	}
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
	if got, err := Read(path); err != nil || string(got) != "s3cret" {
		t.Errorf("0400 file: %q, %v", got, err)
	}
}

func TestToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if tok, err := Token(write("good", "0123456789abcdef0123\n")); err != nil || tok != "0123456789abcdef0123" {
		t.Errorf("good token: %q, %v", tok, err)
	}
	for name, content := range map[string]string{"empty": "\n", "short": "abc", "two words": "0123456789abcdef 0123456789abcdef"} {
		if _, err := Token(write(name, content)); err == nil {
			t.Errorf("%s token: no error", name)
		}
	}
}
