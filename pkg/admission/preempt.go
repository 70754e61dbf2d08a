package admission

import (
	"cmp"
	"slices"
	"time"
)

// Victims chooses the allocations to preempt so that r, a
// demand Admit could not place, fits: they checkpoint, yield their
// instances and are requeued (Requeue); nothing here stops them.
//
// Only allocations of a kind that yields (training and development) of a
// priority below r's, as set (aging does
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
	w, ok := s.victims(r, sh, newUnavailable(unavailable), now, h.freeY, h.heldY)
	if len(w.victims) == 0 {
		h.memo.store(sh, r.Priority, ok)
		return nil, ok
	}
	return s.allocations(w.victims), true
}

// Preemption is a victim Preempt chose, and the request it yields for.
type Preemption struct {
	Victim Allocation
	For    Request
}

// Preempt is a preemption pass over the queue: for each request at now
// that Admit could not place, in admission order, it finds Victims and
// marks them yielding. Room found, whether by victims or in capacity
// already yielding, is claimed by the request it was found for, so the
// requests after it do not count it too: a hundred replicas arriving at
// once preempt a hundred runs in one pass, not one run a pass.
func (s *State) Preempt(now time.Time, unavailable []string) []Preemption {
	un := newUnavailable(unavailable)
	h := s.holdings()
	free, held := slices.Clone(h.freeY), slices.Clone(h.heldY)
	var out []Preemption
	// The highest priority of each shape that found no way: claims only
	// take room away, so one of that shape and no higher priority finds
	// none either, until victims free more than their requests claim.
	noWay := map[*shape]int{}
	for _, r := range s.Queue(now) {
		if r.Paused {
			continue
		}
		sh := s.shapeOf(r)
		if p, ok := noWay[sh]; ok && r.Priority <= p {
			continue
		}
		w, ok := s.victims(r, sh, un, now, free, held)
		if !ok {
			noWay[sh] = max(r.Priority, noWay[sh])
			continue
		}
		if len(w.victims) > 0 {
			clear(noWay)
		}
		for _, i := range w.machines {
			free[i] -= sh.gpus
		}
		if w.pool >= 0 {
			held[w.pool] += sh.nodes
		}
		for _, v := range s.allocations(w.victims) {
			s.counted(v, free, held)
			_ = s.MarkYielding(v.Request.ID)
			v.Yielding = true
			out = append(out, Preemption{Victim: v, For: r})
		}
	}
	return out
}

// counted gives a's capacity back in free and held.
func (s *State) counted(a Allocation, free, held []int) {
	ix := s.index()
	for _, m := range a.machines() {
		if i, ok := ix.nodeAt[m]; ok {
			free[i] += a.GPUs()
		}
	}
	if p, ok := ix.poolAt[a.Pool]; ok && a.Layer == BurstLayer {
		held[p] -= a.NodeCount()
	}
}

func (s *State) allocations(positions []int) []Allocation {
	out := make([]Allocation, len(positions))
	for i, p := range positions {
		out[i] = s.Running[p]
	}
	return out
}

// way is one way to make room: the victims' positions in Running, and
// the machines or the pool the room is on.
type way struct {
	victims  []int
	machines []int
	pool     int // -1 for base
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

// victims finds the best way for r, counting free GPUs per machine and
// instances held per pool as given.
func (s *State) victims(r Request, sh *shape, un unavailable, now time.Time, free, held []int) (way, bool) {
	h := s.holdings()
	limit := r.Priority - max(s.Config.PreemptGap, 1)
	may := func(pos int) bool {
		a := &s.Running[pos]
		return a.Request.Kind.Yields() && !a.Yielding && a.Request.Priority <= limit && now.Sub(a.AdmittedAt) >= s.Config.PreemptAfter.D()
	}
	var ways []way
	// Each machine's own way: what must go for the machine to fit one node.
	onMachine := map[int]way{}
	for _, i := range sh.suits {
		if s.Nodes[i].GPUs < sh.gpus {
			continue
		}
		var got []int
		f := free[i]
		for _, pos := range h.onNode[i] {
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
			onMachine[i] = way{victims: got, machines: []int{i}, pool: -1, top: s.topPriority(got), waste: f - sh.gpus, position: i}
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
		room := bp.MaxInstances - held[p]
		if s.Rules < GangRules {
			room = max(room, 0) // one victim a pass, as the pool recorded before gangs did
		}
		var got []int
		for _, pos := range h.inPool[p] {
			if room >= sh.nodes || s.Running[pos].Request.Priority > limit {
				break
			}
			if may(pos) {
				got = append(got, pos)
				room += s.Running[pos].NodeCount()
			}
		}
		if room >= sh.nodes {
			ways = append(ways, way{victims: got, pool: p, top: s.topPriority(got), burst: true, position: len(s.Nodes) + p})
		}
	}
	if len(ways) == 0 {
		return way{}, false
	}
	return slices.MinFunc(ways, way.compare), true
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
	out := way{pool: -1, top: top, position: ms[0].position}
	seen := map[int]bool{}
	for _, m := range ms {
		out.waste += m.waste
		out.machines = append(out.machines, m.machines...)
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
