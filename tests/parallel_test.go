package tests

import (
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The suite's parallel tests mostly wait (on a trainer, a timeout, an
// outage), so more of them run at once than there are cores. Which start
// first matters: the suite ends when its longest test does, and Go starts
// paused parallel tests in no set order, so a test of two minutes could
// start last and run alone at the end. The suite's own gate admits them
// instead, the long ones first; `go test -parallel` is set above the
// number of tests (the Makefile's 64) so that Go's own limit never
// decides first.

// parallel runs t beside the suite's other parallel tests, at most
// REFUEL_E2E_PARALLEL (default 6) at once.
func parallel(t *testing.T) { suiteGate.run(t, false) }

// parallelFirst is parallel for a test that takes a minute or more: it
// is admitted before any shorter one waiting with it.
func parallelFirst(t *testing.T) { suiteGate.run(t, true) }

var suiteGate = newGate(e2eParallel())

// e2eParallel is how many parallel tests run at once.
func e2eParallel() int {
	if n, err := strconv.Atoi(os.Getenv("REFUEL_E2E_PARALLEL")); err == nil && n > 0 {
		return n
	}
	return 6
}

// gate admits waiting tests, the long ones first and each kind in the
// order they came. It admits a moment after a test arrives or leaves, so
// that tests released together by Go are all in the queue when it
// chooses.
type gate struct {
	mu      sync.Mutex
	free    int
	queue   [2][]chan struct{} // long first, then the rest
	pending bool               // an admission is scheduled
}

// gatherFor is how long the gate waits for tests released together to
// arrive before it chooses among them.
const gatherFor = 100 * time.Millisecond

func newGate(slots int) *gate { return &gate{free: slots} }

func (g *gate) run(t *testing.T, long bool) {
	t.Helper()
	t.Parallel()
	g.enter(long)
	// Cleanups run last in, first out: the slot is given back after the
	// test's own (its stack stopped, its processes gone).
	t.Cleanup(g.leave)
}

// enter returns once the gate admits the caller.
func (g *gate) enter(long bool) {
	admitted := make(chan struct{})
	kind := 1
	if long {
		kind = 0
	}
	g.mu.Lock()
	g.queue[kind] = append(g.queue[kind], admitted)
	g.schedule()
	g.mu.Unlock()
	<-admitted
}

func (g *gate) leave() {
	g.mu.Lock()
	g.free++
	g.schedule()
	g.mu.Unlock()
}

// schedule admits after gatherFor, once for every event within it. g.mu
// is held.
func (g *gate) schedule() {
	if g.pending {
		return
	}
	g.pending = true
	time.AfterFunc(gatherFor, g.admit)
}

func (g *gate) admit() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pending = false
	for g.free > 0 {
		kind := 0
		if len(g.queue[0]) == 0 {
			kind = 1
		}
		if len(g.queue[kind]) == 0 {
			return
		}
		close(g.queue[kind][0])
		g.queue[kind] = g.queue[kind][1:]
		g.free--
	}
}

// TestGateAdmitsTheLongFirst: of tests waiting together, the long ones
// are admitted first, and never more than the gate's slots at once.
func TestGateAdmitsTheLongFirst(t *testing.T) {
	g := newGate(2)
	var mu sync.Mutex
	var order []string
	running, most := 0, 0
	var wg sync.WaitGroup
	for _, name := range []string{"short-1", "short-2", "long-1", "short-3", "long-2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.enter(name[0] == 'l')
			mu.Lock()
			order = append(order, name)
			running++
			most = max(most, running)
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
			mu.Lock()
			running--
			mu.Unlock()
			g.leave()
		}()
		time.Sleep(time.Millisecond) // they arrive in this order
	}
	wg.Wait()
	if len(order) != 5 || order[0][0] != 'l' || order[1][0] != 'l' {
		t.Errorf("admitted in the order %v; want the two long ones first", order)
	}
	if most > 2 {
		t.Errorf("%d ran at once; want at most the gate's 2", most)
	}
}
