package agent

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// localPoll is how often the checkpoint directory is looked at. Polling
// is portable and cheap next to a checkpoint's upload.
const localPoll = 200 * time.Millisecond

// syncer uploads the trainer's completed checkpoints.
type syncer struct {
	r *run
	// uploaded is the newest step in the store from this run, restored or
	// uploaded; -1 for none. Steps at or below it are never uploaded.
	uploaded int64
}

func newSyncer(r *run) *syncer {
	s := &syncer{r: r, uploaded: -1}
	if m := r.result.LastCheckpoint; m != nil {
		s.uploaded = m.Step
	}
	return s
}

// loop sweeps the checkpoint directory until it receives a context on
// final, then sweeps once more with that context and returns its error.
// Earlier failures are retried on the next sweep, so only the last one can
// lose a checkpoint.
func (s *syncer) loop(ctx context.Context, final <-chan context.Context) error {
	tick := time.NewTicker(localPoll)
	defer tick.Stop()
	for {
		select {
		case fctx := <-final:
			return s.sweep(fctx)
		case <-tick.C:
			_ = s.sweep(ctx)
		}
	}
}

// sweep uploads every completed step newer than the last upload, oldest
// first, then drops local steps older than the newest uploaded.
func (s *syncer) sweep(ctx context.Context) error {
	cfg := s.r.cfg
	dir := s.r.checkpointDir()
	steps, err := localSteps(dir)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	for _, l := range steps {
		if l.step <= s.uploaded {
			continue
		}
		began := time.Now()
		store := s.r.uploads()
		m, err := store.Save(ctx, l.step, filepath.Join(dir, l.name), cfg.InstanceID)
		if err != nil {
			return fmt.Errorf("agent: upload checkpoint %s: %w", l.name, err)
		}
		s.uploaded = l.step
		took := time.Since(began)
		if cfg.Gang.ownsCheckpoints() {
			s.r.say("uploaded checkpoint step %d in %s", l.step, took.Round(time.Millisecond))
			s.r.emit(Event{Kind: EventCheckpoint, Step: l.step, Checkpoint: &m, WriteTime: took})
		} else {
			// A shard is not the job's checkpoint: nothing to report.
			s.r.say("uploaded rank %d's shard of step %d to %s in %s", cfg.Gang.Rank, l.step, store.StepURL(l.step), took.Round(time.Millisecond))
		}
		// Pruning is housekeeping: a failure leaves extra checkpoints in
		// the store, which the next prune removes.
		_, _ = store.Prune(ctx, cfg.Keep)
	}
	for _, l := range steps {
		if l.step < s.uploaded {
			// Like pruning: what is not removed now is tried next sweep.
			_ = os.RemoveAll(filepath.Join(dir, l.name))
		}
	}
	return nil
}

// stepName is a local checkpoint directory's name.
func stepName(step int64) string { return "step-" + strconv.FormatInt(step, 10) }

// localStep is a completed checkpoint directory.
type localStep struct {
	step int64
	name string
}

// localSteps lists the completed checkpoints in dir, in step order. Names
// are parsed, so step-0042 is step 42.
func localSteps(dir string) ([]localStep, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var steps []localStep
	for _, e := range entries {
		if step, ok := parseStepName(e.Name()); ok && e.IsDir() {
			steps = append(steps, localStep{step: step, name: e.Name()})
		}
	}
	slices.SortFunc(steps, func(a, b localStep) int { return cmp.Compare(a.step, b.step) })
	return steps, nil
}

func parseStepName(name string) (int64, bool) {
	digits, ok := strings.CutPrefix(name, "step-")
	if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	step, err := strconv.ParseInt(digits, 10, 64)
	return step, err == nil
}
