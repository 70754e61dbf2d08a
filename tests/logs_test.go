package tests

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"refuel/workflows/training"

	"refuel/jobs"
	"refuel/pkg/checkpoint"
	"refuel/pkg/jobenv"
	"refuel/pkg/spec"
	"refuel/workflows"
)

// flakyTrainer fails its first life with 30 lines on stderr and
// completes the next, printing the environment it was started with.
const flakyTrainer = `echo "attempt $REFUEL_ATTEMPT in $(pwd)"
tr '\0' '\n' < /proc/$$/environ | sed 's/^/ENV /'
echo "REFUEL_PROGRESS step=1 total=1"
if [ ! -e failed-once ]; then
  touch failed-once
  for i in $(seq 1 30); do echo "boom $i" >&2; done
  exit 3
fi
echo "done"
`

// TestTrainerLogsAcrossAttempts runs a shell trainer, a relative command
// in its workdir, that fails once: its two attempts' output (every line of
// the failure, not only the tail the run's status keeps) is in the store
// beside the checkpoints, in order, and the trainer's environment held
// the machine's less what refuel withholds, the job's env and the
// contract's variables, whose names the attempt's output lists.
func TestTrainerLogsAcrossAttempts(t *testing.T) {
	parallel(t)
	workdir := t.TempDir()
	if err := os.WriteFile(filepath.Join(workdir, "train.sh"), []byte(flakyTrainer), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startStack(t, nil)
	ctx := context.Background()
	bucket := (&url.URL{Scheme: "file", Path: filepath.ToSlash(t.TempDir())}).String()
	js := spec.JobSpec{
		ID: "logs-1", Team: "test", Tier: spec.TierCritical, Priority: 50, Work: spec.Duration(2 * time.Second),
		Command: []string{"sh", "train.sh"}, Workdir: workdir,
		Env:        map[string]string{"JOB_TOKEN": "the-jobs-own"},
		Checkpoint: spec.Checkpoint{URL: bucket, Interval: "1s"},
	}
	js.Normalize()
	run, err := jobs.Submit(ctx, s.Client, js)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var final training.Status
	if err := run.Get(wctx, &final); err != nil {
		t.Fatal(err)
	}
	if final.State != workflows.StateCompleted || len(final.Failures) != 1 {
		t.Fatalf("final %s, failures %+v; want completed after one trainer failure", final.State, final.Failures)
	}
	failed := final.Failures[0]
	wantMsg := "trainer exited with code 3: boom 11\n"
	if !strings.HasPrefix(failed.Message, wantMsg) || !strings.Contains(failed.Message, "boom 30\n(whole output: starter logs logs-1 --attempt ") {
		t.Errorf("failure message %q; want the last 20 lines and where the rest is", failed.Message)
	}

	store, err := checkpoint.Open(ctx, bucket, js.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	chunks, err := store.NewLogReader().Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type attempt struct {
		checkpoint.LogSource
		stdout, stderr []string
		env            map[string]string
	}
	var attempts []*attempt
	for _, c := range chunks {
		if n := len(attempts); n == 0 || attempts[n-1].LogSource != c.LogSource {
			attempts = append(attempts, &attempt{LogSource: c.LogSource, env: map[string]string{}})
		}
		a := attempts[len(attempts)-1]
		for _, l := range c.Lines {
			switch l.Stream {
			case checkpoint.Stdout:
				if kv, ok := strings.CutPrefix(l.Text, "ENV "); ok {
					name, value, _ := strings.Cut(kv, "=")
					a.env[name] = value
					continue
				}
				a.stdout = append(a.stdout, l.Text)
			case checkpoint.Stderr:
				a.stderr = append(a.stderr, l.Text)
			}
		}
	}
	if len(attempts) != 2 || attempts[0].Attempt >= attempts[1].Attempt || attempts[0].Instance == attempts[1].Instance {
		t.Fatalf("output of %d sources; want two attempts on two instances, in order", len(attempts))
	}
	var boom []string
	for i := 1; i <= 30; i++ {
		boom = append(boom, fmt.Sprintf("boom %d", i))
	}
	if got := strings.Join(attempts[0].stderr, "\n"); got != strings.Join(boom, "\n") {
		t.Errorf("the failed attempt's stderr in the store:\n%s\nwant all 30 lines", got)
	}
	if !strings.Contains(failed.Message, fmt.Sprintf("--attempt %d)", attempts[0].Attempt)) {
		t.Errorf("failure message %q names another attempt than %d", failed.Message, attempts[0].Attempt)
	}
	last := attempts[1]
	if len(last.stdout) == 0 || last.stdout[0] != fmt.Sprintf("attempt %d in %s", last.Attempt, workdir) || last.stdout[len(last.stdout)-1] != "done" {
		t.Errorf("second attempt's stdout %q; want it to run in the workdir under its attempt number", last.stdout)
	}

	// The trainer keeps the machine's environment (this process's, which
	// the local cloud's machines stand on), less what refuel withholds.
	machine := map[string]string{}
	for _, kv := range jobenv.Machine(os.Environ()) {
		name, value, _ := strings.Cut(kv, "=")
		machine[name] = value
	}
	own := map[string]bool{"JOB_TOKEN": true, "REFUEL_CHECKPOINT_DIR": true, "REFUEL_JOB_ID": true, "REFUEL_INSTANCE_ID": true,
		"REFUEL_ATTEMPT": true, "REFUEL_CHECKPOINT_INTERVAL_SECONDS": true}
	for name, value := range last.env {
		if want, ok := machine[name]; !own[name] && (!ok || value != want) {
			t.Errorf("the trainer's environment holds %s=%q, which is neither the machine's, the job's, nor the contract's", name, value)
		}
	}
	if last.env[machineVar] != machineValue {
		t.Errorf("the machine's %s=%s did not reach the trainer (it has %q)", machineVar, machineValue, last.env[machineVar])
	}
	if _, ok := last.env[workerSecretVar]; ok {
		t.Errorf("the worker's %s reached the trainer", workerSecretVar)
	}
	var envLine string
	for _, c := range chunks {
		for _, l := range c.Lines {
			if l.Stream == checkpoint.AgentStream && strings.HasPrefix(l.Text, "environment: ") && c.Attempt == last.Attempt {
				envLine = l.Text
			}
		}
	}
	// The worker's secret never reached the machine's agent, so the line
	// names no withheld variable of it (pkg/agent tests one that does).
	if !strings.Contains(envLine, " "+machineVar+" ") || !strings.Contains(envLine, " REFUEL_ATTEMPT ") ||
		strings.Contains(envLine, workerSecretVar) || strings.Contains(envLine, "="+machineValue) {
		t.Errorf("the attempt's output says of its environment %q; want the names it got, no value, nothing of the worker's", envLine)
	}
	if last.env["JOB_TOKEN"] != "the-jobs-own" || last.env["REFUEL_JOB_ID"] != js.ID || last.env["REFUEL_ATTEMPT"] != fmt.Sprint(last.Attempt) ||
		last.env["REFUEL_CHECKPOINT_INTERVAL_SECONDS"] != "1" {
		t.Errorf("the trainer's environment %v; want the job's env and the contract's variables", last.env)
	}
	t.Logf("the agent inherited %d variables; the trainer got %d", len(os.Environ()), len(last.env))
}
