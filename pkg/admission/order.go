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
	q := slices.Clone(s.Waiting)
	slices.SortStableFunc(q, func(a, b Request) int {
		if c := cmp.Compare(s.Effective(b, now), s.Effective(a, now)); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	return q
}
