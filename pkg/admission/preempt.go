package admission

import (
	"cmp"
	"slices"
	"time"
)

// Victims chooses the training allocations to preempt so that r, a
// demand Admit could not place, fits: they checkpoint, yield their
// instances and are requeued (Requeue); nothing here stops them.
//
// Only training allocations of a priority below r's, as set (aging does
// not count), by at least the config's PreemptGap, admitted at least
// PreemptAfter before now, and not already yielding may be chosen.
// Capacity already yielding counts as free: when it is enough, victims
// is empty and ok true, and r waits for it. ok is false when no choice
// makes room.
//
// Each base machine that suits r, and each capped burst pool with an
// offering r may use, is a way to make room; the way chosen preempts
// the lowest priorities, then the fewest runs, then frees the fewest
// GPUs beyond the need, then prefers base (it costs r nothing), then
// comes first in the config. On a machine, victims are taken lowest
// priority first, then largest first (fewer runs disturbed), then the
// most recently admitted (least progress since admission at stake).
//
// For a gang, a way makes room for every node or is no way: as many
// machines (in one zone, unless it may spread), those whose own victims
// rank best, or a pool freed of enough instances. So a gang's
// preemption frees a whole gang's worth or nothing, and never preempts
// what it then cannot use. A gang chosen as a victim yields all its
// nodes.
func (s *State) Victims(r Request, unavailable []string, now time.Time) (victims []Allocation, ok bool) {
	h := s.holdings()
	sh := s.shapeOf(r)
	if ok, hit := h.memo.lookup(sh, r.Priority, now, unavailable); hit {
		return nil, ok
	}
	positions, ok := s.victims(r, sh, newUnavailable(unavailable), now)
	if len(positions) == 0 {
		h.memo.store(sh, r.Priority, ok)
		return nil, ok
	}
	for _, p := range positions {
		victims = append(victims, s.Running[p])
	}
	return victims, true
}

// way is one way to make room: the victims' positions in Running.
type way struct {
	victims  []int
	top      int // highest victim priority, -1 for none
	waste    int
	burst    bool
	position int
}

func (w way) compare(o way) int {
	return cmp.Or(
		cmp.Compare(w.top, o.top),
		cmp.Compare(len(w.victims), len(o.victims)),
		cmp.Compare(w.waste, o.waste),
		boolCompare(w.burst, o.burst),
		cmp.Compare(w.position, o.position),
	)
}

func (s *State) victims(r Request, sh *shape, un unavailable, now time.Time) ([]int, bool) {
	ix := s.holdings()
	limit := r.Priority - max(s.Config.PreemptGap, 1)
	may := func(pos int) bool {
		a := &s.Running[pos]
		return a.Request.Kind == Training && !a.Yielding && a.Request.Priority <= limit && now.Sub(a.AdmittedAt) >= s.Config.PreemptAfter.D()
	}
	var ways []way
	// Each machine's own way: what must go for the machine to fit one node.
	onMachine := map[int]way{}
	for _, i := range sh.suits {
		if s.Nodes[i].GPUs < sh.gpus {
			continue
		}
		var got []int
		f := ix.freeY[i]
		for _, pos := range ix.onNode[i] {
			if f >= sh.gpus {
				break
			}
			if p := s.Running[pos].Request.Priority; p > limit {
				break // the rest rank higher still
			}
			if may(pos) {
				got = append(got, pos)
				f += s.Running[pos].GPUs()
			}
		}
		if f >= sh.gpus {
			onMachine[i] = way{got, s.topPriority(got), f - sh.gpus, false, i}
		}
	}
	for _, g := range sh.zones {
		if w, ok := s.gangWay(g, sh.nodes, onMachine); ok {
			ways = append(ways, w)
		}
	}
	for p, bp := range s.Config.Burst {
		if bp.MaxInstances == 0 || bp.MaxInstances < sh.nodes || !sh.fitsPool(p, un) {
			continue
		}
		room := bp.MaxInstances - ix.heldY[p]
		if s.Rules < GangRules {
			room = max(room, 0) // one victim a pass, as the pool recorded before gangs did
		}
		var got []int
		for _, pos := range ix.inPool[p] {
			if room >= sh.nodes || s.Running[pos].Request.Priority > limit {
				break
			}
			if may(pos) {
				got = append(got, pos)
				room += s.Running[pos].NodeCount()
			}
		}
		if room >= sh.nodes {
			ways = append(ways, way{got, s.topPriority(got), 0, true, len(s.Nodes) + p})
		}
	}
	if len(ways) == 0 {
		return nil, false
	}
	return slices.MinFunc(ways, way.compare).victims, true
}

// gangWay picks, from the machines of one group (a zone, or all), the n
// whose own ways rank best, and returns them as one way: the highest
// priority it preempts is as low as it can be, then as few runs as can
// be, then as little waste. For one node each machine is its own way,
// and the best of them is chosen.
func (s *State) gangWay(group []int, n int, onMachine map[int]way) (way, bool) {
	var ms []way
	for _, i := range group {
		if w, ok := onMachine[i]; ok {
			ms = append(ms, w)
		}
	}
	if len(ms) < n {
		return way{}, false
	}
	if n == 1 {
		return slices.MinFunc(ms, way.compare), true
	}
	slices.SortStableFunc(ms, func(a, b way) int { return cmp.Compare(a.top, b.top) })
	top := ms[n-1].top
	ms = slices.DeleteFunc(ms, func(w way) bool { return w.top > top })
	slices.SortStableFunc(ms, func(a, b way) int {
		return cmp.Or(cmp.Compare(len(a.victims), len(b.victims)), cmp.Compare(a.waste, b.waste), cmp.Compare(a.position, b.position))
	})
	ms = ms[:n]
	slices.SortFunc(ms, func(a, b way) int { return cmp.Compare(a.position, b.position) })
	out := way{top: top, position: ms[0].position}
	seen := map[int]bool{}
	for _, m := range ms {
		out.waste += m.waste
		for _, v := range m.victims {
			if !seen[v] {
				seen[v] = true
				out.victims = append(out.victims, v)
			}
		}
	}
	return out, true
}

// MarkYielding records that allocations were chosen to be preempted, so
// they are not chosen again and their capacity is counted as coming free.
func (s *State) MarkYielding(ids ...string) error {
	for _, id := range ids {
		a := s.running(id)
		if a == nil {
			return &NotFoundError{id}
		}
		if a.Yielding {
			continue
		}
		a.Yielding = true
		if ix := s.ix; ix != nil && ix.held != nil {
			for _, m := range a.machines() {
				if i, ok := ix.nodeAt[m]; ok {
					ix.held.freeY[i] += a.GPUs()
				}
			}
			if p, ok := ix.poolAt[a.Pool]; ok && a.Layer == BurstLayer {
				ix.held.heldY[p] -= a.NodeCount()
			}
			ix.held.memo.none = nil
		}
	}
	return nil
}

func (s *State) topPriority(positions []int) int {
	top := -1
	for _, p := range positions {
		top = max(top, s.Running[p].Request.Priority)
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
