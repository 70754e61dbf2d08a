package listing

import (
	"context"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob"
)

// Workers sharing a file bucket write their shards while another lists
// them: the listing is whole every time, never an error for a file that
// was renamed or deleted under it.
func TestAllWhileTheBucketIsWritten(t *testing.T) {
	ctx := context.Background()
	b, err := blob.OpenBucket(ctx, (&url.URL{Scheme: "file", Path: filepath.ToSlash(t.TempDir())}).String())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, key := range []string{"a.json", "b.json"} {
		if err := b.WriteAll(ctx, key, []byte("{}"), nil); err != nil {
			t.Fatal(err)
		}
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			key := "c-" + strconv.Itoa(i) + ".json"
			if err := b.WriteAll(ctx, key, []byte("{}"), nil); err != nil {
				t.Error(err)
				return
			}
			if err := b.Delete(ctx, key); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	defer func() {
		close(stop)
		<-done
	}()
	for range 300 {
		objs, err := All(ctx, b, &blob.ListOptions{Prefix: "a"})
		if err != nil {
			t.Fatalf("All: %v", err)
		}
		if len(objs) != 1 || objs[0].Key != "a.json" {
			t.Fatalf("All: %d objects; want a.json alone", len(objs))
		}
		if _, err := All(ctx, b, nil); err != nil {
			t.Fatalf("All: %v", err)
		}
	}
}
