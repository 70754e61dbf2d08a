package admission

import (
	"cmp"
	"slices"
	"time"
)

// Waited is how long r has waited by now, leaving out time paused.
func (r Request) Waited(now time.Time) time.Duration {
	w := now.Sub(r.EnqueuedAt) - r.PausedFor
	if r.Paused {
		w -= now.Sub(r.PausedAt)
	}
	return max(0, w)
}

// Effective is r's priority after aging: its priority plus
// Config.AgingPerHour for every hour waited. A request that waits long
// enough outranks any newcomer, so none is starved. Aging orders the
// queue only: preemption compares priorities as set, so a job that has
// merely waited never evicts one that is running.
func (s *State) Effective(r Request, now time.Time) float64 {
	return float64(r.Priority) + s.Config.AgingPerHour*r.Waited(now).Hours()
}

// Queue returns the waiting requests in admission order at now: highest
// effective priority first, first come first served among equals. Paused
// requests keep their place in it; Admit passes over them.
func (s *State) Queue(now time.Time) []Request {
	// Each request's rank is computed once, not at every comparison.
	type ranked struct {
		effective float64
		seq       int64
		at        int
	}
	rs := make([]ranked, len(s.Waiting))
	for i, r := range s.Waiting {
		rs[i] = ranked{s.Effective(r, now), r.Seq, i}
	}
	slices.SortStableFunc(rs, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(b.effective, a.effective), cmp.Compare(a.seq, b.seq))
	})
	q := make([]Request, len(rs))
	for i, r := range rs {
		q[i] = s.Waiting[r.at]
	}
	return q
}
