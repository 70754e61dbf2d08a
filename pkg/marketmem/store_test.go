package marketmem

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"refuel/pkg/policy"
)

// clock is a settable time shared by the writers of a test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)} }

// worker is one worker's store over the shared bucket.
func worker(b *blob.Bucket, c *clock, name string) *Store {
	return New(b, "test", Options{Writer: name, Now: c.now})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func view(t *testing.T, s *Store) View {
	t.Helper()
	v, err := s.View(context.Background())
	must(t, err)
	return v
}

// Two workers of one deployment learn as one: an outage one worker's
// tries see begin, the other's see end; what each instance taught, on
// either, is in both views.
func TestTwoWorkersLearnAsOne(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	c := newClock()
	a, w := worker(b, c, "a"), worker(b, c, "b")

	must(t, a.Tried(ctx, "spot-1", false))
	c.add(10 * time.Minute)
	must(t, w.Tried(ctx, "spot-1", false)) // the outage a saw begin: nothing new
	h, err := w.History(ctx, []string{"spot-1"})
	must(t, err)
	if h[0].Last || h[0].Since != 10*time.Minute {
		t.Fatalf("b's history while a's tries find none: last %v since %s; want out of stock for 10m", h[0].Last, h[0].Since)
	}
	c.add(30 * time.Minute)
	must(t, w.Tried(ctx, "spot-1", true))
	must(t, a.Held(ctx, "i-1", "spot-1", 3*time.Hour, true))
	must(t, w.Taught(ctx, "i-2", "pool-1", policy.CheckpointLog{Held: time.Hour, Preemptions: 1, Writes: 2, WriteTime: 2 * time.Second}))
	must(t, a.Taught(ctx, "i-1", "pool-1", policy.CheckpointLog{Held: 3 * time.Hour, Writes: 1, WriteTime: time.Second}))

	va, vb := view(t, a), view(t, w)
	if d := cmp.Diff(va, vb); d != "" {
		t.Errorf("the two workers' views differ (a-, b+):\n%s", d)
	}
	s := va.Stock["spot-1"]
	if s.Out.Count != 1 || s.Out.Total != 40*time.Minute || s.In.Count != 1 || s.In.Total != 3*time.Hour || !s.NoneSince.IsZero() {
		t.Errorf("spot-1: %d outages (%s), %d stretches in stock (%s), none since %v; want 1 (40m), 1 (3h), none open",
			s.Out.Count, s.Out.Total, s.In.Count, s.In.Total, s.NoneSince)
	}
	if s.FitIn != s.In || s.FitOut != s.Out {
		t.Errorf("spot-1's fit is not current: %+v", s)
	}
	want := policy.CheckpointLog{Held: 4 * time.Hour, Preemptions: 1, Writes: 3, WriteTime: 3 * time.Second}
	if got := va.Pools["pool-1"]; got != want {
		t.Errorf("pool-1: %+v; want %+v", got, want)
	}
}

// Many writers at once lose none of each other's observations, and one
// observation both record (a Release retried on the other worker after
// the first died mid-call) counts once.
func TestConcurrentWritersLoseNothing(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	c := newClock()
	const writers, each = 4, 50
	var wg sync.WaitGroup
	for w := range writers {
		s := worker(b, c, fmt.Sprintf("w%d", w))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				must(t, s.Taught(ctx, fmt.Sprintf("i-%d-%d", w, i), "pool", policy.CheckpointLog{Held: time.Minute, Writes: 1}))
				must(t, s.Held(ctx, "i-shared", "spot", time.Hour, true))
			}
		}()
	}
	wg.Wait()
	v := view(t, worker(b, c, "reader"))
	if got, want := v.Pools["pool"], (policy.CheckpointLog{Held: writers * each * time.Minute, Writes: writers * each}); got != want {
		t.Errorf("pool: %+v; want %+v, every writer's every lesson", got, want)
	}
	if got := v.Stock["spot"].In; got.Count != 1 || got.Total != time.Hour {
		t.Errorf("an instance every writer recorded: %d stretches (%s); want it once", got.Count, got.Total)
	}
}

