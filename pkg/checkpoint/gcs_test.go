package checkpoint

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// gs:// buckets, through gocloud's gcsblob and Google's storage client,
// against an in-process Cloud Storage emulator that speaks its wire
// protocol (fakeGCS): a checkpoint saved, found latest, restored and
// pruned as on the other stores; a bucket that does not exist is an
// error naming the URL.
func TestGCSStoreRoundTrip(t *testing.T) {
	srv := newFakeGCS(t, "ckpt")
	// The emulator's address, as Google's storage client takes it.
	t.Setenv("STORAGE_EMULATOR_HOST", srv.host())
	ctx := context.Background()

	s, err := Open(ctx, "gs://ckpt", "job-1")
	if err != nil {
		t.Fatalf("Open(gs://ckpt): %v", err)
	}
	t.Cleanup(func() { s.Close() })
	files := map[string]string{"model.bin": "weights", "optimizer/state.bin": "adam"}
	save(t, s, 1, map[string]string{"model.bin": "older"})
	saved := save(t, s, 2, files)
	latest, err := s.Latest(ctx)
	if err != nil {
		t.Fatalf("Latest: %v", err)
	}
	if diff := cmp.Diff(saved, latest); diff != "" {
		t.Errorf("Latest (-saved +latest):\n%s", diff)
	}
	dst := filepath.Join(t.TempDir(), "restore")
	if err := s.Restore(ctx, latest, dst); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if diff := cmp.Diff(files, readTree(t, dst)); diff != "" {
		t.Errorf("restored (-saved +restored):\n%s", diff)
	}
	pruned, err := s.Prune(ctx, 1)
	if err != nil || len(pruned) != 1 || pruned[0] != 1 {
		t.Errorf("Prune(1) = %v, %v; want step 1 deleted", pruned, err)
	}
	objs := srv.names("ckpt", "job-1/")
	if len(objs) == 0 {
		t.Error("nothing in the emulator's bucket: the store wrote somewhere else")
	}
	for _, name := range objs {
		if strings.Contains(name, "step-000000000001") || strings.Contains(name, "step-1/") {
			t.Errorf("%s is still in the bucket after step 1 was pruned", name)
		}
	}

	if _, err := Open(ctx, "gs://no-such-bucket", "job-1"); err == nil || !strings.Contains(err.Error(), "gs://no-such-bucket") {
		t.Errorf("Open of a missing bucket: %v; want an error naming gs://no-such-bucket", err)
	}
}
