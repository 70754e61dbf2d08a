package checkpoint

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A rank's shards live beside the job's checkpoints, each rank's apart:
// neither lists, restores or prunes the other's.
func TestShardsAreKeptApart(t *testing.T) {
	for _, scheme := range schemes {
		t.Run(scheme, func(t *testing.T) {
			ctx := context.Background()
			job := openStore(t, scheme)
			rank1, rank2 := openShard(t, job, 1), openShard(t, job, 2)
			if _, err := job.Save(ctx, 10, writeTree(t, map[string]string{"model": "job"}), "i-0"); err != nil {
				t.Fatal(err)
			}
			for _, step := range []int64{10, 20, 30} {
				if _, err := rank1.Save(ctx, step, writeTree(t, map[string]string{"shard-1": "of step " + string(rune('0'+step/10))}), "i-1"); err != nil {
					t.Fatal(err)
				}
			}
			steps := func(s *Store) []int64 {
				ms, err := s.List(ctx)
				if err != nil {
					t.Fatal(err)
				}
				var out []int64
				for _, m := range ms {
					out = append(out, m.Step)
				}
				return out
			}
			if diff := cmp.Diff(steps(job), []int64{10}); diff != "" {
				t.Errorf("the job's checkpoints got(-), want(+):\n%s", diff)
			}
			if diff := cmp.Diff(steps(rank1), []int64{30, 20, 10}); diff != "" {
				t.Errorf("rank 1's shards got(-), want(+):\n%s", diff)
			}
			if got := steps(rank2); len(got) != 0 {
				t.Errorf("rank 2 has shards %v; it wrote none", got)
			}
			if _, err := rank1.Prune(ctx, 2); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(steps(rank1), []int64{30, 20}); diff != "" {
				t.Errorf("rank 1's shards after pruning to 2 got(-), want(+):\n%s", diff)
			}
			if diff := cmp.Diff(steps(job), []int64{10}); diff != "" {
				t.Errorf("the job's checkpoints after pruning rank 1's shards got(-), want(+):\n%s", diff)
			}
			m, err := rank1.Latest(ctx)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "restored")
			if err := rank1.Restore(ctx, m, dir); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(readTree(t, dir), map[string]string{"shard-1": "of step 3"}); diff != "" {
				t.Errorf("restored shard got(-), want(+):\n%s", diff)
			}
			if u := rank1.StepURL(30); !strings.HasSuffix(u, "/job-1/shards/rank-1/step-000000000030") {
				t.Errorf("rank 1's shard of step 30 is at %s; want it under the job's shards/rank-1/", u)
			}
			if err := rank1.Close(); err != nil {
				t.Errorf("closing a shard store: %v", err)
			}
			if got := steps(job); len(got) != 1 {
				t.Errorf("the job's store after closing a shard store lists %v", got)
			}
			if again := openShard(t, job, 1); len(steps(again)) != 2 {
				t.Errorf("rank 1's shards opened again list %v; want the two kept", steps(again))
			}
		})
	}
	if _, err := openStore(t, "mem").OpenShard(context.Background(), 0); err == nil {
		t.Error("a shard store of rank 0 opened; its checkpoints are the job's")
	}
}

func openShard(t *testing.T, s *Store, rank int) *Store {
	t.Helper()
	shard, err := s.OpenShard(context.Background(), rank)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shard.Close() })
	return shard
}
