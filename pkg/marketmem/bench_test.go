package marketmem

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"refuel/pkg/policy"
)

// BenchmarkTaughtFile is one lesson saved to a file:// memory: what a
// Release costs its worker.
func BenchmarkTaughtFile(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, "file://"+filepath.Join(b.TempDir(), "m"), "bench", Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	i := 0
	for b.Loop() {
		i++
		if err := s.Taught(ctx, fmt.Sprint("i-", i), fmt.Sprint("pool-", i%50), policy.CheckpointLog{Held: time.Hour, Writes: 1}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMerge merges 8 writers' full shards over 50 offerings: what a
// read of the memory costs beyond its I/O.
func BenchmarkMerge(b *testing.B) {
	shards := make([]Shard, 8)
	for w := range shards {
		shards[w].Writer = fmt.Sprint("w", w)
		for i := range 2 * RecentLimit {
			shards[w].Held(fmt.Sprint("i-", w, "-", i), fmt.Sprint("spot-", i%50), time.Hour, i%3 == 0)
			shards[w].Taught(fmt.Sprint("i-", w, "-", i), fmt.Sprint("pool-", i%50), policy.CheckpointLog{Held: time.Hour, Writes: 1})
		}
	}
	for b.Loop() {
		Merge(shards)
	}
}
