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
	// Widths is how many widths of spot an elastic gang may hold.
	Widths int
}

func (e *GridError) Error() string {
	msg := fmt.Sprintf("optimal: %.3g states to search (progress in steps of %s, the gcd of the gap and the restart overhead); use an overhead that is a multiple of a coarser step", e.Cells, e.Unit)
	if e.Widths > 1 {
		msg += fmt.Sprintf(", or fewer than the %d widths of the elastic gang (min nodes closer to its nodes)", e.Widths)
	}
	return msg
}

// Optimal returns the cheapest plan for the job started at tick start that
// meets its deadline, knowing the whole market in advance: the omniscient
// lower bound no online policy can beat. It is an exact dynamic program
// over the model that Run replays, prices and moves between regions
// included. The state at a tick boundary is the work done and either the
// region the checkpoint is in, holding nothing, or what is held and how
// many ticks of it have run since its start, and whether that start moved
// the checkpoint (which fixes the overhead still unpaid). Every tick adds
// either the gap or the gap less an unpaid overhead to the work, so the
// work done is always a multiple of gcd(gap, overhead) and that grid loses
// nothing (the transfer time of a move counts in whole ticks); states that
// could no longer meet the deadline even on on-demand are dropped.
// Replaying the plan with Run gives its cost. A job of several nodes is
// planned on its gang's stock and costs every node it holds. An elastic
// gang's spot on w nodes in a zone is one more instance to hold, in stock
// where w nodes are, doing w/nodes of the gang's work a tick: progress is
// counted in node-time, whose grid is gcd(gap, overhead) times the gcd of
// the widths, so a change of width is a start like any other.
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
	if err := job.fits(len(m.Zones)); err != nil {
		return nil, 0, err
	}
	if start < 0 || start >= m.ticks {
		return nil, 0, &MarketError{Problem: fmt.Sprintf("start tick %d is outside the traces' %d ticks", start, m.ticks), Fix: "start within the traces"}
	}
	o := newOptimizer(m, job, start)
	if cells := o.cells(); cells > maxOptimalCells || o.states >= noPredState {
		return nil, 0, &GridError{Cells: cells, Unit: time.Duration(o.u / o.widthGCD), Widths: o.widths}
	}
	plan, cost, ok := o.solve()
	if !ok {
		return o.soonest(), math.Inf(1), nil
	}
	return plan, cost, nil
}

// optimizer holds the dynamic program. Times are in nanoseconds; progress
// p counts grid units of u node-nanoseconds (the work of one node for a
// nanosecond). Instances are on-demand in each region on every node (in
// the region's zone where it is cheapest: on-demand is in stock in every
// zone, so that one is the region's on-demand), then spot in each zone
// on each width the gang may hold, narrowest first. States: 0..R-1 hold
// nothing with the checkpoint in region r; then per instance i, its
// stints, first those that started without a move (k = 1..k0 ticks run,
// k0 the overhead paid and capped there), then those that started with
// one (k = 1..kx, still paying the longer overhead, going on into i's
// capped state).
type optimizer struct {
	m                 *Market
	job               Job
	start             int
	g, ovh, work, ddl int64 // work in node-nanoseconds
	u                 int64
	widthGCD          int64 // of the widths, a factor of u
	pmax              int64
	ticks             int
	nodes             int // of the gang, whose stock the plan holds spot in
	widths            int // spot instances per zone: nodes - min nodes + 1
	// regions are the distinct regions in zone order; zoneRegion maps a
	// zone to its region's index.
	regions    []string
	zoneRegion []int
	// chains: [0] without a move, [1] with one. unpaid[c][k] is the
	// overhead unpaid after k ticks of a stint, worked[c][k] the time its
	// next tick works.
	k0, kx  int
	unpaid  [2][]int64
	worked  [2][]int64
	inst    int
	perInst int // states per instance: k0 + kx
	states  int
	price   []float64 // USD per ns, per instance, every node it holds
	allowed []bool    // per instance, by tier (spot also needs stock)
	region  []int     // per instance
	width   []int     // per instance, the nodes it holds
	moveUSD float64
}

// Stint chains: a start without a move, and one that moved the checkpoint.
const (
	stay = 0
	move = 1
)

