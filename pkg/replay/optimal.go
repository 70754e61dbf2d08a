package replay

import (
	"fmt"
	"math"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/policy"
)

// maxOptimalCells bounds the work of Optimal (states visited over all
// ticks), so a pathological gap and overhead fail fast instead of running
// for hours.
const maxOptimalCells = 4e9

// GridError is returned by Optimal when the exact state space is too
// large to search.
type GridError struct {
	Cells float64
	Unit  time.Duration
}

func (e *GridError) Error() string {
	return fmt.Sprintf("optimal: %.3g states to search (progress in steps of %s, the gcd of the gap and the restart overhead); use an overhead that is a multiple of a coarser step", e.Cells, e.Unit)
}

// Optimal returns the cheapest plan for the job started at tick start that
// meets its deadline, knowing the whole market in advance: the omniscient
// lower bound no online policy can beat. It is an exact dynamic program
// over the model that Run replays. The state at a tick boundary is the
// work done, what is held and how many ticks of it have run (which fixes
// the overhead still unpaid). Every tick adds either the gap or the gap
// less an unpaid overhead to the work, so the work done is always a
// multiple of gcd(gap, overhead) and that grid loses nothing; states that
// could no longer meet the deadline even on on-demand are dropped.
// Replaying the plan with Run gives its cost.
//
// When no plan meets the deadline, the plan finishes soonest instead:
// on-demand from the start, or for a tier without on-demand spot whenever
// it is in stock.
func Optimal(m *Market, job Job, start int) (Plan, error) {
	plan, _, err := optimize(m, job, start)
	return plan, err
}

// optimize is Optimal that also returns the plan's cost, +Inf when no plan
// meets the deadline.
func optimize(m *Market, job Job, start int) (Plan, float64, error) {
	if err := job.Validate(); err != nil {
		return nil, 0, err
	}
	if start < 0 || start >= m.ticks {
		return nil, 0, &MarketError{Problem: fmt.Sprintf("start tick %d is outside the traces' %d ticks", start, m.ticks), Fix: "start within the traces"}
	}
	o := newOptimizer(m, job, start)
	if cells := o.cells(); cells > maxOptimalCells {
		return nil, 0, &GridError{Cells: cells, Unit: time.Duration(o.u)}
	}
	plan, cost, ok := o.solve()
	if !ok {
		return o.soonest(), math.Inf(1), nil
	}
	return plan, cost, nil
}

// optimizer holds the dynamic program. Times are in nanoseconds; progress
// p counts grid units of u. Instance 0 is on-demand and instance 1+z is
// spot in zone z. State 0 holds nothing; state 1+i*k0+(k-1) holds instance
// i whose stint has run k ticks, k capped at k0 where the overhead is paid.
type optimizer struct {
	m                 *Market
	job               Job
	start             int
	g, ovh, work, ddl int64
	u                 int64
	k0                int
	gain              []int64 // work units a tick adds after a stint of k ticks (k = 0 is a new start)
	unpaid            []int64 // overhead unpaid after a stint of k ticks
	inst, states      int
	pmax              int64
	ticks             int
	price             []float64 // USD per ns, per instance
	allowed           []bool    // per instance, by tier (spot also needs stock)
}

func newOptimizer(m *Market, job Job, start int) *optimizer {
	o := &optimizer{m: m, job: job, start: start,
		g: int64(m.Gap), ovh: int64(job.RestartOverhead), work: int64(job.Work), ddl: int64(job.Deadline)}
	o.u = o.g
	if o.ovh > 0 {
		o.u = gcd(o.g, o.ovh)
	}
	o.k0 = max(1, int((o.ovh+o.g-1)/o.g))
	for k := 0; k <= o.k0; k++ {
		left := max(0, o.ovh-int64(k)*o.g)
		o.unpaid = append(o.unpaid, left)
		o.gain = append(o.gain, max(0, o.g-left)/o.u)
	}
	o.inst = 1 + len(m.Zones)
	o.states = 1 + o.inst*o.k0
	o.pmax = (o.work - 1) / o.u
	o.ticks = int((o.ddl + o.g - 1) / o.g)
	perNs := func(usdPerHour float64) float64 { return usdPerHour / float64(time.Hour) }
	o.price = append(o.price, perNs(job.OnDemandPrice))
	o.allowed = append(o.allowed, job.Tier.AllowsOnDemand())
	for range m.Zones {
		o.price = append(o.price, perNs(job.SpotPrice))
		o.allowed = append(o.allowed, job.Tier.AllowsSpot())
	}
	return o
}

// band is the range of progress a state at boundary t may have: no more
// than the time elapsed, and no less than what on-demand could still
// finish by the deadline.
func (o *optimizer) band(t int) (lo, hi int64) {
	elapsed := int64(t) * o.g
	lo = max(0, ceilDiv(o.work-o.ddl+elapsed, o.u))
	hi = min(elapsed/o.u, o.pmax)
	return lo, hi
}

