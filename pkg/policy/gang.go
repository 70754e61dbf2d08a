package policy

import (
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

// Gang is what a decision for an elastic gang knows beyond Market, which
// shows the market as one node sees it with SpotAvailable meaning the
// whole gang is in stock. An elastic gang may hold spot on fewer nodes,
// from MinNodes up, at that share of its rate of work; every change of
// width is a start and pays the restart overhead. Its zero value is a
// rigid gang, decided as Decide does.
type Gang struct {
	// Nodes is the gang's size, MinNodes the fewest it trains on.
	Nodes, MinNodes int
	// InStock is, per zone of Market.Zones, how many of the gang's nodes
	// spot has in stock now, at most Nodes.
	InStock []int
	// Partial is, per zone, what has been seen of spot in stock for at
	// least MinNodes but not all of them: the stretches a shrunk gang
	// trains through until it is preempted or grows back.
	Partial []Availability
}

// Elastic reports whether the gang may train on fewer than its nodes.
func (g Gang) Elastic() bool {
	return g.MinNodes > 0 && g.MinNodes < g.Nodes && len(g.InStock) > 0
}

// width is the nodes c holds.
func (g Gang) width(c Choice) int {
	if c.Nodes > 0 {
		return c.Nodes
	}
	return g.Nodes
}

// DecideGang is Decide for a gang that may be elastic: on counts, where a
// shrunk gang can train on. A rigid gang is decided exactly as Decide
// does. For an elastic one, greedy and uniform-progress take, wherever
// they would take spot, the widest spot in stock of at least MinNodes
// nodes when the whole gang is nowhere in stock, keep the width they hold
// while it lasts and grow back once the whole gang is in stock; refuel
// decides as for the whole gang, then trains on the nodes in stock
// rather than waiting or starting on-demand where that is safe and the
// shrunk stretch is expected to repay its start (see refuelGang).
func (d *Decider) DecideGang(tier spec.Tier, name Name, s State, m Market, g Gang) (Choice, error) {
	if !g.Elastic() {
		g = Gang{}
	}
	return d.decide(tier, name, s, m, g)
}

// spot is the spot a run takes when it takes spot: in zone full, the whole
// gang, when full is not -1; else, for an elastic gang, the shrunk width it
// holds while that is in stock, or the widest of at least MinNodes in
// stock in any zone (the first on ties). ok is false when there is none.
func (g Gang) spot(s State, m Market, full int) (c Choice, ok bool) {
	if full >= 0 {
		return m.spot(full), true
	}
	if !g.Elastic() {
		return None, false
	}
	if g.holdsShrunk(s, m) {
		return s.Current, true
	}
	if i := g.widest(); i >= 0 {
		return g.shrunk(m, i), true
	}
	return None, false
}

// holdsShrunk reports whether the run holds spot on fewer than all its
// nodes, and those are still in stock.
func (g Gang) holdsShrunk(s State, m Market) bool {
	i := m.zone(s.Current.Zone)
	return i >= 0 && s.Current.Market == capacity.Spot && s.Current.Nodes > 0 && g.InStock[i] >= s.Current.Nodes
}

// widest is the zone with the most nodes in stock, at least MinNodes (the
// first on ties), or -1.
func (g Gang) widest() int {
	best := -1
	for i, n := range g.InStock {
		if n >= g.MinNodes && (best < 0 || n > g.InStock[best]) {
			best = i
		}
	}
	return best
}

// shrunk is spot in zone i on the nodes in stock there.
func (g Gang) shrunk(m Market, i int) Choice {
	c := m.spot(i)
	if n := g.InStock[i]; n < g.Nodes {
		c.Nodes = n
	}
	return c
}

// safe is the package's safe for a choice that may hold spot on fewer
// than all the gang's nodes, whose work then progresses at that share of
// the step.
func (g Gang) safe(s State, m Market, c Choice) bool {
	w := g.width(c)
	if c.Market != capacity.Spot || w >= g.Nodes {
		return safe(s, m, c)
	}
	o := s.RestartOverhead
	r := o
	if c == s.Current {
		r = s.OverheadLeft
	}
	rate := float64(w) / float64(g.Nodes)
	if work := time.Duration(float64(max(0, m.Step-r)) * rate); work < s.Remaining {
		return s.TimeLeft-m.Step >= s.Remaining-work+o
	}
	return s.TimeLeft >= r+time.Duration(float64(s.Remaining)/rate)
}

// shrinkRepays is how many restart overheads a shrunk stretch must be
// expected to last for refuel to start on it: a start on part of the
// gang pays a whole overhead, and the grow back when the gang's stock
// returns another, while the work it does is a part of the gang's.
const shrinkRepays = 2

// refuelGang is refuel's choice for an elastic gang. It first decides as
// for the whole gang; where that takes spot (growing back, if the gang
// is shrunk), so does the gang. Otherwise the gang trains on the nodes in
// stock instead of waiting or starting on-demand (never instead of
// on-demand it holds): on those it holds while they last and it stays
// safe; or on the widest stock of at least MinNodes where shrunk
// stretches of the age of
// this one were seen to go on for shrinkRepays overheads on average
// (Gang.Partial; see seenLeft). A shrunk gang's work costs what the
// whole gang's does on spot, so its cost is the starts it pays and the
// slack its slower work spends.
func (d *Decider) refuelGang(s State, m Market, g Gang) Choice {
	c := d.refuel(s, m)
	if !g.Elastic() || c.Market == capacity.Spot {
		return c
	}
	if g.holdsShrunk(s, m) && g.safe(s, m, s.Current) {
		return s.Current
	}
	if s.Current.Market == capacity.OnDemand && c.Market == capacity.OnDemand {
		return c
	}
	i := g.widest()
	if i < 0 {
		return c
	}
	lasts := seenLeft(g.Partial[i], true)
	if sc := g.shrunk(m, i); lasts >= shrinkRepays*s.RestartOverhead && g.safe(s, m, sc) {
		return sc
	}
	return c
}

// seenLeft is how much longer the current stretch of a's stock (in, or
// out of it) goes on, on average over the completed stretches seen that
// reached its age bucket; 0 when none did. It is the evidence alone,
// without the priors refuel's model starts from (see fitStock), which
// assume stretches of hours: stock for part of a gang is mostly a passage
// between all and none, and a start on it a bet to make only where such
// stretches were seen to last.
func seenLeft(a Availability, in bool) time.Duration {
	st, age := a.Out, time.Duration(0)
	if in {
		st = a.In
	}
	if a.Last == in {
		age = a.Since
	}
	var exposed time.Duration
	reached := 0
	for b := bucketOf(age); b < ageBuckets; b++ {
		exposed += st.Time[b]
		reached += st.Ended[b]
	}
	if reached == 0 {
		return 0
	}
	return max(0, exposed/time.Duration(reached)-(age-bucketStart(bucketOf(age))))
}
