package marketmem

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Peek reads what the deployment's writers saved and writes nothing: a
// shard idle past Idle, which a writer's read would take over and delete,
// stays where it is, and a memory not created yet reads as empty without
// being created.
func TestPeekReadsWithoutWriting(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	url := "file://" + dir
	w, err := Open(ctx, url, "prod", Options{Writer: "w1", Now: func() time.Time { return time.Now().Add(-48 * time.Hour) }})
	must(t, err)
	must(t, w.Held(ctx, "i-1", "sim/p3.2xlarge/us-west-2a/spot", 3*time.Hour, true))
	must(t, w.Close())

	before, err := os.ReadDir(filepath.Join(dir, "prod"))
	must(t, err)
	v, err := Peek(ctx, url, "prod")
	must(t, err)
	if got := v.Stock["sim/p3.2xlarge/us-west-2a/spot"].In.Count; got != 1 {
		t.Errorf("peeked stock log counts %d stretches in stock; want the 1 the writer saved", got)
	}
	after, err := os.ReadDir(filepath.Join(dir, "prod"))
	must(t, err)
	if len(after) != len(before) {
		t.Errorf("the deployment's folder held %d entries before the peek and %d after; a peek writes nothing", len(before), len(after))
	}

	missing := filepath.Join(dir, "none")
	v, err = Peek(ctx, "file://"+missing, "prod")
	must(t, err)
	if len(v.Stock) != 0 {
		t.Errorf("a memory never written reads %d stock logs; want none", len(v.Stock))
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("peeking at a memory never written created %s (stat: %v)", missing, err)
	}
	if _, err := Peek(ctx, url, "a/b"); err == nil {
		t.Error("a deployment named a/b was peeked at; want an error naming it")
	}
}