func (o *optimizer) cells() float64 {
	var n float64
	for t := 0; t <= o.ticks; t++ {
		lo, hi := o.band(t)
		n += float64(max(0, hi-lo+1))
	}
	return n * float64(o.states)
}

func (o *optimizer) state(i, k int) int { return 1 + i*o.k0 + k - 1 }

// instOf is the instance state s holds, -1 for none.
func (o *optimizer) instOf(s int) int {
	if s == 0 {
		return -1
	}
	return (s - 1) / o.k0
}

func (o *optimizer) ranOf(s int) int { return (s-1)%o.k0 + 1 }

func (o *optimizer) choice(i int) policy.Choice {
	if i == 0 {
		return policy.Choice{Market: capacity.OnDemand}
	}
	return policy.Choice{Market: capacity.Spot, Zone: o.m.Zones[i-1]}
}

// How a capped state (stint of k0 ticks or more) was reached.
const (
	viaStart    = 0 // a new start (only when k0 is 1)
	viaShorter  = 1 // a stint of k0-1 ticks went on
	viaCapped   = 2 // a capped stint went on
	noPredState = math.MaxUint16
)

// finish is the best way found to end the work.
type finish struct {
	cost float64
	t    int
	p    int64
	from int // state at boundary t
	inst int // held during tick t
}

// layer is the program at one tick boundary: the cheapest cost of each
// state per progress in the band [lo, hi], state-major so that a tick's
// transitions are shifted copies of whole rows.
type layer struct {
	lo, hi int64
	cost   [][]float64 // [state][p-lo]
}

// reset makes l the empty layer of boundary t, reusing its rows.
func (o *optimizer) reset(l *layer, t int) {
	l.lo, l.hi = o.band(t)
	if l.cost == nil {
		l.cost = make([][]float64, o.states)
	}
	w := max(0, l.hi-l.lo+1)
	for s := range l.cost {
		if int64(cap(l.cost[s])) < w {
			l.cost[s] = make([]float64, w, o.maxWidth())
		}
		l.cost[s] = l.cost[s][:w]
		fill(l.cost[s], math.Inf(1))
	}
}

// maxWidth is the widest band of any boundary.
func (o *optimizer) maxWidth() int64 {
	var w int64
	for t := 0; t <= o.ticks; t++ {
		lo, hi := o.band(t)
		w = max(w, hi-lo+1)
	}
	return w
}

// back is what walkBack needs of boundary t: per progress the best state
// and the best one holding another instance (a new start comes from one
// of them), and how each instance's capped state was reached.
type back struct {
	best, other []uint16  // [p-lo]
	via         [][]uint8 // [instance][p-lo]
}

// solve runs the program forward over the ticks, then walks back from the
// cheapest finish.
func (o *optimizer) solve() (Plan, float64, bool) {
	S, I := o.states, o.inst
	best := finish{cost: math.Inf(1)}
	backs := make([]back, o.ticks+1)
	var cur, next layer
	o.reset(&cur, 0)
	cur.cost[0][0] = 0 // p = 0, holding nothing
	wmax := o.maxWidth()
	m1, m2, starts := make([]float64, wmax), make([]float64, wmax), make([]float64, wmax)
	// One slab for every boundary's back pointers; walkBack reads them all.
	var cells int64
	for t := 0; t <= o.ticks; t++ {
		lo, hi := o.band(t)
		cells += max(0, hi-lo+1)
	}
	slab16 := make([]uint16, 2*cells)
	slab8 := make([]uint8, int64(I)*cells)
	for t := 0; t < o.ticks && cur.hi >= cur.lo; t++ {
		o.reset(&next, t+1)
		w0 := cur.hi - cur.lo + 1
		// The best state per progress, and the best holding another instance.
		m1, m2 := m1[:w0], m2[:w0]
		a1, a2 := slab16[:w0:w0], slab16[w0:2*w0:2*w0]
		slab16 = slab16[2*w0:]
		copy(m1, cur.cost[0])
		fill(m2, math.Inf(1))
		for p := range a2 {
			a1[p], a2[p] = 0, noPredState
		}
		for s := 1; s < S; s++ {
			is := o.instOf(s)
			for p, c := range cur.cost[s] {
				switch {
				case c < m1[p]:
					if o.instOf(int(a1[p])) != is {
						m2[p], a2[p] = m1[p], a1[p]
					}
					m1[p], a1[p] = c, uint16(s)
				case c < m2[p] && o.instOf(int(a1[p])) != is:
					m2[p], a2[p] = c, uint16(s)
				}
			}
		}
		backs[t].best, backs[t].other = a1, a2
		if next.hi >= next.lo {
			w1 := next.hi - next.lo + 1
			backs[t+1].via = make([][]uint8, I)
			for i := range backs[t+1].via {
				backs[t+1].via[i], slab8 = slab8[:w1:w1], slab8[w1:]
			}
			// Holding nothing keeps the progress and costs nothing.
			for p := max(cur.lo, next.lo); p <= cur.hi; p++ {
				next.cost[0][p-next.lo] = m1[p-cur.lo]
			}
		}
		tick := o.start + t
		elapsed := int64(t) * o.g
		starts := starts[:w0]
		for i := 0; i < I; i++ {
			if !o.allowed[i] || (i > 0 && !o.m.Available(i-1, tick)) {
				continue
			}
			for p := range starts {
				starts[p] = m1[p]
				if o.instOf(int(a1[p])) == i {
					starts[p] = m2[p]
				}
			}
			o.hold(&best, cur, next, backs[t+1], t, elapsed, i, 0, starts, func(p int64) int {
				if o.instOf(int(a1[p-cur.lo])) == i {
					return int(a2[p-cur.lo])
				}
				return int(a1[p-cur.lo])
			})
			for k := 1; k <= o.k0; k++ {
				s := o.state(i, k)
				o.hold(&best, cur, next, backs[t+1], t, elapsed, i, k, cur.cost[s], func(int64) int { return s })
			}
		}
		cur, next = next, cur
	}
	if math.IsInf(best.cost, 1) {
		return nil, best.cost, false
	}
	return o.walkBack(best, backs), best.cost, true
}

