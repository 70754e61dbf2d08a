package agent

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"refuel/pkg/checkpoint"
	"refuel/pkg/trainer"
)

// gangOf is rank's place in a gang of nodes whose rank 0 listens on port.
func gangOf(rank, nodes, port int) Gang {
	return Gang{Rank: rank, Nodes: nodes, MasterAddr: "127.0.0.1", MasterPort: port}
}

// envOf is a trainer that prints the contract's gang variables it got.
func envOf(_ context.Context, _ <-chan struct{}, _, env []string, stdout, _ io.Writer) int {
	for _, name := range []string{"REFUEL_NODE_RANK", "REFUEL_NUM_NODES", "REFUEL_MASTER_ADDR", "REFUEL_MASTER_PORT"} {
		fmt.Fprintf(stdout, "%s=%q\n", name, lookupEnv(env, name))
	}
	return 0
}

// A gang's trainer gets its rank, the gang's size and where rank 0
// listens, which the job's env cannot override; a run of one node gets
// none of them.
func TestGangEnvironment(t *testing.T) {
	tests := map[string]struct {
		gang Gang
		want []string
	}{
		"rank 0 of 2": {gangOf(0, 2, 29500), []string{`REFUEL_NODE_RANK="0"`, `REFUEL_NUM_NODES="2"`, `REFUEL_MASTER_ADDR="127.0.0.1"`, `REFUEL_MASTER_PORT="29500"`}},
		"rank 2 of 3": {Gang{Rank: 2, Nodes: 3, MasterAddr: "10.0.3.7", MasterPort: 1234}, []string{`REFUEL_NODE_RANK="2"`, `REFUEL_NUM_NODES="3"`, `REFUEL_MASTER_ADDR="10.0.3.7"`, `REFUEL_MASTER_PORT="1234"`}},
		"one node":    {Gang{}, []string{`REFUEL_NODE_RANK=""`, `REFUEL_NUM_NODES=""`, `REFUEL_MASTER_ADDR=""`, `REFUEL_MASTER_PORT=""`}},
		"a gang of 1": {Gang{Nodes: 1, MasterAddr: "10.0.0.1", MasterPort: 1}, []string{`REFUEL_NODE_RANK=""`, `REFUEL_NUM_NODES=""`, `REFUEL_MASTER_ADDR=""`, `REFUEL_MASTER_PORT=""`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			cfg := h.config("")
			cfg.Func, cfg.Command, cfg.Gang = envOf, []string{"env"}, tc.gang
			// The agent refuses none of these: a JobSpec cannot name them,
			// and the contract's win if another client sends them.
			cfg.Env = []string{"REFUEL_NODE_RANK=9", "REFUEL_MASTER_ADDR=evil"}
			if tc.gang.together() {
				cfg.Env = append(cfg.Env, "REFUEL_NUM_NODES=9", "REFUEL_MASTER_PORT=9")
			}
			res, err := h.run(context.Background(), cfg)()
			if err != nil || res.Outcome != Completed {
				t.Fatalf("Run = %+v, %v", res, err)
			}
			got := strings.Fields(h.stdout.String())
			if !tc.gang.together() {
				// One node: the job's own variables reach it as ever.
				tc.want[0], tc.want[2] = `REFUEL_NODE_RANK="9"`, `REFUEL_MASTER_ADDR="evil"`
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("trainer's gang variables got(-), want(+):\n%s", diff)
			}
		})
	}
}

func TestGangConfigErrors(t *testing.T) {
	tests := map[string]struct {
		gang Gang
		want string
	}{
		"rank past the gang": {Gang{Rank: 2, Nodes: 2, MasterAddr: "127.0.0.1", MasterPort: 1}, "gang rank 2 of 2 nodes: want 0 to 1"},
		"negative rank":      {Gang{Rank: -1, Nodes: 2, MasterAddr: "127.0.0.1", MasterPort: 1}, "gang rank -1 of 2 nodes"},
		"no master address":  {Gang{Rank: 1, Nodes: 2, MasterPort: 1}, `gang master address "": want rank 0's instance's address`},
		"no master port":     {Gang{Rank: 1, Nodes: 2, MasterAddr: "127.0.0.1"}, "gang master port 0: want 1 to 65535"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			cfg := h.config("complete")
			cfg.Gang = tc.gang
			if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run = %v; want an error saying %q", err, tc.want)
			}
		})
	}
}

