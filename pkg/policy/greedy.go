package policy

import "refuel/pkg/capacity"

// greedy holds spot whenever it is in stock and safe, waits while it is
// not, and once waiting would miss the deadline holds on-demand to the
// end: with the slack spent, a move back to spot could not absorb another
// preemption.
func greedy(s State, m Market) Choice {
	if s.Current.Market == capacity.OnDemand {
		return s.Current
	}
	if i := firstSpotZone(s, m); i >= 0 && safe(s, m, m.spot(i)) {
		return m.spot(i)
	}
	if safe(s, m, None) {
		return None
	}
	return m.onDemand(s)
}
