package replay

import (
	"math"

	"refuel/pkg/policy"
)

// The optimum's dynamic program: layers of cost per state and progress, one
// per tick boundary, solved forward and walked back into a plan.

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
