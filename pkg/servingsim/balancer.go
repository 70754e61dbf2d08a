package servingsim

import (
	"container/heap"
	"slices"
)

// balancer is the service's endpoint, request by request: a request takes
// a free slot (MaxConcurrency per ready replica) at once, or waits in
// arrival order; one that has waited past the queue timeout fails. It is
// event-driven: every arrival and every completion is its own event, so
// its tallies are exact, not per-second approximations. Times are seconds
// from the start of the trace.
type balancer struct {
	slo, timeout float64
	slots, busy  int
	ends         ends // when each request in a slot finishes
	waiting      []pending
	head         int // waiting[head:] still wait

	// busySecs integrates busy slots over time, up to last.
	busySecs, last float64

	answered, met, failed int
	// missed counts requests answered late or failed since it was reset.
	missed    int
	latencies []float64 // one per request: answered, or the timeout for a failure
	waits     []float64 // one per answered request: its wait for a slot
}

// pending is a request waiting for a slot.
type pending struct {
	arrived float64
	// firstToken is how long after taking a slot its first token comes:
	// its prefill. hold is how long it holds the slot.
	firstToken, hold float64
}

func newBalancer(slo, timeout float64) *balancer {
	return &balancer{slo: slo, timeout: timeout}
}

// arrive takes a request at its arrival time, after every earlier event.
func (b *balancer) arrive(p pending) {
	b.advance(p.arrived)
	b.waiting = append(b.waiting, p)
	b.pull(p.arrived)
}

// advance runs every completion up to t, each freeing its slot for the
// request waiting longest.
func (b *balancer) advance(t float64) {
	for len(b.ends) > 0 && b.ends[0] <= t {
		e := heap.Pop(&b.ends).(float64)
		b.account(e)
		b.busy--
		b.pull(e)
	}
	b.account(t)
}

// setSlots changes the slots at t: more start waiting requests at once;
// fewer let the requests in flight finish (the released replicas drain)
// and start none until the busy slots are under the new count.
func (b *balancer) setSlots(n int, t float64) {
	b.advance(t)
	b.slots = n
	b.pull(t)
}

// expire fails the requests that have waited past the timeout by t, so
// that the queue reported holds only live ones.
func (b *balancer) expire(t float64) {
	for b.head < len(b.waiting) && t-b.waiting[b.head].arrived > b.timeout {
		b.fail()
	}
	b.compact()
}

// queued is the number of requests waiting.
func (b *balancer) queued() int { return len(b.waiting) - b.head }

// drain serves what is still waiting with the slots as they stand, so
// that every request of the trace has its outcome.
func (b *balancer) drain() {
	for b.queued() > 0 && len(b.ends) > 0 {
		b.advance(b.ends[0])
	}
	for b.queued() > 0 {
		b.fail() // no slot left to take it
	}
}

func (b *balancer) pull(t float64) {
	for b.head < len(b.waiting) && b.busy < b.slots {
		p := b.waiting[b.head]
		if t-p.arrived > b.timeout {
			b.fail()
			continue
		}
		b.head++
		b.answered++
		latency := t - p.arrived + p.firstToken
		b.latencies = append(b.latencies, latency)
		b.waits = append(b.waits, t-p.arrived)
		if latency <= b.slo+1e-9 {
			b.met++
		} else {
			b.missed++
		}
		b.busy++
		heap.Push(&b.ends, t+p.hold)
	}
	b.compact()
}

func (b *balancer) fail() {
	b.head++
	b.failed++
	b.missed++
	b.latencies = append(b.latencies, b.timeout)
}

func (b *balancer) account(t float64) {
	if t > b.last {
		b.busySecs += float64(b.busy) * (t - b.last)
		b.last = t
	}
}

func (b *balancer) compact() {
	if b.head > 1024 && b.head > len(b.waiting)/2 {
		b.waiting = slices.Delete(b.waiting, 0, b.head)
		b.head = 0
	}
}

// ends is a min-heap of completion times.
type ends []float64

func (h ends) Len() int           { return len(h) }
func (h ends) Less(i, j int) bool { return h[i] < h[j] }
func (h ends) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *ends) Push(x any)        { *h = append(*h, x.(float64)) }
func (h *ends) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
