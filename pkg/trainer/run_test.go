package trainer

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// runUntil runs one trainer life in dir and stops it after step stop, as a
// SIGTERM would; stop < 0 lets it finish. A stop at the step the run
// resumes from stops it before its first step.
func runUntil(t *testing.T, cfg Config, dir string, stop int64) (Model, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if from, _, _, _ := latest(dir, io.Discard); stop == from.Step {
		cancel()
	}
	var out bytes.Buffer
	s := session{cfg: cfg.withDefaults(), dir: dir, out: &out, log: io.Discard, afterStep: func(step int64) {
		if step == stop {
			cancel()
		}
	}}
	m, err := s.run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return m, out.String()
}

func TestResumeIsExact(t *testing.T) {
	tests := map[string]struct {
		cfg   Config
		stops []int64 // steps after which successive lives are stopped
		// crash loses the checkpoint each stop writes, as SIGKILL would:
		// the next life resumes from the last periodic checkpoint.
		crash bool
	}{
		"uninterrupted":              {cfg: Config{Steps: 40, CheckpointEvery: 10, Seed: 1}},
		"once in the middle":         {cfg: Config{Steps: 40, CheckpointEvery: 10, Seed: 1}, stops: []int64{17}},
		"after the first step":       {cfg: Config{Steps: 40, CheckpointEvery: 10, Seed: 2}, stops: []int64{1}},
		"before the first step":      {cfg: Config{Steps: 40, CheckpointEvery: 10, Seed: 2}, stops: []int64{0, 5}},
		"on a checkpoint boundary":   {cfg: Config{Steps: 40, CheckpointEvery: 10, Seed: 3}, stops: []int64{10, 20, 30}},
		"one step before the end":    {cfg: Config{Steps: 40, CheckpointEvery: 10, Seed: 4}, stops: []int64{39}},
		"at the end":                 {cfg: Config{Steps: 40, CheckpointEvery: 10, Seed: 4}, stops: []int64{40}},
		"every step":                 {cfg: Config{Steps: 12, CheckpointEvery: 5, Seed: 5, Features: 3}, stops: []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
		"twice without progress":     {cfg: Config{Steps: 30, CheckpointEvery: 7, Seed: 6}, stops: []int64{9, 9, 9, 22}},
		"no periodic checkpoints":    {cfg: Config{Steps: 50, Seed: 7, Features: 10}, stops: []int64{13, 31}},
		"checkpoint every step":      {cfg: Config{Steps: 25, CheckpointEvery: 1, Seed: 8}, stops: []int64{3, 4, 24}},
		"wide model":                 {cfg: Config{Steps: 30, CheckpointEvery: 4, Seed: 9, Features: 300}, stops: []int64{11, 19}},
		"large seed":                 {cfg: Config{Steps: 30, CheckpointEvery: 8, Seed: 1<<64 - 1}, stops: []int64{8, 15}},
		"crash between checkpoints":  {cfg: Config{Steps: 40, CheckpointEvery: 10, Seed: 10}, stops: []int64{17, 28}, crash: true},
		"crash before any":           {cfg: Config{Steps: 40, CheckpointEvery: 10, Seed: 11}, stops: []int64{6, 6, 25}, crash: true},
		"crash on a boundary":        {cfg: Config{Steps: 40, CheckpointEvery: 10, Seed: 12}, stops: []int64{20, 21}, crash: true},
		"crash one step before done": {cfg: Config{Steps: 40, CheckpointEvery: 10, Seed: 13}, stops: []int64{39}, crash: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for _, stop := range tc.stops {
				m, out := runUntil(t, tc.cfg, dir, stop)
				if m.Step != stop {
					t.Fatalf("life stopped at step %d, want %d", m.Step, stop)
				}
				last := lastLine(out)
				if stop < tc.cfg.Steps && last != fmt.Sprintf("REFUEL_STOPPED step=%d total=%d", stop, tc.cfg.Steps) {
					t.Errorf("last line %q, want REFUEL_STOPPED at step %d", last, stop)
				}
				if _, err := ReadCheckpoint(filepath.Join(dir, stepDirName(stop))); err != nil {
					t.Fatalf("no checkpoint after stopping: %v", err)
				}
				if tc.crash && !tc.cfg.checkpointDue(stop) {
					if err := os.RemoveAll(filepath.Join(dir, stepDirName(stop))); err != nil {
						t.Fatal(err)
					}
				}
			}
			got, out := runUntil(t, tc.cfg, dir, -1)
			want := Train(tc.cfg)
			if got.Digest() != want.Digest() || got.Step != want.Step || got.Loss != want.Loss {
				t.Errorf("resumed run ends at step %d loss %g %s; Train ends at step %d loss %g %s",
					got.Step, got.Loss, got.Digest(), want.Step, want.Loss, want.Digest())
			}
			wantDone := fmt.Sprintf("REFUEL_DONE step=%d total=%d loss=%g digest=%s", want.Step, want.Step, want.Loss, want.Digest())
			if last := lastLine(out); last != wantDone {
				t.Errorf("last line %q, want %q", last, wantDone)
			}
			checkStepDirs(t, dir, tc.cfg.withDefaults())
		})
	}
}

func TestProgressLines(t *testing.T) {
	tests := map[string]struct {
		cfg  Config
		stop int64
		// want are the steps progress must be reported at, at least.
		want []int64
		last string
	}{
		"to the end": {
			cfg:  Config{Steps: 20, CheckpointEvery: 5, Seed: 1, Features: 4},
			stop: -1,
			want: []int64{0, 5, 10, 15, 20},
			last: "REFUEL_DONE step=20 total=20 ",
		},
		"stopped": {
			cfg:  Config{Steps: 20, CheckpointEvery: 5, Seed: 1, Features: 4},
			stop: 12,
			want: []int64{0, 5, 10, 12},
			last: "REFUEL_STOPPED step=12 total=20",
		},
		"only the end": {
			cfg:  Config{Steps: 9, Seed: 1, Features: 4},
			stop: -1,
			want: []int64{0, 9},
			last: "REFUEL_DONE step=9 total=9 ",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, out := runUntil(t, tc.cfg, t.TempDir(), tc.stop)
			var got []int64
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				var step, total int64
				if _, err := fmt.Sscanf(line, "REFUEL_PROGRESS step=%d total=%d", &step, &total); err == nil {
					if total != tc.cfg.Steps {
						t.Errorf("%q: total %d, want %d", line, total, tc.cfg.Steps)
					}
					got = append(got, step)
				}
			}
			for _, step := range tc.want {
				if !slices.Contains(got, step) {
					t.Errorf("no progress at step %d; reported %v", step, got)
				}
			}
			if !slices.IsSorted(got) {
				t.Errorf("progress went backwards: %v", got)
			}
			if last := lastLine(out); !strings.HasPrefix(last, tc.last) {
				t.Errorf("last line %q, want it to start with %q", last, tc.last)
			}
		})
	}
}

func TestRunRefusesAnotherRunsCheckpoint(t *testing.T) {
	base := Config{Steps: 20, CheckpointEvery: 5, Seed: 1, Features: 4}
	tests := map[string]Config{
		"other seed":     {Steps: 20, Seed: 2, Features: 4},
		"other features": {Steps: 20, Seed: 1, Features: 5},
		"fewer steps":    {Steps: 4, Seed: 1, Features: 4},
	}
	for name, cfg := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			runUntil(t, base, dir, 10)
			s := session{cfg: cfg, dir: dir, out: io.Discard, log: io.Discard}
			if _, err := s.run(t.Context()); err == nil {
				t.Error("run resumed from a checkpoint of another run")
			}
		})
	}
}

func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}
