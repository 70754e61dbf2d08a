package trainer

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childArgsEnv makes the test binary act as the trainer (see TestMain), so
// a test can run it as a real process and signal it.
const childArgsEnv = "REFUEL_TRAINER_TEST_CHILD_ARGS"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(childArgsEnv); ok {
		os.Exit(Main(strings.Fields(args), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestMainExitCodes(t *testing.T) {
	tests := map[string]struct {
		args   string
		noDir  bool
		prior  *Config // a run to stop at step 5 in the directory first
		code   int
		stderr string
	}{
		"finishes":            {args: "--steps 20 --checkpoint-every 5 --step-time 0 --seed 3 --features 4", code: 0},
		"single-dash flags":   {args: "-steps 3 -step-time 0", code: 0},
		"help":                {args: "-h", code: 0},
		"no steps":            {args: "--step-time 0", code: 2, stderr: "--steps must be at least 1"},
		"negative step time":  {args: "--steps 3 --step-time -1s", code: 2, stderr: "--step-time"},
		"negative interval":   {args: "--steps 3 --checkpoint-every -1", code: 2, stderr: "--checkpoint-every"},
		"no features":         {args: "--steps 3 --features 0", code: 2, stderr: "--features"},
		"unknown flag":        {args: "--steps 3 --gpus 8", code: 2, stderr: "gpus"},
		"not a duration":      {args: "--steps 3 --step-time fast", code: 2, stderr: "step-time"},
		"stray argument":      {args: "--steps 3 python", code: 2, stderr: "unexpected arguments"},
		"no checkpoint dir":   {args: "--steps 3 --step-time 0", noDir: true, code: 2, stderr: CheckpointDirEnv},
		"another run's ckpt":  {args: "--steps 20 --step-time 0 --seed 4 --features 4", prior: &Config{Steps: 20, Seed: 3, Features: 4}, code: 1, stderr: "another run"},
		"resumes its own run": {args: "--steps 20 --step-time 0 --seed 3 --features 4", prior: &Config{Steps: 20, Seed: 3, Features: 4}, code: 0, stderr: "resuming from step-5"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ckpt") // Main creates it
			if tc.noDir {
				dir = ""
			}
			t.Setenv(CheckpointDirEnv, dir)
			if tc.prior != nil {
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				runUntil(t, *tc.prior, dir, 5)
			}
			var stdout, stderr bytes.Buffer
			code := Main(strings.Fields(tc.args), &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("Main(%s) = %d, want %d; stderr:\n%s", tc.args, code, tc.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, stderr.String())
			}
			if code == 0 && !strings.Contains(tc.args, "-h") && !strings.HasPrefix(lastLine(stdout.String()), "REFUEL_DONE ") {
				t.Errorf("stdout does not end with REFUEL_DONE:\n%s", stdout.String())
			}
		})
	}
}

// TestSIGTERM runs the trainer as a real process, sends it SIGTERM while it
// trains, and checks it checkpointed the step it reached and exited 0; then
// resumes from that checkpoint to the end and compares with Train.
func TestSIGTERM(t *testing.T) {
	cfg := Config{Steps: 3000, CheckpointEvery: 7, StepTime: 2 * time.Millisecond, Seed: 21, Features: 16}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(),
		fmt.Sprintf("%s=--steps %d --checkpoint-every %d --step-time %s --seed %d --features %d",
			childArgsEnv, cfg.Steps, cfg.CheckpointEvery, cfg.StepTime, cfg.Seed, cfg.Features),
		CheckpointDirEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		var step, total int64
		if _, err := fmt.Sscanf(lines.Text(), "REFUEL_PROGRESS step=%d total=%d", &step, &total); err == nil && step > 10 {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var last string
	for lines.Scan() {
		last = lines.Text()
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("trainer exited with %v after SIGTERM; stderr:\n%s", err, stderr.String())
	}

	var stopped, total int64
	if _, err := fmt.Sscanf(last, "REFUEL_STOPPED step=%d total=%d", &stopped, &total); err != nil {
		t.Fatalf("last line %q is not REFUEL_STOPPED; stderr:\n%s", last, stderr.String())
	}
	if stopped <= 10 || stopped >= cfg.Steps {
		t.Fatalf("stopped at step %d, want after 10 and before %d", stopped, cfg.Steps)
	}
	m, _, found, err := latest(dir, io.Discard)
	if err != nil || !found || m.Step != stopped {
		t.Fatalf("latest checkpoint is step %d (found %v, %v), want the stopped step %d", m.Step, found, err, stopped)
	}
	ref := cfg
	ref.Steps = stopped
	if want := Train(ref); m.Digest() != want.Digest() {
		t.Errorf("checkpoint at step %d holds %s, Train gives %s", stopped, m.Digest(), want.Digest())
	}

	// Neither changes the weights; they only make the rest of the run quick.
	cfg.StepTime, cfg.CheckpointEvery = 0, 0
	if got, _ := runUntil(t, cfg, dir, -1); got.Digest() != Train(cfg).Digest() {
		t.Errorf("resumed run ends at %s, Train at %s", got.Digest(), Train(cfg).Digest())
	}
}
