package tests

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"refuel/workflows/training"

	"refuel/jobs"
	"refuel/pkg/checkpoint"
	"refuel/pkg/spec"
	"refuel/workflows"
)

// gangArgs keep the data-parallel example's run to seconds on one CPU:
// pytorchSteps steps of at least 10ms, so a stop finds it mid-run. The
// pace changes no bits: runs nothing stops go at full speed (gangSteps).
var (
	gangSteps = []string{"--steps", strconv.Itoa(pytorchSteps)}
	gangArgs  = slices.Concat(gangSteps, []string{"--step-time", "0.01"})
)

// TestPyTorchGang runs the example data-parallel trainer
// (examples/pytorch/train_distributed.py, torch.distributed on gloo) as
// the job of examples/pytorch/job-2-nodes.yaml: a gang of two node-agent
// processes on the local cloud. Rank 1's instance gets an interruption
// notice mid-run; both ranks stop at one step, rank 0 checkpoints it,
// only rank 1's node is replaced, and the gang trains on from that
// checkpoint to weights bit-identical to an uninterrupted gang's. Each
// rank's trainer saw its place (REFUEL_NODE_RANK, REFUEL_NUM_NODES and
// rank 0's loopback address), and the job's checkpoints are rank 0's.
func TestPyTorchGang(t *testing.T) {
	parallel(t)
	python := torchPython(t)
	workdir, err := filepath.Abs(filepath.Join("..", "examples", "pytorch"))
	if err != nil {
		t.Fatal(err)
	}
	js, err := spec.ReadJobSpec(filepath.Join(workdir, "job-2-nodes.yaml"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if js.Resources.NodeCount() != 2 || len(js.Command) < 2 || js.Command[1] != "train_distributed.py" {
		t.Fatalf("example gang job runs %q on %d nodes; want train_distributed.py on 2", js.Command, js.Resources.NodeCount())
	}
	js.Workdir = workdir
	js.Command = append([]string{python, "train_distributed.py"}, gangArgs...)
	js.Env["PYTHONDONTWRITEBYTECODE"] = "1" // no __pycache__ left in the checkout
	if !maps.Equal(js.Env, gangJobEnv) {
		t.Fatalf("the gang job's env %v; the uninterrupted gang runs with %v", js.Env, gangJobEnv)
	}
	bucket := (&url.URL{Scheme: "file", Path: filepath.ToSlash(t.TempDir())}).String()
	js.Checkpoint.URL, js.Checkpoint.Interval = bucket, "1s"
	s := startStack(t, nil)
	ctx := context.Background()
	began := time.Now()
	run, err := jobs.Submit(ctx, s.Client, js)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	st, err := jobs.WaitFor(wctx, s.Client, js.ID, func(s training.Status) bool {
		return s.LastCheckpoint != nil && s.State == workflows.StateRunning && len(s.Nodes) == 2
	})
	if err != nil {
		t.Fatal(err)
	}
	rank0, rank1 := st.Nodes[0].Instance.ID, st.Nodes[1].Instance.ID
	if ckpt := st.LastCheckpoint.Step; ckpt >= pytorchSteps {
		t.Fatalf("the gang finished (step %d) before rank 1 could be interrupted", ckpt)
	}
	if _, err := jobs.Interrupt(wctx, s.Client, rank1, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	interrupted := time.Now()
	var final training.Status
	if err := run.Get(wctx, &final); err != nil {
		t.Fatal(err)
	}
	t.Logf("gang on %s and %s; rank 1 interrupted after %s at checkpoint step %d; completed %s later at step %d/%d",
		rank0, rank1, interrupted.Sub(began).Round(time.Millisecond), st.LastCheckpoint.Step,
		time.Since(interrupted).Round(time.Millisecond), final.Step, final.TotalSteps)
	if final.State != workflows.StateCompleted || final.Preemptions != 1 || final.NodeReplacements != 1 ||
		final.TotalSteps != pytorchSteps || final.LastCheckpoint == nil || final.LastCheckpoint.Step != pytorchSteps {
		t.Fatalf("final status %+v; want completed at step %d after one preemption and one node replaced", final, pytorchSteps)
	}
	if p := final.LastPreemption; p == nil || p.InstanceID != rank1 || !p.WithNotice {
		t.Errorf("last preemption %+v; want rank 1's %s, with notice", p, rank1)
	}
	rec := final.LastRecovery
	if rec == nil || rec.InstanceID == rank0 || rec.InstanceID == rank1 {
		t.Fatalf("last recovery %+v; want one on a new instance", rec)
	}
	replacement := rec.InstanceID
	// One new instance for the node lost: rank 0's was kept.
	var paid []string
	for _, seg := range final.Ledger.Segments {
		if !slices.Contains(paid, seg.InstanceID) {
			paid = append(paid, seg.InstanceID)
		}
	}
	if want := []string{rank0, rank1, replacement}; !slices.Equal(paid, want) {
		t.Errorf("instances paid for %v; want %v: rank 0's kept, rank 1's replaced once", paid, want)
	}

	store, err := checkpoint.Open(ctx, bucket, js.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	got, gotState := storedWeights(t, store)
	want := uninterruptedGang(t, python, workdir)
	if !bytes.Equal(got, want) {
		t.Fatalf("final weights (sha256 %s) differ from an uninterrupted gang's (%s)", sha(got), sha(want))
	}
	if gotState.Digest != sha(got) {
		t.Errorf("state.json digest %s, weights.bin %s", gotState.Digest, sha(got))
	}
	t.Logf("final weights identical to an uninterrupted gang's: %d bytes, sha256 %s", len(got), sha(got))
	// Rank 1 writes no checkpoints: none of its own is kept as a shard,
	// nor the job's it was given to resume from.
	shards, err := store.OpenShard(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer shards.Close()
	if ms, err := shards.List(ctx); err != nil || len(ms) != 0 {
		t.Errorf("rank 1's shards in the store: %v, %v; want none", ms, err)
	}

	// Every rank's output, of both attempts, is in the store.
	chunks, err := store.NewLogReader().Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[checkpoint.LogSource]string{}
	var attempts []int
	for _, c := range chunks {
		if !slices.Contains(attempts, c.Attempt) {
			attempts = append(attempts, c.Attempt)
		}
		for _, l := range c.Lines {
			out[c.LogSource] += string(l.Stream) + ": " + l.Text + "\n"
		}
	}
	slices.Sort(attempts)
	if len(attempts) != 2 || len(out) != 4 {
		t.Fatalf("output of attempts %v from %d sources; want two attempts of two ranks each:\n%v", attempts, len(out), out)
	}
	first, second := attempts[0], attempts[1]
	joined := func(rank int) string {
		return fmt.Sprintf("stderr: train_distributed.py rank %d: rank %d of 2 joined at 127.0.0.1:", rank, rank)
	}
	done := fmt.Sprintf("stdout: REFUEL_DONE step=%d total=%d", pytorchSteps, pytorchSteps)
	for src, wants := range map[checkpoint.LogSource][]string{
		{Attempt: first, Instance: rank0}:  {joined(0), "stdout: REFUEL_STOPPED step=", "refuel: trainer exited with code 0"},
		{Attempt: first, Instance: rank1}:  {joined(1), "refuel: interruption notice", "stdout: REFUEL_STOPPED step=", "refuel: trainer exited with code 0: preempted"},
		{Attempt: second, Instance: rank0}: {"stderr: train.py: resuming from step-", joined(0), done, "refuel: trainer exited with code 0: completed"},
		// Rank 1 may be stopped as it leaves after rank 0, which is done.
		{Attempt: second, Instance: replacement}: {"stderr: train.py: resuming from step-", joined(1), done, "refuel: trainer exited with code 0"},
	} {
		for _, w := range wants {
			if !strings.Contains(out[src], w) {
				t.Errorf("output of attempt %d on %s lacks %q:\n%s", src.Attempt, src.Instance, w, out[src])
			}
		}
	}
}

// TestPyTorchDistributedTrainer runs examples/pytorch/train_distributed.py
// alone, as two processes on loopback with the gang's variables set as
// the agents set them: straight through, both ranks end with one model
// and rank 0 alone writes checkpoints; a SIGTERM to rank 1 stops both at
// one step, which rank 0 checkpoints, and resumed from it (the job's
// checkpoint restored on every rank, as the agents do) the gang ends with
// the same bits; a rank killed outright leaves rank 0 to checkpoint the
// last step done and stop.
func TestPyTorchDistributedTrainer(t *testing.T) {
	parallel(t)
	python := torchPython(t)
	workdir, err := filepath.Abs(filepath.Join("..", "examples", "pytorch"))
	if err != nil {
		t.Fatal(err)
	}
	want := uninterruptedGang(t, python, workdir)

	// Stopped: rank 1's notice stops the gang, rank 0 checkpoints.
	dirs := rankDirs(t, 2)
	ranks := startRanks(t, python, workdir, dirs, gangArgs...)
	ranks[1].waitTraining(t)
	if err := ranks[1].cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped := protocol(t, ranks[0].wait(t), "REFUEL_STOPPED")["step"]
	if got := protocol(t, ranks[1].wait(t), "REFUEL_STOPPED")["step"]; got != stopped {
		t.Fatalf("rank 0 stopped at step %s, rank 1 at %s; want one step", stopped, got)
	}
	if steps(t, dirs[0]) != "step-"+stopped || steps(t, dirs[1]) != "" {
		t.Fatalf("checkpoints after the stop: rank 0 %q, rank 1 %q; want step-%s on rank 0 alone", steps(t, dirs[0]), steps(t, dirs[1]), stopped)
	}
	t.Logf("rank 1's SIGTERM stopped the gang at step %s", stopped)

	// Resumed: every rank from rank 0's checkpoint.
	resumed := rankDirs(t, 2)
	for _, d := range resumed {
		copyDir(t, filepath.Join(dirs[0], "step-"+stopped), filepath.Join(d, "step-"+stopped))
	}
	ranks = startRanks(t, python, workdir, resumed, gangSteps...)
	outs := []string{ranks[0].wait(t), ranks[1].wait(t)}
	for r, o := range outs {
		if !strings.Contains(o, "train.py: resuming from step-"+stopped) {
			t.Errorf("rank %d did not resume from step-%s:\n%s", r, stopped, o)
		}
		if d := protocol(t, o, "REFUEL_DONE")["digest"]; d != sha(want) {
			t.Errorf("rank %d's resumed model %s; want the uninterrupted gang's %s", r, d, sha(want))
		}
	}
	final := filepath.Join(resumed[0], "step-"+strconv.Itoa(pytorchSteps), "weights.bin")
	if got, err := os.ReadFile(final); err != nil || !bytes.Equal(got, want) {
		t.Errorf("rank 0's final weights after the resume (%v) differ from the uninterrupted gang's", err)
	}

	// Killed: rank 0 checkpoints the last step done and stops.
	dirs = rankDirs(t, 2)
	ranks = startRanks(t, python, workdir, dirs, slices.Concat(gangArgs, []string{"--timeout", "20"})...)
	ranks[1].waitTraining(t)
	if err := ranks[1].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	o := ranks[0].wait(t)
	last := protocol(t, o, "REFUEL_STOPPED")["step"]
	if !strings.Contains(o, "train_distributed.py rank 0: a rank went away") || steps(t, dirs[0]) != "step-"+last {
		t.Fatalf("rank 0 after rank 1 was killed: checkpoints %q, output:\n%s", steps(t, dirs[0]), o)
	}
	t.Logf("rank 1 killed: rank 0 checkpointed step %s and stopped", last)

	// Stopped while the gang forms (a notice as its node starts): rank 0,
	// and rank 1, each alone waiting for the other, stops at once rather
	// than at the end of its join timeout.
	var lone []*rankProcess
	for r := range 2 {
		lone = append(lone, startRank(t, python, workdir, r, 2, freePort(t), rankDirs(t, 1)[0], slices.Concat(gangArgs, []string{"--timeout", "60"})...))
	}
	for _, rp := range lone {
		rp.waitLine(t, "the restore", func(line string) bool { return strings.HasPrefix(line, "train.py: no checkpoint in ") })
	}
	time.Sleep(300 * time.Millisecond) // into the wait for the other
	asked := time.Now()
	for _, rp := range lone {
		if err := rp.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, rp := range lone {
		if got := protocol(t, rp.wait(t), "REFUEL_STOPPED")["step"]; got != "0" {
			t.Errorf("rank %d stopped before its gang formed says step %s; want 0", rp.rank, got)
		}
	}
	if took := time.Since(asked); took > 30*time.Second {
		t.Errorf("ranks stopped before their gang formed took %s to exit; want it at once, not at the join timeout", took)
	}
	t.Logf("ranks stopped before their gang formed exited %s after SIGTERM", time.Since(asked).Round(time.Millisecond))
}

// uninterruptedGang runs a gang of two ranks of train_distributed.py
// straight through and returns rank 0's final weights, checking that
// both ranks ended with that model and that rank 1 wrote no checkpoint.
func uninterruptedGang(t *testing.T, python, workdir string) []byte {
	t.Helper()
	dirs := rankDirs(t, 2)
	ranks := startRanks(t, python, workdir, dirs, gangSteps...)
	var digests []string
	for r, rk := range ranks {
		o := rk.wait(t)
		if !strings.Contains(o, fmt.Sprintf("train_distributed.py rank %d: rank %d of 2 joined at 127.0.0.1:", r, r)) {
			t.Errorf("rank %d did not join its gang as rank %d of 2:\n%s", r, r, o)
		}
		digests = append(digests, protocol(t, o, "REFUEL_DONE")["digest"])
	}
	w, err := os.ReadFile(filepath.Join(dirs[0], "step-"+strconv.Itoa(pytorchSteps), "weights.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if digests[0] != sha(w) || digests[1] != sha(w) {
		t.Fatalf("the ranks' models %v; want both rank 0's final weights %s", digests, sha(w))
	}
	if got := steps(t, dirs[1]); got != "" {
		t.Errorf("rank 1 wrote checkpoints %q; want none: rank 0's are the job's", got)
	}
	return w
}

// rankProcess is one rank of train_distributed.py that a test runs.
type rankProcess struct {
	rank int
	cmd  *exec.Cmd
	read chan struct{} // closed once its output is all read

	mu  sync.Mutex
	out strings.Builder // stdout and stderr, in order
}

// startRanks starts one rank per checkpoint directory, on a free
// loopback port, with the variables a gang's agents set.
func startRanks(t *testing.T, python, workdir string, dirs []string, args ...string) []*rankProcess {
	t.Helper()
	port := freePort(t)
	var ranks []*rankProcess
	for r, dir := range dirs {
		ranks = append(ranks, startRank(t, python, workdir, r, len(dirs), port, dir, args...))
	}
	return ranks
}

// gangJobEnv is the env of the example gang job as TestPyTorchGang runs
// it: the ranks a test starts itself run in the environment its agents
// would give them.
var gangJobEnv = map[string]string{"OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}

// startRank starts rank of a gang of nodes whose rank 0 listens on port.
func startRank(t *testing.T, python, workdir string, rank, nodes int, port, dir string, args ...string) *rankProcess {
	t.Helper()
	rp := &rankProcess{rank: rank, read: make(chan struct{})}
	rp.cmd = exec.Command(python, append([]string{"train_distributed.py"}, args...)...)
	rp.cmd.Dir = workdir
	rp.cmd.Env = agentEnv(t, gangJobEnv, "REFUEL_CHECKPOINT_DIR="+dir,
		"REFUEL_NODE_RANK="+strconv.Itoa(rank), "REFUEL_NUM_NODES="+strconv.Itoa(nodes),
		"REFUEL_MASTER_ADDR=127.0.0.1", "REFUEL_MASTER_PORT="+port)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	rp.cmd.Stdout, rp.cmd.Stderr = pw, pw
	err = rp.cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		t.Fatal(err)
	}
	go rp.scan(pr)
	t.Cleanup(func() {
		_ = rp.cmd.Process.Kill()
		<-rp.read
		_ = rp.cmd.Wait()
	})
	return rp
}

// freePort is a loopback port no one listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	_, port, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	return port
}

func (rp *rankProcess) scan(pr *os.File) {
	defer close(rp.read)
	defer pr.Close()
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		rp.mu.Lock()
		rp.out.WriteString(sc.Text() + "\n")
		rp.mu.Unlock()
	}
}

func (rp *rankProcess) output() string {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.out.String()
}

// waitTraining waits until the rank has taken steps.
func (rp *rankProcess) waitTraining(t *testing.T) {
	t.Helper()
	rp.waitLine(t, "steps taken", func(line string) bool {
		return strings.HasPrefix(line, "REFUEL_PROGRESS step=") && !strings.HasPrefix(line, "REFUEL_PROGRESS step=0 ")
	})
}

// waitLine waits until the rank prints a line that matches.
func (rp *rankProcess) waitLine(t *testing.T, what string, match func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		for line := range strings.Lines(rp.output()) {
			if match(line) {
				return
			}
		}
		select {
		case <-rp.read:
			t.Fatalf("rank %d ended before %s:\n%s", rp.rank, what, rp.output())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("rank %d: no %s within a minute:\n%s", rp.rank, what, rp.output())
		}
	}
}

// wait waits for the rank to exit 0 and returns its output.
func (rp *rankProcess) wait(t *testing.T) string {
	t.Helper()
	select {
	case <-rp.read:
	case <-time.After(2 * time.Minute):
		_ = rp.cmd.Process.Kill()
		<-rp.read
	}
	err := rp.cmd.Wait()
	if err != nil {
		t.Fatalf("rank %d: %v\n%s", rp.rank, err, rp.output())
	}
	return rp.output()
}

// rankDirs are n checkpoint directories, one per rank, not made yet.
func rankDirs(t *testing.T, n int) []string {
	t.Helper()
	base := t.TempDir()
	var dirs []string
	for r := range n {
		dirs = append(dirs, filepath.Join(base, "rank-"+strconv.Itoa(r)))
	}
	return dirs
}

// protocol is the fields of the trainer's last line starting with word:
// "REFUEL_DONE step=400 digest=…" gives step and digest.
func protocol(t *testing.T, out, word string) map[string]string {
	t.Helper()
	var fields map[string]string
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != word {
			continue
		}
		fields = map[string]string{}
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			fields[k] = v
		}
	}
	if fields == nil {
		t.Fatalf("no %s line in the trainer's output:\n%s", word, out)
	}
	return fields
}

// steps lists the step-<N> directories in dir, space-separated.
func steps(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "step-") {
			names = append(names, e.Name())
		}
	}
	return strings.Join(names, " ")
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
}