func newOptimizer(m *Market, job Job, start int) *optimizer {
	o := &optimizer{m: m, job: job, start: start,
		g: int64(m.Gap), ovh: int64(job.RestartOverhead), work: int64(job.Work) * int64(job.nodes()), ddl: int64(job.Deadline),
		nodes: job.nodes(), widths: job.nodes() - job.minNodes() + 1}
	for z := range m.Zones {
		r := -1
		for i, name := range o.regions {
			if name == job.region(z) {
				r = i
			}
		}
		if r < 0 {
			r = len(o.regions)
			o.regions = append(o.regions, job.region(z))
		}
		o.zoneRegion = append(o.zoneRegion, r)
	}
	o.u = o.g
	if o.ovh > 0 {
		o.u = gcd(o.g, o.ovh)
	}
	o.widthGCD = int64(o.nodes)
	for w := job.minNodes(); w < o.nodes; w++ {
		o.widthGCD = gcd(o.widthGCD, int64(w))
	}
	o.u *= o.widthGCD
	chain := func(ovh int64) (k0 int, unpaid, worked []int64) {
		k0 = max(1, int((ovh+o.g-1)/o.g))
		for k := 0; k <= k0; k++ {
			left := max(0, ovh-int64(k)*o.g)
			unpaid = append(unpaid, left)
			worked = append(worked, max(0, o.g-left))
		}
		return k0, unpaid, worked
	}
	o.k0, o.unpaid[stay], o.worked[stay] = chain(o.ovh)
	if len(o.regions) > 1 {
		kMove, unpaid, worked := chain(o.ovh + int64(job.moveTime(m.Gap)))
		o.kx, o.unpaid[move], o.worked[move] = kMove-1, unpaid, worked
	}
	o.moveUSD = job.moveUSD()
	o.perInst = o.k0 + o.kx
	o.inst = len(o.regions) + len(m.Zones)*o.widths
	o.states = len(o.regions) + o.inst*o.perInst
	o.pmax = (o.work - 1) / o.u
	o.ticks = int((o.ddl + o.g - 1) / o.g)
	perNs := func(usdPerHour float64, nodes int) float64 { return usdPerHour * float64(nodes) / float64(time.Hour) }
	for r := range o.regions {
		o.price = append(o.price, perNs(job.onDemandPrice(o.onDemandZone(r)), o.nodes))
		o.allowed = append(o.allowed, job.Tier.AllowsOnDemand())
		o.region = append(o.region, r)
		o.width = append(o.width, o.nodes)
	}
	for z := range m.Zones {
		for w := job.minNodes(); w <= o.nodes; w++ {
			o.price = append(o.price, perNs(job.spotPrice(z), w))
			o.allowed = append(o.allowed, job.Tier.AllowsSpot())
			o.region = append(o.region, o.zoneRegion[z])
			o.width = append(o.width, w)
		}
	}
	return o
}

// gain is the work units a tick of instance i adds after k ticks of a
// stint of chain c.
func (o *optimizer) gain(i, c, k int) int64 {
	return o.worked[c][k] * int64(o.width[i]) / o.u
}

// spotZone is the zone of spot instance i (i at least the regions).
func (o *optimizer) spotZone(i int) int { return (i - len(o.regions)) / o.widths }

// inStock reports whether instance i can be held during tick.
func (o *optimizer) inStock(i, tick int) bool {
	return i < len(o.regions) || o.m.Count(o.spotZone(i), tick, o.nodes) >= o.width[i]
}

// onDemandZone is the zone of region r where on-demand is cheapest, the
// first on ties.
func (o *optimizer) onDemandZone(r int) int {
	best := -1
	for z, zr := range o.zoneRegion {
		if zr == r && (best < 0 || o.job.onDemandPrice(z) < o.job.onDemandPrice(best)) {
			best = z
		}
	}
	return best
}

