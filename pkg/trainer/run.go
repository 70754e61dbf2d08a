package trainer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// progressEvery bounds how often progress is printed between checkpoints,
// so fast steps do not flood the agent's log.
const progressEvery = 100 * time.Millisecond

// session is one life of a trainer process: resume from the newest good
// checkpoint, step, checkpoint, and stop at the end or when asked. In a
// gang, rank 0's session does that with the other ranks' gradients, and
// theirs follow it.
type session struct {
	cfg  Config // after withDefaults and validate
	gang gang
	dir  string
	out  io.Writer // protocol lines for the agent
	log  io.Writer // for people
	// kill, when closed, ends the run at once without a checkpoint, as
	// SIGKILL ends a process; nil for a process, which SIGKILL ends itself.
	kill <-chan struct{}
	// abort is done once kill is closed: what ends the gang's connections.
	abort context.Context
	// pace is the timer steps are paced with.
	pace *time.Timer
	// afterStep, when set, is called after every step and before the stop
	// check; tests use it to stop a run after an exact step.
	afterStep func(step int64)
	// listener, when set, is where rank 0 waits for the other ranks
	// instead of a listener of its own on the master address; tests use it.
	listener net.Listener
}

// errKilled ends a session whose kill channel closed.
var errKilled = errors.New("killed")

// run trains until the last step or until ctx is cancelled, and returns
// the model it left on disk (a rank other than 0: the model it ended
// with). A step under way when ctx is cancelled is finished first, as a
// real trainer would finish its batch; in a gang, every rank finishes it.
func (s *session) run(ctx context.Context) (Model, error) {
	abort, stop := context.WithCancel(context.Background())
	defer stop()
	s.abort = abort
	if s.kill != nil {
		go func() {
			select {
			case <-s.kill:
				stop()
			case <-abort.Done():
			}
		}()
	}
	if s.gang.together() && s.gang.Rank > 0 {
		return s.follow(ctx)
	}
	return s.lead(ctx)
}

// lead is the life of a trainer alone, or of a gang's rank 0.
func (s *session) lead(ctx context.Context) (Model, error) {
	p := newProblem(s.cfg.Seed, s.cfg.Features)
	m, saved, err := s.resume()
	if err != nil {
		return Model{}, err
	}
	stop := ctx.Err() != nil
	var t *team
	if s.gang.together() && !stop {
		t, err = s.gather(ctx, m)
		var lost *lostError
		switch {
		case errors.Is(err, errStopped):
			stop = true
		case errors.As(err, &lost):
			fmt.Fprintf(s.log, "trainer: %v; the gang stops at step %d\n", err, m.Step)
			stop = true
		case err != nil:
			return m, err
		default:
			defer t.close()
			defer context.AfterFunc(ctx, t.pat.stop)()
			defer context.AfterFunc(s.abort, t.close)()
		}
	}
	s.progress(m.Step)
	printed := time.Now()
	defer s.stopPacing()
	for m.Step < s.cfg.Steps && !stop {
		if s.killed() {
			return m, errKilled
		}
		began := time.Now()
		if t == nil {
			p.step(m.Weights, m.Step)
		} else {
			lo, hi := shard(0, s.gang.Nodes)
			grad := p.gradient(m.Weights, m.Step, lo, hi)
			stop, err = t.collect(m.Step, grad)
			if err != nil {
				if s.killed() {
					return m, errKilled
				}
				fmt.Fprintf(s.log, "trainer: %v; the gang stops at step %d\n", err, m.Step)
				break
			}
			p.apply(m.Weights, grad)
		}
		m.Step++
		if rest := s.cfg.StepTime - time.Since(began); rest > 0 && !s.sleep(rest) {
			return m, errKilled
		}
		if s.afterStep != nil {
			s.afterStep(m.Step)
		}
		stop = stop || ctx.Err() != nil
		if t != nil {
			// The others go on with the next step while this one checkpoints.
			if err := t.send(m.Step, stop, m.Weights); err != nil {
				if s.killed() {
					return m, errKilled
				}
				fmt.Fprintf(s.log, "trainer: %v; the gang stops at step %d\n", err, m.Step)
				stop = true
			}
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
