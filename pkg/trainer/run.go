package trainer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// progressEvery bounds how often progress is printed between checkpoints,
// so fast steps do not flood the agent's log.
const progressEvery = 100 * time.Millisecond

// session is one life of a trainer process: resume from the newest good
// checkpoint, step, checkpoint, and stop at the end or when asked.
type session struct {
	cfg Config // after withDefaults and validate
	dir string
	out io.Writer // protocol lines for the agent
	log io.Writer // for people
	// kill, when closed, ends the run at once without a checkpoint, as
	// SIGKILL ends a process; nil for a process, which SIGKILL ends itself.
	kill <-chan struct{}
	// pace is the timer steps are paced with.
	pace *time.Timer
	// afterStep, when set, is called after every step and before the stop
	// check; tests use it to stop a run after an exact step.
	afterStep func(step int64)
}

// errKilled ends a session whose kill channel closed.
var errKilled = errors.New("killed")

// run trains until the last step or until ctx is cancelled, and returns
// the model it left on disk. A step under way when ctx is cancelled is
// finished first, as a real trainer would finish its batch.
func (s *session) run(ctx context.Context) (Model, error) {
	p := newProblem(s.cfg.Seed, s.cfg.Features)
	m, saved, err := s.resume()
	if err != nil {
		return Model{}, err
	}
	s.progress(m.Step)
	printed := time.Now()
	defer s.stopPacing()
	for m.Step < s.cfg.Steps && ctx.Err() == nil {
		if s.killed() {
			return m, errKilled
		}
		began := time.Now()
		p.step(m.Weights, m.Step)
		m.Step++
		if rest := s.cfg.StepTime - time.Since(began); rest > 0 && !s.sleep(rest) {
			return m, errKilled
		}
		switch {
		case s.cfg.checkpointDue(m.Step):
			m.Loss = p.loss(m.Weights)
			if err := s.checkpoint(m); err != nil {
				return m, err
			}
			saved = m.Step
			printed = time.Now()
		case time.Since(printed) >= progressEvery:
			s.progress(m.Step)
			printed = time.Now()
		}
		if s.afterStep != nil {
			s.afterStep(m.Step)
		}
	}
	m.Loss = p.loss(m.Weights)
	if m.Step != saved {
		if err := s.checkpoint(m); err != nil {
			return m, err
		}
	}
	if m.Step == s.cfg.Steps {
		fmt.Fprintf(s.out, "REFUEL_DONE step=%d total=%d loss=%g digest=%s\n", m.Step, s.cfg.Steps, m.Loss, m.Digest())
	} else {
		fmt.Fprintf(s.out, "REFUEL_STOPPED step=%d total=%d\n", m.Step, s.cfg.Steps)
	}
	return m, nil
}

// sleep paces a step; false when the session was killed meanwhile.
func (s *session) sleep(d time.Duration) bool {
	if s.pace == nil {
		s.pace = time.NewTimer(d)
	} else {
		s.pace.Reset(d)
	}
	select {
	case <-s.pace.C:
		return true
	case <-s.kill:
		return false
	}
}

func (s *session) stopPacing() {
	if s.pace != nil {
		s.pace.Stop()
	}
}

func (s *session) killed() bool {
	select {
	case <-s.kill:
		return true
	default:
		return false
	}
}

// resume returns the model to continue from and the step already on disk
// (-1 for none, so even a run stopped before its first step leaves a
// checkpoint behind).
func (s *session) resume() (Model, int64, error) {
	m, st, found, err := latest(s.dir, s.log)
	if err != nil {
		return Model{}, 0, err
	}
	if !found {
		fmt.Fprintf(s.log, "trainer: no checkpoint in %s, starting at step 0 of %d\n", s.dir, s.cfg.Steps)
		return Model{Weights: make([]float64, s.cfg.Features)}, -1, nil
	}
	if st.Seed != s.cfg.Seed || st.Features != s.cfg.Features {
		return Model{}, 0, fmt.Errorf("checkpoint %s is of seed %d with %d features, not seed %d with %d: it belongs to another run",
			stepDirName(m.Step), st.Seed, st.Features, s.cfg.Seed, s.cfg.Features)
	}
	if m.Step > s.cfg.Steps {
		return Model{}, 0, fmt.Errorf("checkpoint %s is past the last step %d", stepDirName(m.Step), s.cfg.Steps)
	}
	fmt.Fprintf(s.log, "trainer: resuming from %s of %d (loss %g)\n", stepDirName(m.Step), s.cfg.Steps, m.Loss)
	return m, m.Step, nil
}

func (s *session) checkpoint(m Model) error {
	if err := writeCheckpoint(s.dir, s.cfg, m); err != nil {
		return fmt.Errorf("writing checkpoint %s: %w", stepDirName(m.Step), err)
	}
	fmt.Fprintf(s.log, "trainer: wrote %s (loss %g)\n", stepDirName(m.Step), m.Loss)
	s.progress(m.Step)
	return nil
}

func (s *session) progress(step int64) {
	fmt.Fprintf(s.out, "REFUEL_PROGRESS step=%d total=%d\n", step, s.cfg.Steps)
}
