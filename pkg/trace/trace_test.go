package trace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseNamesTheTraceFromItsFile(t *testing.T) {
	cases := map[string]struct {
		path                 string
		name, zone, instance string
		count                int
	}{
		"zone, gpu and count": {"dir/us-west-2a_v100_1.json", "us-west-2a_v100_1", "us-west-2a", "v100", 1},
		"zone and machine":    {"us-central1-a_c3-88.json", "us-central1-a_c3-88", "us-central1-a", "c3-88", 0},
		"anything else":       {"x/weird.json", "weird", "weird", "", 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tr, err := Parse(tc.path, []byte(`{"metadata": {"gap_seconds": 600}, "data": [1, 0, 2]}`))
			if err != nil {
				t.Fatal(err)
			}
			got := []any{tr.Name, tr.Zone, tr.Instance, tr.Count, tr.Gap, tr.Points, tr.Available(0), tr.Available(1), tr.Available(3), tr.Span()}
			want := []any{tc.name, tc.zone, tc.instance, tc.count, 10 * time.Minute, []int{1, 0, 2}, true, false, false, 30 * time.Minute}
			if d := cmp.Diff(got, want); d != "" {
				t.Errorf("got(-), want(+):\n%s", d)
			}
		})
	}
}

func TestParseRejectsBadTraces(t *testing.T) {
	cases := map[string]struct{ body, problem string }{
		"not JSON":         {`{"metadata":`, "is not a JSON trace"},
		"no metadata":      {`{"data": [1]}`, "has no metadata.gap_seconds"},
		"no gap":           {`{"metadata": {}, "data": [1]}`, "has no metadata.gap_seconds"},
		"zero gap":         {`{"metadata": {"gap_seconds": 0}, "data": [1]}`, "gap_seconds is 0"},
		"no data":          {`{"metadata": {"gap_seconds": 60}}`, "has no data array"},
		"empty data":       {`{"metadata": {"gap_seconds": 60}, "data": []}`, "has an empty data array"},
		"negative point":   {`{"metadata": {"gap_seconds": 60}, "data": [1, -1]}`, "data[1] is -1"},
		"fractional point": {`{"metadata": {"gap_seconds": 60}, "data": [0.5]}`, "data[0] is 0.5"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("bad.json", []byte(tc.body))
			var te *Error
			if !errors.As(err, &te) {
				t.Fatalf("got %v, want a *trace.Error", err)
			}
			if te.File != "bad.json" || !strings.Contains(err.Error(), tc.problem) {
				t.Errorf("got %q, want it to name bad.json and say %q", err, tc.problem)
			}
		})
	}
}

func TestFindListsEveryTraceSorted(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"b/z_v100_1.json", "a/y_v100_1.json", "a/README.md", "x.json"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(`{"metadata":{"gap_seconds":1},"data":[1]}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Find(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "a/y_v100_1.json"), filepath.Join(dir, "b/z_v100_1.json"), filepath.Join(dir, "x.json")}
	if d := cmp.Diff(got, want); d != "" {
		t.Errorf("got(-), want(+):\n%s", d)
	}
	if _, err := Find(t.TempDir()); err == nil || !strings.Contains(err.Error(), "holds no trace files") {
		t.Errorf("empty folder: got %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json cannot be read") {
		t.Errorf("missing file: got %v", err)
	}
}
