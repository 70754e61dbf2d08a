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