// The memory lives in object storage: a worker whose disk is lost
// comes back (or another takes its place) knowing what it learned.
func TestLostDiskLosesNothing(t *testing.T) {
	ctx := context.Background()
	shared := "file://" + filepath.Join(t.TempDir(), "bucket")
	c := newClock()
	first, err := Open(ctx, shared, "prod", Options{Now: c.now})
	must(t, err)
	must(t, first.Tried(ctx, "spot", false))
	must(t, first.Taught(ctx, "i-1", "pool", policy.CheckpointLog{Held: time.Hour, Preemptions: 1}))
	must(t, first.Close())
	shard := filepath.Join(strings.TrimPrefix(shared, "file://"), "prod", first.Writer()+".json")
	info, err := os.Stat(shard)
	must(t, err)
	if info.Mode().Perm() != 0o600 {
		t.Errorf("the shard on disk has mode %04o; want 0600", info.Mode().Perm())
	}

	c.add(5 * time.Minute)
	again, err := Open(ctx, shared, "prod", Options{Now: c.now})
	must(t, err)
	defer again.Close()
	if again.Writer() == first.Writer() {
		t.Errorf("a new process writes the shard %s of the one before", first.Writer())
	}
	got, err := again.CheckpointLog(ctx, "pool")
	must(t, err)
	if got != (policy.CheckpointLog{Held: time.Hour, Preemptions: 1}) {
		t.Errorf("after the worker's loss: pool %+v; want what it learned", got)
	}
	h, err := again.History(ctx, []string{"spot"})
	must(t, err)
	if h[0].Last || h[0].Since != 5*time.Minute {
		t.Errorf("after the worker's loss: spot %+v; want the outage it saw begin, 5m on", h[0])
	}
	other, err := Open(ctx, shared, "staging", Options{Now: c.now})
	must(t, err)
	defer other.Close()
	if v := view(t, other); len(v.Pools) != 0 || len(v.Stock) != 0 {
		t.Errorf("another deployment sees %+v; want a memory of its own", v)
	}
}

// The files an older refuel kept in its data dir are folded in once,
// however many workers of the deployment start on them.
func TestMigrateOldDataDir(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	stock, pools := filepath.Join(dir, "stock-logs.json"), filepath.Join(dir, "checkpoint-logs.json")
	old := map[string]StockLog{"spot": {NoneSince: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)}}
	o := old["spot"]
	o.Seen(true, 2*time.Hour, true)
	old["spot"] = o
	writeJSON(t, stock, old)
	writeJSON(t, pools, map[string]policy.CheckpointLog{"pool": {Held: time.Hour, Preemptions: 2, Writes: 3, WriteTime: 3 * time.Second}})

	b := memblob.OpenBucket(nil)
	c := newClock()
	a, w := worker(b, c, "a"), worker(b, c, "b")
	must(t, a.Migrate(ctx, stock, pools))
	must(t, w.Migrate(ctx, stock, pools))
	must(t, a.Migrate(ctx, stock, pools))
	v := view(t, w)
	if got := v.Pools["pool"]; got != (policy.CheckpointLog{Held: time.Hour, Preemptions: 2, Writes: 3, WriteTime: 3 * time.Second}) {
		t.Errorf("pool after migrating three times: %+v; want the file's, once", got)
	}
	s := v.Stock["spot"]
	if s.In.Count != 1 || s.In.Total != 2*time.Hour || !s.NoneSince.Equal(old["spot"].NoneSince) {
		t.Errorf("spot after migrating: %+v; want the file's stretch once and its open outage", s)
	}
	must(t, a.Migrate(ctx, filepath.Join(dir, "none.json"), ""))
	must(t, os.WriteFile(pools, []byte("{not json"), 0o600))
	if err := a.Migrate(ctx, stock, pools); err == nil {
		t.Error("a damaged file was folded in silently")
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	must(t, err)
	must(t, os.WriteFile(path, b, 0o600))
}

