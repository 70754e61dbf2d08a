package policy

import (
	"time"

	"refuel/pkg/capacity"
)

// uniformProgress follows the rules of Uniform Progress ("Can't Be Late",
// NSDI'24), with d the restart overhead and ep(t) the progress a run
// finishing exactly at the deadline at a constant rate has made by t:
//   - safety net: with less than 2d of slack, hold on-demand to the end;
//   - hysteresis: on on-demand, stay until progress reaches ep(t+2d);
//   - taking risks: hold spot whenever it is in stock;
//   - uniform progress: out of stock, hold on-demand while behind ep(t),
//     and nothing while ahead.
//
// Each choice is also checked with safe, which covers what the 2d net
// does not when decisions are far apart. An elastic gang takes spot on
// the nodes in stock (see Gang.spot).
func uniformProgress(s State, m Market, g Gang) Choice {
	d := s.RestartOverhead
	od := m.onDemand(s)
	if s.slack() < 2*d {
		return od
	}
	expected := func(at time.Duration) time.Duration {
		total := s.Elapsed + s.TimeLeft
		if total <= 0 {
			return s.Done + s.Remaining
		}
		return time.Duration(float64(s.Done+s.Remaining) * float64(at) / float64(total))
	}
	if s.Current.Market == capacity.OnDemand && s.Done < expected(s.Elapsed+2*d) {
		return od
	}
	if c, ok := g.spot(s, m, firstSpotZone(s, m)); ok && g.safe(s, m, c) {
		return c
	}
	if s.Done >= expected(s.Elapsed) && safe(s, m, None) {
		return None
	}
	return od
}
