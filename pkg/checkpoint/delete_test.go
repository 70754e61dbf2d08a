package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// DeleteAll leaves nothing of the job, checkpoints and logs, and
// everything of another's.
func TestDeleteAll(t *testing.T) {
	for _, scheme := range schemes {
		t.Run(scheme, func(t *testing.T) {
			ctx := context.Background()
			s := openStore(t, scheme)
			other, err := Open(ctx, s.bucketURL, "job-2")
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			dir := writeTree(t, map[string]string{"a": "1", "sub/b": "2"})
			for step := range int64(3) {
				if _, err := s.Save(ctx, step, dir, "i-1"); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := other.Save(ctx, 1, dir, "i-1"); err != nil {
				t.Fatal(err)
			}
			if err := s.PutLogSegment(ctx, LogSegment{Attempt: 1, Instance: "i-1", Index: 1}, []byte("line\n")); err != nil {
				t.Fatal(err)
			}
			n, err := s.DeleteAll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if want := 3*3 + 1; n != want {
				t.Errorf("deleted %d objects; want %d", n, want)
			}
			if ms, err := s.List(ctx); err != nil || len(ms) != 0 {
				t.Errorf("after DeleteAll the store lists %v (%v)", ms, err)
			}
			if segs, err := s.LogSegments(ctx); err != nil || len(segs) != 0 {
				t.Errorf("after DeleteAll the store has log segments %v (%v)", segs, err)
			}
			if ms, err := other.List(ctx); err != nil || len(ms) != 1 {
				t.Errorf("another job's checkpoints: %v (%v); want its one, untouched", ms, err)
			}
			if scheme == "file" {
				root := filepath.Join(filepath.FromSlash(s.bucketURL[len("file://"):]), "job-1")
				if _, err := os.Stat(root); !os.IsNotExist(err) {
					t.Errorf("the job's directory %s is still there (%v)", root, err)
				}
			}
		})
	}
}