// A writer silent for longer than Idle is taken over by one live writer
// (never two), folded into its shard and deleted: the memory stays
// bounded and counts everything once. A writer that was only cut off
// goes on under a new name without counting twice.
func TestIdleShardsAreAbsorbedOnce(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	c := newClock()
	gone := worker(b, c, "gone")
	must(t, gone.Taught(ctx, "i-1", "pool", policy.CheckpointLog{Held: time.Hour, Writes: 1}))
	must(t, gone.Held(ctx, "i-1", "spot", time.Hour, true))

	c.add(25 * time.Hour)
	a, w := worker(b, c, "a"), worker(b, c, "b")
	must(t, a.Taught(ctx, "i-2", "pool", policy.CheckpointLog{Held: time.Hour, Writes: 1}))
	va, vb := view(t, a), view(t, w)
	want := policy.CheckpointLog{Held: 2 * time.Hour, Writes: 2}
	for name, v := range map[string]View{"a": va, "b": vb} {
		if got := v.Pools["pool"]; got != want {
			t.Errorf("%s sees pool %+v; want %+v", name, got, want)
		}
	}
	if ok, _ := b.Exists(ctx, "gone.json"); ok {
		t.Error("the idle shard is still there after being absorbed")
	}

	// gone was only cut off: its next write finds itself taken over.
	c.add(time.Minute)
	must(t, gone.Taught(ctx, "i-3", "pool", policy.CheckpointLog{Held: time.Hour, Writes: 1}))
	if gone.Writer() == "gone" {
		t.Error("a writer taken over kept writing its old shard")
	}
	want = policy.CheckpointLog{Held: 3 * time.Hour, Writes: 3}
	if got := view(t, w).Pools["pool"]; got != want {
		t.Errorf("after the writer taken over came back: pool %+v; want %+v", got, want)
	}
	if got := view(t, w).Stock["spot"].In; got.Total != time.Hour {
		t.Errorf("after the writer taken over came back: spot in stock %s; want 1h, once", got.Total)
	}
}

// Merging is the same in any order.
func TestMergeIsOrderFree(t *testing.T) {
	c := newClock()
	var x, y, z Shard
	x.Writer, y.Writer, z.Writer = "x", "y", "z"
	x.Tried(View{}, "spot", false, c.now())
	y.Tried(View{Stock: map[string]StockLog{"spot": {NoneSince: c.now()}}}, "spot", true, c.now().Add(time.Hour))
	z.Tried(View{Stock: map[string]StockLog{"spot": {NoneSince: c.now()}}}, "spot", true, c.now().Add(2*time.Hour))
	x.Held("i-1", "spot", time.Hour, true)
	z.Taught("i-2", "pool", policy.CheckpointLog{Held: time.Hour})
	want := Merge([]Shard{x, y, z})
	for _, order := range [][]Shard{{z, y, x}, {y, x, z}, {y, z, x}} {
		if d := cmp.Diff(want, Merge(order)); d != "" {
			t.Errorf("merged in another order (-want +got):\n%s", d)
		}
	}
	if got := want.Stock["spot"].Out; got.Count != 1 || got.Total != time.Hour {
		t.Errorf("one outage two writers saw end: %d (%s); want 1 (1h), the first end", got.Count, got.Total)
	}
}

// The claims on writers long gone are deleted at the next absorption;
// a recent one stays, to turn away its writer should it come back.
func TestOldClaimsArePruned(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	opts := Options{Idle: time.Millisecond}
	must(t, b.WriteAll(ctx, claimKey("ancient"), []byte("x"), nil))
	gone := New(b, "test", Options{Writer: "gone", Idle: opts.Idle})
	must(t, gone.Taught(ctx, "i-1", "pool", policy.CheckpointLog{Writes: 1}))
	time.Sleep(40 * time.Millisecond) // past claimsKept × Idle
	v := view(t, New(b, "test", opts))
	if got := v.Pools["pool"].Writes; got != 1 {
		t.Errorf("after absorbing: %d writes; want 1", got)
	}
	for key, want := range map[string]bool{claimKey("ancient"): false, claimKey("gone"): true} {
		if ok, err := b.Exists(ctx, key); err != nil || ok != want {
			t.Errorf("%s exists: %v (%v); want %v", key, ok, err, want)
		}
	}
}
