package policy

import "refuel/pkg/capacity"

// greedy holds spot whenever it is in stock and safe, waits while it is
// not, and once waiting would miss the deadline holds on-demand to the
// end: with the slack spent, a move back to spot could not absorb another
// preemption. An elastic gang takes spot on the nodes in stock (see
// Gang.spot).
func greedy(s State, m Market, g Gang) Choice {
	if s.Current.Market == capacity.OnDemand {
		return s.Current
	}
	if c, ok := g.spot(s, m, firstSpotZone(s, m)); ok && g.safe(s, m, c) {
		return c
	}
	if safe(s, m, None) {
		return None
	}
	return m.onDemand(s)
}