// band is the range of progress a state at boundary t may have: no more
// than the whole gang's work in the time elapsed, and no less than what
// on-demand could still finish by the deadline.
func (o *optimizer) band(t int) (lo, hi int64) {
	elapsed := int64(t) * o.g
	n := int64(o.nodes)
	lo = max(0, ceilDiv(o.work-(o.ddl-elapsed)*n, o.u))
	hi = min(elapsed*n/o.u, o.pmax)
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

// stint is the state of instance i k ticks into a stint of chain c.
func (o *optimizer) stint(i, c, k int) int {
	if c == move && k <= o.kx {
		return len(o.regions) + i*o.perInst + o.k0 + k - 1
	}
	return len(o.regions) + i*o.perInst + min(k, o.k0) - 1
}

// instOf is the instance state s holds, -1 for none.
func (o *optimizer) instOf(s int) int {
	if s < len(o.regions) {
		return -1
	}
	return (s - len(o.regions)) / o.perInst
}

// regionOf is the region of the checkpoint in state s.
func (o *optimizer) regionOf(s int) int {
	if s < len(o.regions) {
		return s
	}
	return o.region[o.instOf(s)]
}

// noWorkYet reports whether s holds an instance started without a move
// whose every tick so far went to its overhead. Leaving such a stint
// (for nothing, or for another start) is never cheaper than not having
// started it: the same progress, the checkpoint in the same region, and
// its ticks unpaid. So these states go on or end only as their stint
// does, and are left out of the states others start from, which spares
// most of the rows of a market whose ticks are short beside the
// overhead (a 32 s tick pays a 12-minute overhead over 23 of them).
func (o *optimizer) noWorkYet(s int) bool {
	if o.instOf(s) < 0 {
		return false
	}
	c, k := o.chainOf(s)
	return c == stay && k < o.k0 && int64(k)*o.g <= o.ovh
}

// chainOf is the chain and ticks run of a state holding an instance;
// capped states are the stay chain's k0.
func (o *optimizer) chainOf(s int) (c, k int) {
	j := (s - len(o.regions)) % o.perInst
	if j < o.k0 {
		return stay, j + 1
	}
	return move, j - o.k0 + 1
}

func (o *optimizer) choice(i int) policy.Choice {
	if i < len(o.regions) {
		if len(o.regions) == 1 {
			return policy.Choice{Market: capacity.OnDemand}
		}
		return policy.Choice{Market: capacity.OnDemand, Zone: o.m.Zones[o.onDemandZone(i)]}
	}
	c := policy.Choice{Market: capacity.Spot, Zone: o.m.Zones[o.spotZone(i)]}
	if o.width[i] < o.nodes {
		c.Nodes = o.width[i]
	}
	return c
}

// How an instance's capped state was reached.
const (
	viaStart     = 0 // a new start without a move (only when k0 is 1)
	viaStartMove = 1 // a new start that moved (only when kx is 0)
	viaShorter   = 2 // a stay stint of k0-1 ticks went on
	viaMoved     = 3 // a move stint of kx ticks went on
	viaCapped    = 4 // a capped stint went on
	noPredState  = math.MaxUint16
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

// back is what walkBack needs of boundary t, per progress: in each
// region the best state and the best one holding another instance (a
// start without a move comes from one of them; at no progress, when
// there is nothing to move, from any region: all[0] and all[1]), the
// best state outside each region (a start that moves comes from it), and
// how each instance's capped state was reached.
type back struct {
	best, other, outside [][]uint16 // [region][p-lo]
	all                  [2]uint16  // at progress 0
	via                  [][]uint8  // [instance][p-lo]
}

// ranks are, per progress, the best state and cost in a set of states,
// and the best holding another instance than the best's.
type ranks struct {
	c1, c2 []float64
	a1, a2 []uint16
}

func newRanks(w int64) ranks {
	return ranks{make([]float64, w), make([]float64, w), make([]uint16, w), make([]uint16, w)}
}

func (r *ranks) reset(w int64) {
	r.c1, r.c2, r.a1, r.a2 = r.c1[:w], r.c2[:w], r.a1[:w], r.a2[:w]
	fill(r.c1, math.Inf(1))
	fill(r.c2, math.Inf(1))
	for p := range r.a1 {
		r.a1[p], r.a2[p] = noPredState, noPredState
	}
}

// add ranks state s with costs row.
func (o *optimizer) add(r *ranks, s int, row []float64) {
	is := o.instOf(s)
	for p, c := range row {
		switch {
		case c < r.c1[p]:
			if r.a1[p] == noPredState || o.instOf(int(r.a1[p])) != is {
				r.c2[p], r.a2[p] = r.c1[p], r.a1[p]
			}
			r.c1[p], r.a1[p] = c, uint16(s)
		case c < r.c2[p] && (r.a1[p] == noPredState || o.instOf(int(r.a1[p])) != is):
			r.c2[p], r.a2[p] = c, uint16(s)
		}
	}
}

// excluding is the best of r at p not holding instance i.
func (o *optimizer) excluding(r *ranks, p int, i int) (float64, uint16) {
	if r.a1[p] != noPredState && o.instOf(int(r.a1[p])) == i {
		return r.c2[p], r.a2[p]
	}
	return r.c1[p], r.a1[p]
}

// solve runs the program forward over the ticks, then walks back from the
// cheapest finish.
func (o *optimizer) solve() (Plan, float64, bool) {
	R, I := len(o.regions), o.inst
	best := finish{cost: math.Inf(1)}
	backs := make([]back, o.ticks+1)
	var cur, next layer
	o.reset(&cur, 0)
	cur.cost[0][0] = 0 // p = 0, holding nothing
	wmax := o.maxWidth()
	inRegion := make([]ranks, R)
	for r := range inRegion {
		inRegion[r] = newRanks(wmax)
	}
	everywhere := newRanks(wmax)
	outC := make([][]float64, R)
	for r := range outC {
		outC[r] = make([]float64, wmax)
	}
	starts, srcs := make([]float64, wmax), make([]float64, wmax)
	for t := 0; t < o.ticks && cur.hi >= cur.lo; t++ {
		o.reset(&next, t+1)
		w0 := cur.hi - cur.lo + 1
		b := &backs[t]
		b.best, b.other, b.outside = make([][]uint16, R), make([][]uint16, R), make([][]uint16, R)
		everywhere.reset(w0)
		for r := range inRegion {
			inRegion[r].reset(w0)
		}
		for s := 0; s < o.states; s++ {
			if o.noWorkYet(s) {
				continue
			}
			o.add(&inRegion[o.regionOf(s)], s, cur.cost[s])
			if cur.lo == 0 {
				o.add(&everywhere, s, cur.cost[s][:1])
			}
		}
		b.all = [2]uint16{everywhere.a1[0], everywhere.a2[0]}
		for r := range inRegion {
			b.best[r] = append([]uint16(nil), inRegion[r].a1...)
			b.other[r] = append([]uint16(nil), inRegion[r].a2...)
			if R == 1 {
				continue
			}
			oc := outC[r][:w0]
			fill(oc, math.Inf(1))
			b.outside[r] = make([]uint16, w0)
			for p := range b.outside[r] {
				b.outside[r][p] = noPredState
			}
			for r2 := range inRegion {
				if r2 == r {
					continue
				}
				for p, c := range inRegion[r2].c1 {
					if c < oc[p] {
						oc[p], b.outside[r][p] = c, inRegion[r2].a1[p]
					}
				}
			}
		}
		if next.hi >= next.lo {
			w1 := next.hi - next.lo + 1
			backs[t+1].via = make([][]uint8, I)
			for i := range backs[t+1].via {
				backs[t+1].via[i] = make([]uint8, w1)
			}
			// Holding nothing keeps the progress, costs nothing and leaves
			// the checkpoint where it is.
			for r := range inRegion {
				for p := max(cur.lo, next.lo); p <= cur.hi; p++ {
					next.cost[r][p-next.lo] = inRegion[r].c1[p-cur.lo]
				}
			}
		}
		tick := o.start + t
		elapsed := int64(t) * o.g
		for i := 0; i < I; i++ {
			if !o.allowed[i] || !o.inStock(i, tick) {
				continue
			}
			ri := o.region[i]
			// A start without a move: from the checkpoint's region, or
			// from anywhere before there is a checkpoint.
			starts := starts[:w0]
			for p := range starts {
				starts[p], _ = o.excluding(&inRegion[ri], p, i)
			}
			if cur.lo == 0 {
				starts[0], _ = o.excluding(&everywhere, 0, i)
			}
			o.hold(&best, cur, next, backs[t+1], t, elapsed, i, stay, 0, starts, 0, func(p int64) int {
				if p == 0 {
					_, a := o.excluding(&everywhere, 0, i)
					return int(a)
				}
				_, a := o.excluding(&inRegion[ri], int(p-cur.lo), i)
				return int(a)
			})
			if R > 1 {
				srcs := srcs[:w0]
				copy(srcs, outC[ri][:w0])
				if cur.lo == 0 {
					srcs[0] = math.Inf(1) // no checkpoint to move yet
				}
				o.hold(&best, cur, next, backs[t+1], t, elapsed, i, move, 0, srcs, o.moveUSD, func(p int64) int {
					return int(backs[t].outside[ri][p-cur.lo])
				})
				for k := 1; k <= o.kx; k++ {
					s := o.stint(i, move, k)
					o.hold(&best, cur, next, backs[t+1], t, elapsed, i, move, k, cur.cost[s], 0, func(int64) int { return s })
				}
			}
			for k := 1; k <= o.k0; k++ {
				s := o.stint(i, stay, k)
				o.hold(&best, cur, next, backs[t+1], t, elapsed, i, stay, k, cur.cost[s], 0, func(int64) int { return s })
			}
		}
		cur, next = next, cur
	}
	if math.IsInf(best.cost, 1) {
		return nil, best.cost, false
	}
	return o.walkBack(best, backs), best.cost, true
}

// hold relaxes holding instance i for tick t after k ticks of a stint of
// chain c (k = 0: a new start, paying extra), from the costs src of
// boundary t; from names the state a finish at progress p comes from.
func (o *optimizer) hold(best *finish, cur, next layer, b back, t int, elapsed int64, i, c, k int, src []float64, extra float64, from func(p int64) int) {
	unpaid, gain := o.unpaid[c][k], o.gain(i, c, k)
	tickCost := o.price[i]*float64(o.g) + extra
	to := o.stint(i, c, k+1)
	capped := to == o.stint(i, stay, o.k0)
	via := uint8(viaCapped)
	switch {
	case k == 0 && c == stay:
		via = viaStart
	case k == 0:
		via = viaStartMove
	case c == move:
		via = viaMoved
	case k == o.k0-1:
		via = viaShorter
	}
	if next.hi >= next.lo {
		dst := next.cost[to]
		lo, hi := max(cur.lo, next.lo-gain), min(cur.hi, o.pmax-gain)
		for p := lo; p <= hi; p++ {
			cost := src[p-cur.lo] + tickCost
			at := p + gain - next.lo
			if cost < dst[at] {
				dst[at] = cost
				if capped {
					b.via[i][at] = via
				}
			}
		}
	}
	if unpaid >= o.g {
		return
	}
	// Ticks in which the work ends: the last is paid only until then.
	w := int64(o.width[i])
	for p := max(cur.lo, o.pmax-gain+1); p <= cur.hi; p++ {
		held := unpaid + (o.work-p*o.u+w-1)/w
		cost := src[p-cur.lo] + o.price[i]*float64(held) + extra
		if elapsed+held <= o.ddl && cost < best.cost {
			*best = finish{cost: cost, t: t, p: p, from: from(p), inst: i}
		}
	}
}

// walkBack rebuilds the choices that lead to the best finish.
func (o *optimizer) walkBack(best finish, backs []back) Plan {
	plan := make(Plan, best.t+1)
	plan[best.t] = o.choice(best.inst)
	s, p := best.from, best.p
	for t := best.t; t > 0; t-- {
		lo, _ := o.band(t - 1)
		if i := o.instOf(s); i < 0 {
			plan[t-1] = policy.None
			s = int(backs[t-1].best[s][p-lo])
			continue
		}
		i := o.instOf(s)
		c, k := o.chainOf(s)
		plan[t-1] = o.choice(i)
		prevC, prevK := c, k-1 // the stint before this tick; k = 0 is a new start
		if s == o.stint(i, stay, o.k0) {
			tlo, _ := o.band(t)
			switch backs[t].via[i][p-tlo] {
			case viaStart:
				prevC, prevK = stay, 0
			case viaStartMove:
				prevC, prevK = move, 0
			case viaShorter:
				prevC, prevK = stay, o.k0-1
			case viaMoved:
				prevC, prevK = move, o.kx
			case viaCapped:
				prevC, prevK = stay, o.k0
			}
		}
		p -= o.gain(i, prevC, prevK)
		switch {
		case prevK > 0:
			s = o.stint(i, prevC, prevK)
		case prevC == move:
			s = int(backs[t-1].outside[o.region[i]][p-lo])
		case p == 0:
			s = int(backs[t-1].all[0])
			if o.instOf(s) == i {
				s = int(backs[t-1].all[1])
			}
		default:
			r := o.region[i]
			s = int(backs[t-1].best[r][p-lo])
			if o.instOf(s) == i {
				s = int(backs[t-1].other[r][p-lo])
			}
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
		if zone < 0 || !o.m.Available(zone, o.start+t, o.nodes) {
			zone = -1
			for z := range o.m.Zones {
				if o.m.Available(z, o.start+t, o.nodes) {
					zone = z
					break
				}
			}
		}
		if zone >= 0 {
			plan[t] = o.choice(len(o.regions) + (zone+1)*o.widths - 1) // the whole gang
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
