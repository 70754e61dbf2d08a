package trainer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// Retries of a rank that cannot reach rank 0 yet: rank 0's agent may start
// its trainer a little after this one's.
const (
	firstRetry = 50 * time.Millisecond
	lastRetry  = time.Second
	// dialTimeout bounds one try, for an address that drops what it gets.
	dialTimeout = 5 * time.Second
)

// follow is the life of a rank other than 0: join rank 0, then at every
// step send the gradient of this rank's shard and take the weights rank 0
// sends back, until the last step or until the gang stops. Rank 0 holds
// the job's model and writes its checkpoints; this rank writes none.
func (s *session) follow(ctx context.Context) (Model, error) {
	p := newProblem(s.cfg.Seed, s.cfg.Features)
	// The agent restored the job's checkpoint here too: this rank's step
	// before rank 0 answers, and a check that both resume alike.
	restored, _, found, err := latest(s.dir, s.log)
	if err != nil {
		return Model{}, err
	}
	l, m, err := s.join(ctx)
	switch {
	case errors.Is(err, errStopped):
		fmt.Fprintf(s.log, "trainer: rank %d stopped before rank 0 answered\n", s.gang.Rank)
		fmt.Fprintf(s.out, "REFUEL_STOPPED step=%d total=%d\n", restored.Step, s.cfg.Steps)
		return restored, nil
	case err != nil:
		return Model{}, err
	}
	defer l.pat.close()
	if found && restored.Step != m.Step {
		fmt.Fprintf(s.log, "trainer: rank 0 resumes from step %d, this rank restored step %d: rank 0's model is the job's\n", m.Step, restored.Step)
	}
	stopWatch := context.AfterFunc(ctx, l.pat.stop)
	defer stopWatch()
	lo, hi := shard(s.gang.Rank, s.gang.Nodes)
	s.progress(m.Step)
	printed := time.Now()
	defer s.stopPacing()
	for m.Step < s.cfg.Steps {
		if s.killed() {
			return m, errKilled
		}
		began := time.Now()
		grad := p.gradient(m.Weights, m.Step, lo, hi)
		if rest := s.cfg.StepTime - time.Since(began); rest > 0 && !s.sleep(rest) {
			return m, errKilled
		}
		err := l.send(frame{stop: ctx.Err() != nil, step: m.Step, vec: grad})
		var reply frame
		if err == nil {
			reply, err = l.receive(m.Step + 1)
		}
		if err != nil {
			if s.killed() {
				return m, errKilled
			}
			fmt.Fprintf(s.log, "trainer: rank 0 at %s went away during step %d: %v; rank %d stops at step %d\n",
				s.gang.Master, m.Step+1, err, s.gang.Rank, m.Step)
			break
		}
		copy(m.Weights, reply.vec)
		m.Step++
		if s.afterStep != nil {
			s.afterStep(m.Step)
		}
		if s.cfg.checkpointDue(m.Step) || time.Since(printed) >= progressEvery {
			s.progress(m.Step)
			printed = time.Now()
		}
		if reply.stop {
			break
		}
	}
	m.Loss = p.loss(m.Weights)
	s.progress(m.Step) // where it ended, as rank 0's checkpoint reports it
	if m.Step == s.cfg.Steps {
		fmt.Fprintf(s.out, "REFUEL_DONE step=%d total=%d loss=%g digest=%s\n", m.Step, s.cfg.Steps, m.Loss, m.Digest())
	} else {
		fmt.Fprintf(s.out, "REFUEL_STOPPED step=%d total=%d\n", m.Step, s.cfg.Steps)
	}
	return m, nil
}

// join connects to rank 0, retrying while it starts, says hello and waits
// for its welcome and the model to resume from. A stop request meanwhile
// is errStopped; a kill, errKilled; no answer within the join timeout, or
// a refusal, an error saying so.
func (s *session) join(ctx context.Context) (*link, Model, error) {
	deadline := time.Now().Add(s.cfg.JoinTimeout)
	// One context for the handshake, ended by a stop, a kill or the
	// deadline; which one it was decides the outcome.
	hctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	stopOnKill := context.AfterFunc(s.abort, cancel)
	defer stopOnKill()
	outcome := func(err error) error {
		switch {
		case s.killed():
			return errKilled
		case ctx.Err() != nil:
			return errStopped
		case hctx.Err() != nil:
			return fmt.Errorf("rank 0 at %s did not answer rank %d within %s (--join-timeout): %w", s.gang.Master, s.gang.Rank, s.cfg.JoinTimeout, err)
		}
		return fmt.Errorf("joining rank 0 at %s: %w", s.gang.Master, err)
	}

	conn, err := dialRetrying(hctx, s.gang.Master)
	if err != nil {
		return nil, Model{}, outcome(err)
	}
	// The handshake's reads end with hctx: a closed connection unblocks
	// them.
	unblock := context.AfterFunc(hctx, func() { conn.Close() })
	defer unblock()
	_ = conn.SetDeadline(deadline)
	var w welcome
	err = writeMessage(conn, s.hello(s.gang.Rank))
	if err == nil {
		err = readMessage(conn, &w)
	}
	switch {
	case err == nil && w.Error != "":
		conn.Close()
		return nil, Model{}, fmt.Errorf("rank 0 at %s refused rank %d: %s", s.gang.Master, s.gang.Rank, w.Error)
	case err == nil && w.Stopped:
		conn.Close()
		fmt.Fprintf(s.log, "trainer: rank 0 at %s was stopped before every rank had joined\n", s.gang.Master)
		return nil, Model{}, errStopped
	}
	l := newLink(conn, 0, s.cfg.Features, &patience{timeout: s.cfg.PeerTimeout})
	var f frame
	if err == nil {
		f, err = decodeFrame(conn, l.in, l.vec)
	}
	if !unblock() || err != nil {
		conn.Close()
		if err == nil {
			err = hctx.Err()
		}
		return nil, Model{}, outcome(err)
	}
	if f.step < 0 || f.step > s.cfg.Steps {
		conn.Close()
		return nil, Model{}, fmt.Errorf("rank 0 at %s resumes from step %d, outside 0 to %d", s.gang.Master, f.step, s.cfg.Steps)
	}
	fmt.Fprintf(s.log, "trainer: rank %d of %d joined rank 0 at %s; training from step %d\n", s.gang.Rank, s.gang.Nodes, s.gang.Master, f.step)
	return l, Model{Step: f.step, Weights: append([]float64(nil), f.vec...)}, nil
}

// dialRetrying connects to addr, retrying with backoff until ctx ends.
func dialRetrying(ctx context.Context, addr string) (net.Conn, error) {
	wait := firstRetry
	d := net.Dialer{Timeout: dialTimeout}
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return conn, nil
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, err
		case <-timer.C:
		}
		wait = min(2*wait, lastRetry)
	}
}