// shardWriter is a trainer of a gang whose every rank writes checkpoints
// of its own: rank 0 the job's ("model"), the others their shards
// ("shard-<rank>"). It reports what it found restored (RESTORED lines,
// one per file), then writes steps restored+1 to restored+FAKE_STEPS.
func shardWriter(_ context.Context, _ <-chan struct{}, _, env []string, stdout, _ io.Writer) int {
	dir := lookupEnv(env, "REFUEL_CHECKPOINT_DIR")
	rank := lookupEnv(env, "REFUEL_NODE_RANK")
	steps, _ := localSteps(dir)
	var step int64
	if len(steps) > 0 {
		newest := steps[len(steps)-1]
		step = newest.step
		entries, _ := os.ReadDir(filepath.Join(dir, newest.name))
		for _, e := range entries {
			content, _ := os.ReadFile(filepath.Join(dir, newest.name, e.Name()))
			fmt.Fprintf(stdout, "RESTORED %s %s=%s\n", newest.name, e.Name(), content)
		}
	}
	n, _ := strconv.Atoi(lookupEnv(env, "FAKE_STEPS"))
	name := "model"
	if rank != "0" {
		name = "shard-" + rank
	}
	for range n {
		step++
		tmp := filepath.Join(dir, ".tmp")
		if os.MkdirAll(tmp, 0o700) != nil || os.WriteFile(filepath.Join(tmp, name), fmt.Appendf(nil, "%s@%d", name, step), 0o600) != nil ||
			os.Rename(tmp, filepath.Join(dir, stepName(step))) != nil {
			return 1
		}
		fmt.Fprintf(stdout, "REFUEL_PROGRESS step=%d\n", step)
		// One sweep each, so every step is uploaded and pruned in turn.
		time.Sleep(2 * localPoll)
	}
	return 0
}

// gangRun runs one attempt of a gang whose trainer is fn, each rank's
// agent on a directory of its own and the one store.
func gangRun(t *testing.T, h *harness, nodes int, fn Func, env ...string) ([]Result, []*recorder, []string) {
	t.Helper()
	results := make([]Result, nodes)
	events := make([]*recorder, nodes)
	outs := make([]string, nodes)
	var wg sync.WaitGroup
	for r := range nodes {
		events[r] = newRecorder()
		cfg := h.config("")
		cfg.Func, cfg.Command, cfg.Env = fn, []string{"shards"}, env
		cfg.Gang, cfg.InstanceID, cfg.OnEvent = gangOf(r, nodes, 1), fmt.Sprintf("i-%d", r), events[r].record
		var out strings.Builder
		cfg.Stdout, cfg.Stderr = &syncWriter{w: &out}, io.Discard
		wg.Go(func() {
			res, err := Run(context.Background(), cfg)
			if err != nil {
				t.Errorf("rank %d: %v", r, err)
			}
			results[r] = res
			outs[r] = out.String()
		})
	}
	wg.Wait()
	return results, events, outs
}

