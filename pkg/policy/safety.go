package policy

import "refuel/pkg/capacity"

// safe reports whether holding c for the next step keeps the deadline in
// reach in the worst case: spot lost at the end of the step, after which
// an on-demand start (paying the restart overhead) runs to the end. Every
// deadline policy checks its choice with it, so none misses a deadline
// that on-demand from the start would have met.
func safe(s State, m Market, c Choice) bool {
	o := s.RestartOverhead
	if !c.Holds() {
		return s.TimeLeft-m.Step >= s.Remaining+o
	}
	r := o
	if c == s.Current {
		r = s.OverheadLeft
	}
	if c.Market != capacity.Spot {
		return s.TimeLeft >= s.Remaining+r
	}
	left := s.Remaining - max(0, m.Step-r)
	if left <= 0 {
		return s.TimeLeft >= s.Remaining+r
	}
	return s.TimeLeft-m.Step >= left+o
}
