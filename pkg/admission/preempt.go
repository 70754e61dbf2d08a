package admission

import (
	"cmp"
	"slices"
	"time"
)

// Victims chooses the training allocations to preempt so that r, a
// demand Admit could not place, fits: they checkpoint, yield their
// instance and are requeued (Requeue); nothing here stops them.
//
// Only training allocations of a priority below r's, as set (aging does
// not count), by at least the config's PreemptGap, admitted at least
// PreemptAfter before now, and not already yielding may be chosen. Capacity already
// yielding counts as free: when it is enough, victims is empty and ok
// true, and r waits for it. ok is false when no choice makes room.
//
// Each base machine that suits r, and each capped burst pool with an
// offering r may use, is a way to make room; the way chosen preempts
// the lowest priorities, then the fewest runs, then frees the fewest
// GPUs beyond the need, then prefers base (it costs r nothing), then
// comes first in the config. On a machine, victims are taken lowest
// priority first, then largest first (fewer runs disturbed), then the
// most recently admitted (least progress since admission at stake).
func (s *State) Victims(r Request, unavailable []string, now time.Time) (victims []Allocation, ok bool) {
	type way struct {
		victims  []Allocation
		top      int // highest victim priority, -1 for none
		waste    int
		burst    bool
		position int
	}
	var ways []way
	need := max(r.Resources.GPUs, 1)
	free := s.freeGPUs(true)
	for i, n := range s.Nodes {
		if !s.suits(r, i) || n.GPUs < need {
			continue
		}
		var got []Allocation
		f := free[n.Name]
		for _, a := range s.candidates(r, now, func(a Allocation) bool { return a.Layer == BaseLayer && a.Node == n.Name }) {
			if f >= need {
				break
			}
			got = append(got, a)
			f += a.GPUs()
		}
		if f >= need {
			ways = append(ways, way{got, topPriority(got), f - need, false, i})
		}
	}
	held := s.poolCounts(true)
	for i, p := range s.Config.Burst {
		if p.MaxInstances == 0 || !slices.Contains(s.fitPools(r, unavailable), p.Name) {
			continue
		}
		if held[p.Name] < p.MaxInstances {
			ways = append(ways, way{nil, -1, 0, true, len(s.Nodes) + i})
			continue
		}
		if c := s.candidates(r, now, func(a Allocation) bool { return a.Layer == BurstLayer && a.Pool == p.Name }); len(c) > 0 {
			ways = append(ways, way{c[:1], c[0].Request.Priority, 0, true, len(s.Nodes) + i})
		}
	}
	if len(ways) == 0 {
		return nil, false
	}
	best := slices.MinFunc(ways, func(a, b way) int {
		return cmp.Or(
			cmp.Compare(a.top, b.top),
			cmp.Compare(len(a.victims), len(b.victims)),
			cmp.Compare(a.waste, b.waste),
			boolCompare(a.burst, b.burst),
			cmp.Compare(a.position, b.position),
		)
	})
	return best.victims, true
}

// MarkYielding records that allocations were chosen to be preempted, so
// they are not chosen again and their capacity is counted as coming free.
func (s *State) MarkYielding(ids ...string) error {
	for _, id := range ids {
		a := s.running(id)
		if a == nil {
			return &NotFoundError{id}
		}
		a.Yielding = true
	}
	return nil
}

// candidates are the allocations in where that r may preempt, in the
// order to take them.
func (s *State) candidates(r Request, now time.Time, where func(Allocation) bool) []Allocation {
	var out []Allocation
	gap := max(s.Config.PreemptGap, 1)
	for _, a := range s.Running {
		if where(a) && a.Request.Kind == Training && !a.Yielding && a.Request.Priority <= r.Priority-gap &&
			now.Sub(a.AdmittedAt) >= s.Config.PreemptAfter.D() {
			out = append(out, a)
		}
	}
	slices.SortStableFunc(out, func(a, b Allocation) int {
		return cmp.Or(
			cmp.Compare(a.Request.Priority, b.Request.Priority),
			cmp.Compare(b.GPUs(), a.GPUs()),
			b.AdmittedAt.Compare(a.AdmittedAt),
			cmp.Compare(a.Request.ID, b.Request.ID),
		)
	})
	return out
}

func topPriority(as []Allocation) int {
	top := -1
	for _, a := range as {
		top = max(top, a.Request.Priority)
	}
	return top
}

func boolCompare(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