// syncWriter serialises writes from a trainer's two streams.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// Only rank 0's checkpoints are the job's: they alone are uploaded as
// checkpoints and reported. The others' are their shards, kept under
// shards/rank-<r>/ and pruned alike; on the next attempt every rank gets
// the job's latest checkpoint and, laid over it, its own shard of that
// step.
func TestGangCheckpointsAndShards(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	results, events, _ := gangRun(t, h, 3, shardWriter, "FAKE_STEPS=3")
	for r, res := range results {
		if res.Outcome != Completed || res.LastStep != 3 {
			t.Errorf("rank %d: %+v; want completed at step 3", r, res)
		}
		want := []int64(nil)
		if r == 0 {
			want = []int64{1, 2, 3}
		}
		if diff := cmp.Diff(events[r].steps(EventCheckpoint), want); diff != "" {
			t.Errorf("rank %d's checkpoint events got(-), want(+):\n%s", r, diff)
		}
	}
	if results[0].LastCheckpoint == nil || results[0].LastCheckpoint.Step != 3 || results[1].LastCheckpoint != nil {
		t.Errorf("last checkpoints: rank 0 %+v, rank 1 %+v; want the job's step 3 on rank 0 alone", results[0].LastCheckpoint, results[1].LastCheckpoint)
	}
	ctx := context.Background()
	files := func(s *checkpoint.Store) map[int64][]string {
		ms, err := s.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int64][]string{}
		for _, m := range ms {
			for _, f := range m.Files {
				out[m.Step] = append(out[m.Step], f.Path+"@"+m.InstanceID)
			}
		}
		return out
	}
	shard := func(rank int) *checkpoint.Store {
		s, err := h.store.OpenShard(ctx, rank)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	// Keep is 2: the newest two of each.
	if diff := cmp.Diff(files(h.store), map[int64][]string{2: {"model@i-0"}, 3: {"model@i-0"}}); diff != "" {
		t.Errorf("the job's checkpoints got(-), want(+):\n%s", diff)
	}
	for r := 1; r < 3; r++ {
		want := map[int64][]string{2: {fmt.Sprintf("shard-%d@i-%d", r, r)}, 3: {fmt.Sprintf("shard-%d@i-%d", r, r)}}
		if diff := cmp.Diff(files(shard(r)), want); diff != "" {
			t.Errorf("rank %d's shards got(-), want(+):\n%s", r, diff)
		}
	}

	// The next attempt: the job's step 3 everywhere, each rank's own
	// shard of step 3 over it.
	results, _, outs := gangRun(t, h, 3, shardWriter, "FAKE_STEPS=0")
	wants := [][]string{
		{"RESTORED step-3 model=model@3"},
		{"RESTORED step-3 model=model@3", "RESTORED step-3 shard-1=shard-1@3"},
		{"RESTORED step-3 model=model@3", "RESTORED step-3 shard-2=shard-2@3"},
	}
	for r, want := range wants {
		var got []string
		for _, line := range strings.Split(outs[r], "\n") {
			if strings.HasPrefix(line, "RESTORED") {
				got = append(got, line)
			}
		}
		if diff := cmp.Diff(got, want); diff != "" {
			t.Errorf("rank %d restored got(-), want(+):\n%s", r, diff)
		}
		if results[r].RestoredStep != 3 || results[r].LastCheckpoint == nil || results[r].LastCheckpoint.Step != 3 {
			t.Errorf("rank %d: %+v; want restored from the job's step 3", r, results[r])
		}
	}
}