// hold relaxes holding instance i for tick t after a stint of k ticks (0:
// a new start), from the costs src of boundary t; from names the state a
// finish at progress p comes from.
func (o *optimizer) hold(best *finish, cur, next layer, b back, t int, elapsed int64, i, k int, src []float64, from func(p int64) int) {
	unpaid, gain := o.unpaid[k], o.gain[k]
	tickCost := o.price[i] * float64(o.g)
	k2 := min(k+1, o.k0)
	via := uint8(viaCapped)
	switch {
	case k == 0:
		via = viaStart
	case k == o.k0-1:
		via = viaShorter
	}
	if next.hi >= next.lo {
		dst := next.cost[o.state(i, k2)]
		lo, hi := max(cur.lo, next.lo-gain), min(cur.hi, o.pmax-gain)
		for p := lo; p <= hi; p++ {
			c := src[p-cur.lo] + tickCost
			at := p + gain - next.lo
			if c < dst[at] {
				dst[at] = c
				if k2 == o.k0 {
					b.via[i][at] = via
				}
			}
		}
	}
	if unpaid >= o.g {
		return
	}
	// Ticks in which the work ends: the last is paid only until then.
	for p := max(cur.lo, o.pmax-gain+1); p <= cur.hi; p++ {
		held := unpaid + o.work - p*o.u
		c := src[p-cur.lo] + o.price[i]*float64(held)
		if elapsed+held <= o.ddl && c < best.cost {
			*best = finish{cost: c, t: t, p: p, from: from(p), inst: i}
		}
	}
}

// walkBack rebuilds the choices that lead to the best finish.
func (o *optimizer) walkBack(best finish, backs []back) Plan {
	plan := make(Plan, best.t+1)
	plan[best.t] = o.choice(best.inst)
	s, p := best.from, best.p
	for t := best.t; t > 0; t-- {
		if s == 0 {
			plan[t-1] = policy.None
			lo, _ := o.band(t - 1)
			s = int(backs[t-1].best[p-lo])
			continue
		}
		i, k := o.instOf(s), o.ranOf(s)
		plan[t-1] = o.choice(i)
		prev := k - 1 // stint length before this tick; 0 is a new start
		if k == o.k0 {
			lo, _ := o.band(t)
			switch backs[t].via[i][p-lo] {
			case viaStart:
				prev = 0
			case viaCapped:
				prev = o.k0
			}
		}
		p -= o.gain[prev]
		if prev > 0 {
			s = o.state(i, prev)
			continue
		}
		lo, _ := o.band(t - 1)
		a1, a2 := int(backs[t-1].best[p-lo]), int(backs[t-1].other[p-lo])
		s = a1
		if o.instOf(a1) == i {
			s = a2
		}
	}
	return plan
}

// soonest is the plan that finishes first when none meets the deadline.
func (o *optimizer) soonest() Plan {
	plan := make(Plan, o.m.ticks-o.start+2*o.m.ticksIn(o.job.Work+o.job.RestartOverhead))
	zone := -1
	for t := range plan {
		if o.job.Tier.AllowsOnDemand() {
			plan[t] = o.choice(0)
			continue
		}
		if zone < 0 || !o.m.Available(zone, o.start+t) {
			zone = -1
			for z := range o.m.Zones {
				if o.m.Available(z, o.start+t) {
					zone = z
					break
				}
			}
		}
		if zone >= 0 {
			plan[t] = o.choice(1 + zone)
		}
	}
	return plan
}

func fill(xs []float64, v float64) {
	for i := range xs {
		xs[i] = v
	}
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return -((-a) / b)
	}
	return (a + b - 1) / b
}
