package policy

import (
	"math"
	"time"

	"refuel/pkg/capacity"
)

// safe reports whether holding c for the next step keeps the deadline in
// reach in the worst case: spot lost at the end of the step, after which
// an on-demand start (paying the restart overhead) runs to the end. Every
// deadline policy checks its choice with it, so none misses a deadline
// that on-demand from the start would have met.
//
// Where a start in another region moves the checkpoint first, the
// on-demand start it falls back on pays the move's time too when the
// cheapest on-demand start is in another region than the checkpoint.
func safe(s State, m Market, c Choice) bool {
	o := s.RestartOverhead + m.fallbackMove(s, c)
	if !c.Holds() {
		return s.TimeLeft-m.Step >= s.Remaining+o
	}
	r := o
	if c == s.Current {
		r = s.OverheadLeft
	}
	if c.Market != capacity.Spot {
		if c != s.Current {
			r = s.RestartOverhead
			if i := m.zone(c.Zone); i >= 0 && m.moves(m.Zones[i]) {
				r += m.Move.Time
			}
		}
		return s.TimeLeft >= s.Remaining+r
	}
	left := s.Remaining - max(0, m.Step-r)
	if left <= 0 {
		return s.TimeLeft >= s.Remaining+r
	}
	return s.TimeLeft-m.Step >= left+o
}

// fallbackMove is the move time the on-demand start taken after c ends
// pays: 0 unless the cheapest on-demand start from the region the
// checkpoint is in then (c's, where c holds) is in another region. The
// margin keeps that cheaper start in reach rather than leaving the run
// to the dearer on-demand where it is once the slack is spent.
func (m Market) fallbackMove(s State, c Choice) time.Duration {
	if m.Move.Time <= 0 {
		return 0
	}
	then := m
	if i := m.zone(c.Zone); c.Holds() && i >= 0 {
		then.Move.Region = m.Zones[i].Region
	}
	after := s
	after.Current = None
	after.TimeLeft = time.Duration(math.MaxInt64) // where it would go with time to spare
	if i := then.zone(then.onDemand(after).Zone); i >= 0 && then.moves(then.Zones[i]) {
		return m.Move.Time
	}
	return 0
}