// A shard of another step than the job's checkpoint restored is not laid
// over it, and one that does not verify is skipped: the rank starts from
// the job's checkpoint alone, and says so.
func TestGangShardOfAnotherStep(t *testing.T) {
	h := newHarness(t)
	h.seed(5)
	ctx := context.Background()
	rank1, err := h.store.OpenShard(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rank1.Close()
	for step, content := range map[int64]string{4: "old", 5: "corrupt"} {
		dir := filepath.Join(t.TempDir(), stepName(step))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "shard-1"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := rank1.Save(ctx, step, dir, "i-1"); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(h.bucketDir, "job-1", "shards", "rank-1", "step-000000000005", "data", "shard-1"), []byte("CORRUPT"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := h.config("")
	cfg.Func, cfg.Command, cfg.Gang, cfg.Env = shardWriter, []string{"shards"}, gangOf(1, 2, 1), []string{"FAKE_STEPS=0"}
	res, err := h.run(ctx, cfg)()
	if err != nil || res.RestoredStep != 5 {
		t.Fatalf("Run = %+v, %v; want the job's step 5 restored", res, err)
	}
	if out := h.stdout.String(); strings.Contains(out, "shard-1=") || !strings.Contains(out, "RESTORED step-5 state=5") {
		t.Errorf("rank 1 restored:\n%s\nwant the job's step 5 alone", out)
	}
	if out := h.storedOutput(0); !strings.Contains(out, "skipping rank 1's shard of step 5") {
		t.Errorf("the output does not say the shard was skipped:\n%s", out)
	}
}

// A gang's trainer that stops without being asked, because its gang
// stopped, ends gang-stopped; the same exit of a one-node trainer is, as
// ever, completed; a gang's trainer done is completed.
func TestGangStoppedOutcome(t *testing.T) {
	says := func(line string) Func {
		return func(_ context.Context, _ <-chan struct{}, _, _ []string, stdout, _ io.Writer) int {
			fmt.Fprintln(stdout, line)
			return 0
		}
	}
	tests := map[string]struct {
		fn   Func
		gang Gang
		want Outcome
	}{
		"a gang's rank stopped":   {says("REFUEL_STOPPED step=3 total=10"), gangOf(1, 2, 1), GangStopped},
		"a gang's rank 0 stopped": {says("REFUEL_STOPPED step=3 total=10"), gangOf(0, 2, 1), GangStopped},
		"a gang's rank done":      {says("REFUEL_DONE step=10 total=10"), gangOf(1, 2, 1), Completed},
		"one node":                {says("REFUEL_STOPPED step=3 total=10"), Gang{}, Completed},
		"not the protocol line":   {says("REFUEL_STOPPEDX step=3"), gangOf(1, 2, 1), Completed},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			cfg := h.config("")
			cfg.Func, cfg.Command, cfg.Gang = tc.fn, []string{"says"}, tc.gang
			res, err := h.run(context.Background(), cfg)()
			if err != nil || res.Outcome != tc.want {
				t.Errorf("Run = %s, %v; want %s", res.Outcome, err, tc.want)
			}
		})
	}
}

// freePort is a loopback port nothing listens on, for a gang's rank 0.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// The demo trainer as a gang of two under two agents: a notice on rank
// 1's instance preempts it and stops rank 0 at the same step, whose
// checkpoint rank 0's agent uploads; a stop of rank 0 stops rank 1; the
// third attempt completes with TrainGang's model, only rank 0's agent
// having uploaded anything.
func TestGangOfDemoTrainers(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	const steps = 400
	type rankRun struct {
		wait    func() (Result, error)
		events  *recorder
		notices *fakeSource
		stop    context.CancelFunc
	}
	attempt := func(n int) []rankRun {
		port := freePort(t)
		runs := make([]rankRun, 2)
		for r := range runs {
			cfg := h.demo(steps, 50, 2*time.Millisecond)
			cfg.Gang, cfg.Attempt, cfg.InstanceID = gangOf(r, 2, port), n, fmt.Sprintf("i-%d-%d", n, r)
			cfg.Dir, cfg.Stdout, cfg.Stderr = t.TempDir(), io.Discard, io.Discard
			runs[r].events = newRecorder()
			runs[r].notices = newFakeSource()
			cfg.OnEvent, cfg.Notices = runs[r].events.record, runs[r].notices
			ctx, cancel := context.WithCancel(context.Background())
			runs[r].stop = cancel
			runs[r].wait = h.run(ctx, cfg)
		}
		return runs
	}
	results := func(runs []rankRun) []Result {
		var out []Result
		for r, rr := range runs {
			res, err := rr.wait()
			rr.stop()
			if err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
			out = append(out, res)
		}
		return out
	}

	runs := attempt(1)
	runs[0].events.waitFor(t, EventCheckpoint, 50)
	runs[1].notices.publish(&Notice{Action: "terminate", Time: time.Now().Add(time.Minute)}, nil)
	res := results(runs)
	if res[1].Outcome != Preempted || res[0].Outcome != GangStopped || res[0].LastCheckpoint == nil || res[0].LastCheckpoint.Step <= 50 {
		t.Fatalf("after a notice on rank 1: rank 0 %s at %+v, rank 1 %s; want rank 1 preempted, rank 0 gang-stopped with its checkpoint past step 50",
			res[0].Outcome, res[0].LastCheckpoint, res[1].Outcome)
	}
	first := res[0].LastCheckpoint.Step
	if res[1].LastStep != first {
		t.Errorf("rank 1 stopped at step %d, rank 0 at %d; want the gang at one step", res[1].LastStep, first)
	}

	runs = attempt(2)
	runs[1].events.waitFor(t, EventRestored, first)
	runs[0].events.waitFor(t, EventCheckpoint, (first/50+1)*50)
	runs[0].stop()
	res = results(runs)
	if res[0].Outcome != Stopped || res[1].Outcome != GangStopped || res[0].RestoredStep != first || res[1].RestoredStep != first {
		t.Fatalf("after a stop of rank 0: rank 0 %+v, rank 1 %+v; want rank 0 stopped, rank 1 gang-stopped, both from step %d", res[0], res[1], first)
	}

	runs = attempt(3)
	res = results(runs)
	want := trainer.TrainGang(trainer.Config{Steps: steps, Seed: trainer.DefaultSeed, Features: 8}, 2).Digest()
	if res[0].Outcome != Completed || res[1].Outcome != Completed {
		t.Fatalf("third attempt: %s and %s; want both completed", res[0].Outcome, res[1].Outcome)
	}
	if step, digest := h.storedDigest(); step != steps || digest != want {
		t.Errorf("stored model: step %d digest %s; want step %d, TrainGang's %s", step, digest, steps, want)
	}
	if uploads := runs[1].events.steps(EventCheckpoint); len(uploads) != 0 {
		t.Errorf("rank 1's agent uploaded checkpoints %v; only rank 0's are the job's", uploads)
	}
	rank1, err := h.store.OpenShard(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rank1.Close()
	if ms, err := rank1.List(context.Background()); err != nil || len(ms) != 0 {
		t.Errorf("rank 1's shards: %d, %v; the demo trainer's rank 1 writes none", len(ms), err)
	}
	if !slices.IsSorted(runs[0].events.steps(EventCheckpoint)) {
		t.Errorf("rank 0's uploads out of order: %v", runs[0].events.steps(EventCheckpoint))
	}
}

// A trainer that exits by itself (a gang's rank whose gang stopped) while
// its run is being stopped still has its last checkpoint uploaded: the
// stop that follows a gang's end must not cancel what the gang resumes
// from.
func TestLastCheckpointOutlivesAStopAfterTheTrainerExits(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := h.config("")
	cfg.Command = []string{"trainer"}
	cfg.Func = func(_ context.Context, _ <-chan struct{}, _, env []string, stdout, _ io.Writer) int {
		dir := lookupEnv(env, "REFUEL_CHECKPOINT_DIR")
		tmp := filepath.Join(dir, ".tmp")
		if os.MkdirAll(tmp, 0o700) != nil || os.WriteFile(filepath.Join(tmp, "model"), []byte("last"), 0o600) != nil ||
			os.Rename(tmp, filepath.Join(dir, stepName(7))) != nil {
			return 1
		}
		fmt.Fprintln(stdout, "REFUEL_PROGRESS step=7")
		cancel() // the stop comes as the trainer exits, before the upload
		return 0
	}
	res, err := h.run(ctx, cfg)()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.LastCheckpoint == nil || res.LastCheckpoint.Step != 7 {
		t.Fatalf("outcome %s, last checkpoint %+v; want step 7 uploaded", res.Outcome, res.LastCheckpoint)
	}
	ms, err := h.store.List(context.Background())
	if err != nil || len(ms) != 1 || ms[0].Step != 7 {
		t.Errorf("store holds %+v (%v); want step 7", ms, err)
	}
}
