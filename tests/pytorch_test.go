package tests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"refuel/workflows/training"

	"refuel/jobs"
	"refuel/pkg/agent"
	"refuel/pkg/checkpoint"
	"refuel/pkg/cloud/local"
	"refuel/pkg/spec"
	"refuel/workflows"
)

// pytorchSteps keeps the example trainer's run to seconds on one CPU.
const pytorchSteps = 400

// torchPython is a python3 that imports torch: Debian's (what `make test`
// installs) first, since the python3 on PATH may be a pyenv one that does
// not see Debian's packages. The test skips, saying so, only without one.
func torchPython(t *testing.T) string {
	t.Helper()
	candidates := []string{"/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	for _, py := range candidates {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := exec.CommandContext(ctx, py, "-c", "import torch").Run()
		cancel()
		if err == nil {
			return py
		}
	}
	t.Skipf("no python3 here imports torch (tried %v): `make test` installs Debian's python3-torch first (apt-get install -y python3-torch, as root)", candidates)
	return ""
}

// TestPyTorchDrill runs the field's drill with the example PyTorch
// trainer (examples/pytorch/train.py) as the job's command, in its
// workdir: it checkpoints, its instance gets an interruption notice and is
// taken, refuel acquires a replacement by itself, the trainer resumes
// from the checkpoint there, and the final weights are bit-identical to an
// uninterrupted run's. Its output, both attempts', is kept in the store.
func TestPyTorchDrill(t *testing.T) {
	parallel(t)
	python := torchPython(t)
	workdir, err := filepath.Abs(filepath.Join("..", "examples", "pytorch"))
	if err != nil {
		t.Fatal(err)
	}
	// The example job, with its workdir this checkout, its python the one
	// that has torch and its steps cut to seconds.
	js, err := spec.ReadJobSpec(filepath.Join(workdir, "job.yaml"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(js.Command) < 2 || js.Command[1] != "train.py" || !strings.HasSuffix(js.Workdir, "/examples/pytorch") {
		t.Fatalf("example job runs %q in %s; want train.py in its examples/pytorch", js.Command, js.Workdir)
	}
	js.Workdir = workdir
	// train.py, relative, is found in the workdir; the interval reaches
	// the trainer as REFUEL_CHECKPOINT_INTERVAL_SECONDS=1.
	js.Command = []string{python, "train.py", "--steps", strconv.Itoa(pytorchSteps), "--step-time", "0.01"}
	bucket := (&url.URL{Scheme: "file", Path: filepath.ToSlash(t.TempDir())}).String()
	js.Checkpoint.URL, js.Checkpoint.Interval = bucket, "1s"
	s := startStack(t, nil)
	ctx := context.Background()
	run, err := jobs.Submit(ctx, s.Client, js)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	st, err := jobs.WaitFor(wctx, s.Client, js.ID, func(s training.Status) bool {
		return s.LastCheckpoint != nil && s.Instance != nil && s.State == workflows.StateRunning
	})
	if err != nil {
		t.Fatal(err)
	}
	first, ckptStep := st.Instance.ID, st.LastCheckpoint.Step
	if ckptStep >= pytorchSteps {
		t.Fatalf("the trainer finished (step %d) before the drill could interrupt it", ckptStep)
	}
	notice, err := jobs.Interrupt(wctx, s.Client, first, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var final training.Status
	if err := run.Get(wctx, &final); err != nil {
		t.Fatal(err)
	}
	t.Logf("checkpoint at step %d on %s, notice at %s; final %s step %d/%d", ckptStep, first, notice.Format(time.RFC3339Nano), final.State, final.Step, final.TotalSteps)
	if final.State != workflows.StateCompleted || final.Preemptions != 1 || final.Recoveries != 1 ||
		final.TotalSteps != pytorchSteps || final.LastCheckpoint == nil || final.LastCheckpoint.Step != pytorchSteps {
		t.Fatalf("final status %+v; want completed after one preemption and one recovery, at step %d", final, pytorchSteps)
	}
	rec := final.LastRecovery
	if rec == nil || rec.InstanceID == first || rec.ResumedFromStep < ckptStep {
		t.Fatalf("last recovery %+v; want a new instance resuming from step %d or later", rec, ckptStep)
	}
	if p := final.LastPreemption; p == nil || !p.WithNotice || p.CheckpointStep < ckptStep {
		t.Errorf("last preemption %+v; want one with notice and its final checkpoint", p)
	}

	store, err := checkpoint.Open(ctx, bucket, js.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	got, gotState := storedWeights(t, store)
	want := referenceWeights(t, python, workdir, js.Env)
	if !bytes.Equal(got, want) {
		t.Fatalf("final weights (sha256 %s) differ from an uninterrupted run's (%s)", sha(got), sha(want))
	}
	if gotState.Digest != sha(got) {
		t.Errorf("state.json digest %s, weights.bin %s", gotState.Digest, sha(got))
	}
	t.Logf("final weights identical to an uninterrupted run's: %d bytes, sha256 %s", len(got), sha(got))

	// Both attempts' output is kept beside the checkpoints, in order.
	chunks, err := store.NewLogReader().Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var order []string
	for _, c := range chunks {
		if _, seen := out[c.Instance]; !seen {
			order = append(order, c.Instance)
		}
		for _, l := range c.Lines {
			out[c.Instance] += string(l.Stream) + ": " + l.Text + "\n"
		}
	}
	if len(order) != 2 || order[0] != first || order[1] != rec.InstanceID {
		t.Fatalf("output of instances %v; want %s's then %s's", order, first, rec.InstanceID)
	}
	for inst, wants := range map[string][]string{
		first:          {"refuel: interruption notice", "stdout: REFUEL_STOPPED step=", "refuel: trainer exited with code 0: preempted"},
		rec.InstanceID: {"stderr: train.py: resuming from step-", fmt.Sprintf("stdout: REFUEL_DONE step=%d total=%d", pytorchSteps, pytorchSteps), "refuel: trainer exited with code 0: completed"},
	} {
		for _, w := range wants {
			if !strings.Contains(out[inst], w) {
				t.Errorf("output on %s lacks %q:\n%s", inst, w, out[inst])
			}
		}
	}
}

type weightsState struct {
	Step   int64  `json:"step"`
	Digest string `json:"digest"`
}

// storedWeights restores the run's newest checkpoint from the store.
func storedWeights(t *testing.T, store *checkpoint.Store) ([]byte, weightsState) {
	t.Helper()
	ms, err := store.List(context.Background())
	if err != nil || len(ms) == 0 {
		t.Fatalf("checkpoints in the store: %v, %v", ms, err)
	}
	dir := t.TempDir()
	if err := store.Restore(context.Background(), ms[0], dir); err != nil {
		t.Fatal(err)
	}
	var st weightsState
	raw, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil || json.Unmarshal(raw, &st) != nil || st.Step != pytorchSteps {
		t.Fatalf("state.json of the newest checkpoint: %s, %v", raw, err)
	}
	w, err := os.ReadFile(filepath.Join(dir, "weights.bin"))
	if err != nil {
		t.Fatal(err)
	}
	return w, st
}

// referenceWeights runs the trainer straight through, uninterrupted, in
// the environment the agent gives it (jobEnv is the job's env).
func referenceWeights(t *testing.T, python, workdir string, jobEnv map[string]string) []byte {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "train.py", "--steps", strconv.Itoa(pytorchSteps))
	cmd.Dir = workdir
	cmd.Env = agentEnv(t, jobEnv, "REFUEL_CHECKPOINT_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("uninterrupted run: %v\n%s", err, out)
	}
	w, err := os.ReadFile(filepath.Join(dir, "step-"+strconv.Itoa(pytorchSteps), "weights.bin"))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// agentEnv is the environment a node agent started by this process's
// local cloud gives a trainer of a job whose env is jobEnv, with the
// contract's variables: computed by the agent's own code from this
// process's environment, as the launcher hands it to the agent (the
// machine's less what refuel withholds). A reference run in any other
// environment would compare two: OPENBLAS_CORETYPE, say, changes a BLAS
// build's results.
func agentEnv(t *testing.T, jobEnv map[string]string, contract ...string) []string {
	t.Helper()
	var job []string
	for name, value := range jobEnv {
		job = append(job, name+"="+value)
	}
	env, err := agent.TrainerEnv(local.MachineEnv(), job, contract)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
