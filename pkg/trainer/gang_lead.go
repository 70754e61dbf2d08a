package trainer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"
)

// errStopped ends a gang's handshake that a stop request interrupted.
var errStopped = errors.New("stopped")

// lostError says a rank went away in the middle of a step: its connection
// closed, failed, or stayed silent past the peer timeout.
type lostError struct {
	Rank int
	// Step is the step under way (0-based), the last one done being Step.
	Step int64
	Err  error
}

func (e *lostError) Error() string {
	return fmt.Sprintf("rank %d went away during step %d: %v", e.Rank, e.Step+1, e.Err)
}

func (e *lostError) Unwrap() error { return e.Err }

// team is rank 0's links to the other ranks, in rank order.
type team struct {
	links []*link
	pat   *patience
	grads [][]float64
}

// gather listens on the gang's master address until every other rank has
// joined, refusing connections of another gang or a rank already there,
// then sends each of them the model to resume from. A stop request while
// it waits is errStopped; a kill, errKilled.
func (s *session) gather(ctx context.Context, m Model) (*team, error) {
	ln := s.listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", s.gang.Master); err != nil {
			return nil, fmt.Errorf("rank 0 cannot listen on %s (%s, %s): %w", s.gang.Master, MasterAddrEnv, MasterPortEnv, err)
		}
	}
	defer ln.Close()
	fmt.Fprintf(s.log, "trainer: rank 0 of %d, waiting on %s for the other ranks\n", s.gang.Nodes, ln.Addr())

	arrivals := make(chan arrival)
	quit := make(chan struct{})
	var pending pendingConns
	var wg sync.WaitGroup
	wg.Go(func() { acceptHellos(ln, arrivals, quit, &pending) })
	t := &team{links: make([]*link, s.gang.Nodes-1), pat: &patience{timeout: s.cfg.PeerTimeout}}
	defer func() {
		close(quit)
		ln.Close()
		pending.closeAll()
		wg.Wait()
	}()

	own := s.hello(0)
	timer := time.NewTimer(s.cfg.JoinTimeout)
	defer timer.Stop()
	for joined := 0; joined < len(t.links); {
		select {
		case a := <-arrivals:
			if a.err != nil {
				fmt.Fprintf(s.log, "trainer: a connection from %s said no hello: %v\n", a.conn.RemoteAddr(), a.err)
				a.conn.Close()
				continue
			}
			why := a.hello.mismatch(own)
			if why == "" && t.links[a.hello.Rank-1] != nil {
				why = fmt.Sprintf("rank %d has joined already", a.hello.Rank)
			}
			if why != "" {
				fmt.Fprintf(s.log, "trainer: refused %s: %s\n", a.conn.RemoteAddr(), why)
				_ = a.conn.SetDeadline(time.Now().Add(helloTimeout))
				_ = writeMessage(a.conn, welcome{Error: why})
				a.conn.Close()
				continue
			}
			t.links[a.hello.Rank-1] = newLink(a.conn, a.hello.Rank, s.cfg.Features, t.pat)
			joined++
			fmt.Fprintf(s.log, "trainer: rank %d joined from %s (%d of %d)\n", a.hello.Rank, a.conn.RemoteAddr(), joined+1, s.gang.Nodes)
		case <-ctx.Done():
			// The ranks here stop too; those yet to come find no one and
			// are stopped by their own agents, as every node of a run is.
			t.pat.stop()
			for _, l := range t.links {
				if l != nil && t.pat.arm(l.conn) == nil {
					_ = writeMessage(l.conn, welcome{Stopped: true})
				}
			}
			t.close()
			return nil, errStopped
		case <-s.abort.Done():
			t.close()
			return nil, errKilled
		case <-timer.C:
			var missing []int
			for i, l := range t.links {
				if l == nil {
					missing = append(missing, i+1)
				}
			}
			t.close()
			return nil, fmt.Errorf("ranks %v did not join rank 0 at %s within %s (--join-timeout): is every node's trainer started, with %s and %s naming this address?",
				missing, ln.Addr(), s.cfg.JoinTimeout, MasterAddrEnv, MasterPortEnv)
		}
	}
	for _, l := range t.links {
		err := t.pat.arm(l.conn)
		if err == nil {
			err = writeMessage(l.conn, welcome{})
		}
		if err == nil {
			err = l.send(frame{step: m.Step, vec: m.Weights})
		}
		if err != nil {
			t.close()
			return nil, &lostError{Rank: l.rank, Step: m.Step, Err: t.pat.explain(err)}
		}
	}
	t.grads = make([][]float64, len(t.links))
	fmt.Fprintf(s.log, "trainer: all %d ranks joined; training from step %d\n", s.gang.Nodes, m.Step)
	return t, nil
}

// hello is what rank says of itself when it joins.
func (s *session) hello(rank int) hello {
	return hello{
		Protocol: protocol, Job: s.gang.Job, Attempt: s.gang.Attempt, Rank: rank, Nodes: s.gang.Nodes,
		Seed: s.cfg.Seed, Features: s.cfg.Features, Steps: s.cfg.Steps,
	}
}

// collect reads every other rank's gradient of step, in rank order, and
// adds them to sum, rank 0's own, in that order. stop is set when a rank
// asked to stop after this step.
func (t *team) collect(step int64, sum []float64) (stop bool, err error) {
	for i, l := range t.links {
		f, err := l.receive(step)
		if err != nil {
			return false, &lostError{Rank: l.rank, Step: step, Err: err}
		}
		stop = stop || f.stop
		t.grads[i] = f.vec
	}
	combine(sum, t.grads...)
	return stop, nil
}

// send gives every other rank the weights after step, and whether the
// gang stops there.
func (t *team) send(step int64, stop bool, w []float64) error {
	for _, l := range t.links {
		if err := l.send(frame{stop: stop, step: step, vec: w}); err != nil {
			return &lostError{Rank: l.rank, Step: step, Err: err}
		}
	}
	return nil
}

func (t *team) close() { t.pat.close() }

// arrival is a connection to rank 0 and the hello it said.
type arrival struct {
	conn  net.Conn
	hello hello
	err   error
}

// acceptHellos accepts connections until ln closes and reads each one's
// hello, handing it over unless quit closes first.
func acceptHellos(ln net.Listener, arrivals chan<- arrival, quit <-chan struct{}, pending *pendingConns) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		if !pending.add(conn) {
			conn.Close()
			return
		}
		wg.Go(func() {
			var h hello
			_ = conn.SetDeadline(time.Now().Add(helloTimeout))
			err := readMessage(conn, &h)
			pending.remove(conn)
			select {
			case arrivals <- arrival{conn: conn, hello: h, err: err}:
			case <-quit:
				conn.Close()
			}
		})
	}
}

// pendingConns are the connections whose hello is being read, closed at
// once when rank 0 stops waiting.
type pendingConns struct {
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

func (p *pendingConns) add(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *pendingConns) remove(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = slices.DeleteFunc(p.conns, func(x net.Conn) bool { return x == c })
}

func (p *pendingConns) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
