package policy

import (
	"container/list"
	"runtime"
	"sync"
)

// Plans keep the outlooks refuel's decisions solve, shared by every run
// a worker decides for and bounded in bytes: runs that see the same
// stock, slack and prices decide from one outlook, solved once, however
// many ask at once. An outlook is tens of megabytes for a long run with
// much slack, so a thousand runs solving their own would not fit a
// machine; the bound holds the most recently used ones, and the number
// solved at once is bounded by the processors, so that the memory in use
// is the bound plus one outlook a processor. A Plans is safe for
// concurrent use; the zero value is not: use NewPlans.
type Plans struct {
	mu      sync.Mutex
	limit   int64
	bytes   int64
	order   *list.List // of *outlook, most recently used first
	byKey   map[outlookKey]*list.Element
	solving map[outlookKey]*solve
	slots   chan struct{}
	stats   PlanStats
}

// PlanStats count what a Plans did.
type PlanStats struct {
	Hits, Misses, Shared int   // found; solved; waited for another's solve
	Evicted              int   // dropped for the bound
	Bytes                int64 // held now
	Outlooks             int   // held now
}

// solve is an outlook being solved, that others asking for it wait for.
type solve struct {
	done chan struct{}
	o    *outlook
}

// NewPlans keeps up to limit bytes of outlooks.
func NewPlans(limit int64) *Plans {
	return &Plans{
		limit: limit, order: list.New(), byKey: map[outlookKey]*list.Element{},
		solving: map[outlookKey]*solve{}, slots: make(chan struct{}, runtime.GOMAXPROCS(0)),
	}
}

// Decider decides with the plans' outlooks instead of outlooks of its own.
func (p *Plans) Decider() *Decider { return &Decider{plans: p} }

// Stats are the counts so far.
func (p *Plans) Stats() PlanStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Bytes, s.Outlooks = p.bytes, p.order.Len()
	return s
}

// outlook is the outlook of k: held, being solved (waited for), or
// solved now.
func (p *Plans) outlook(k outlookKey) *outlook {
	p.mu.Lock()
	if e, ok := p.byKey[k]; ok {
		p.order.MoveToFront(e)
		p.stats.Hits++
		p.mu.Unlock()
		return e.Value.(*outlook)
	}
	if s, ok := p.solving[k]; ok {
		p.stats.Shared++
		p.mu.Unlock()
		<-s.done
		return s.o
	}
	s := &solve{done: make(chan struct{})}
	p.solving[k] = s
	p.stats.Misses++
	p.mu.Unlock()

	p.slots <- struct{}{}
	s.o = solveOutlook(k)
	<-p.slots

	p.mu.Lock()
	delete(p.solving, k)
	p.keep(s.o)
	p.mu.Unlock()
	close(s.done)
	return s.o
}

// keep holds o, dropping the least recently used outlooks past the
// bound; an outlook larger than the bound is used but not held.
func (p *Plans) keep(o *outlook) {
	size := o.bytes()
	if size > p.limit {
		return
	}
	p.byKey[o.key] = p.order.PushFront(o)
	p.bytes += size
	for p.bytes > p.limit {
		last := p.order.Back()
		old := last.Value.(*outlook)
		p.order.Remove(last)
		delete(p.byKey, old.key)
		p.bytes -= old.bytes()
		p.stats.Evicted++
	}
}

// bytes is about what the outlook holds in memory.
func (o *outlook) bytes() int64 { return int64(4*cap(o.after)) + 128 }
