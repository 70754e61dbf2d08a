package admission

import (
	"cmp"
	"slices"
	"time"

	"refuel/pkg/capacity"
)

// Admit places waiting requests in admission order as far as capacity
// allows and returns the new allocations, which are also in Running.
//
// A request goes on the base group when machines that suit it have the
// GPUs free, choosing the machine left with the fewest free GPUs (so
// large holes stay for large jobs); otherwise it overflows to the burst
// pools under their caps, with the offerings its tier and resources
// allow, in capacity.Order's order, minus those in unavailable (keys of
// offerings just out of stock). Paused requests are passed over.
//
// A gang is placed whole or not at all: on as many distinct base
// machines, in one zone unless it allows spreading (the zone whose
// machines fit it most tightly), or in one burst pool with room for
// every node (the pool of the first offering in order, the gang's
// offerings being that pool's). It is never split between base and
// burst: its nodes would wait on the slowest link, and a move to base
// could not be made node by node.
//
// The first request that cannot be placed reserves the base machines and
// burst pools that could take it: requests behind it are placed only
// elsewhere, so a large job is not starved by small ones slipping into
// every gap it would need. Under GangRules only a request that could be
// placed on an empty pool reserves, and a reservation lasts at most the
// pools file's reserve_timeout: then it is given back for as long, every
// request being placed where it fits, before the head of the queue
// reserves again. So two large requests never hold capacity idle for
// each other for ever.
func (s *State) Admit(now time.Time, unavailable []string) []Allocation {
	un := newUnavailable(unavailable)
	free, held := s.inUse()
	reservedNodes := make([]bool, len(s.Nodes))
	reservedPools := make([]bool, len(s.Config.Burst))
	gangRules := s.Rules >= GangRules
	if gangRules && !s.ReservedSince.IsZero() && now.Sub(s.ReservedSince) >= s.Config.ReserveTimeoutOrDefault() {
		s.ReservedSince, s.ReserveAgain = time.Time{}, now.Add(s.Config.ReserveTimeoutOrDefault())
	}
	failed := map[*shape]bool{}
	blocked := false
	admitted := map[string]bool{}
	var out []Allocation
	for _, r := range s.Queue(now) {
		if r.Paused {
			continue
		}
		sh := s.shapeOf(r)
		if !failed[sh] {
			if a, ok := s.place(r, sh, free, held, reservedNodes, reservedPools, un); ok {
				a.AdmittedAt = now
				s.take(a, free, held)
				s.Running = append(s.Running, a)
				admitted[r.ID] = true
				out = append(out, a)
				continue
			}
			// Capacity only shrinks during a pass: what failed fails again.
			failed[sh] = true
		}
		if blocked || (gangRules && (!sh.canPlace || now.Before(s.ReserveAgain))) {
			continue
		}
		blocked = true
		for _, g := range sh.zones {
			if len(g) >= sh.nodes {
				for _, i := range g {
					reservedNodes[i] = true
				}
			}
		}
		for p, bp := range s.Config.Burst {
			if sh.fitsPool(p, un) && (bp.MaxInstances == 0 || bp.MaxInstances >= sh.nodes) {
				reservedPools[p] = true
			}
		}
	}
	if gangRules {
		switch {
		case !blocked:
			s.ReservedSince = time.Time{}
		case s.ReservedSince.IsZero():
			s.ReservedSince = now
		}
	}
	if len(admitted) > 0 {
		s.Waiting = slices.DeleteFunc(s.Waiting, func(w Request) bool { return admitted[w.ID] })
		s.changed()
	}
	return out
}

// inUse is each base machine's GPUs and each burst pool's instances not
// held by any allocation, in config order.
func (s *State) inUse() (free, held []int) {
	free = make([]int, len(s.Nodes))
	for i, n := range s.Nodes {
		free[i] = n.GPUs
	}
	held = make([]int, len(s.Config.Burst))
	for i := range s.Running {
		s.take(s.Running[i], free, held)
	}
	return free, held
}

// take counts a's capacity as used in free and held.
func (s *State) take(a Allocation, free, held []int) {
	ix := s.index()
	for _, m := range a.machines() {
		if i, ok := ix.nodeAt[m]; ok {
			free[i] -= a.GPUs()
		}
	}
	if p, ok := ix.poolAt[a.Pool]; ok && a.Layer == BurstLayer {
		held[p] += a.NodeCount()
	}
}

func (s *State) place(r Request, sh *shape, free, held []int, reservedNodes, reservedPools []bool, un unavailable) (Allocation, bool) {
	if picked := pickMachines(sh, free, reservedNodes); picked != nil {
		a := Allocation{Request: r, Layer: BaseLayer}
		for _, i := range picked {
			n := s.Nodes[i]
			a.Nodes = append(a.Nodes, NodeGrant{Node: n.Name, Offerings: []capacity.Offering{n.Offering(s.Config.Base.Provider)}})
		}
		a.Node, a.Offerings = a.Nodes[0].Node, a.Nodes[0].Offerings
		if sh.nodes == 1 {
			a.Nodes = nil
		}
		return a, true
	}
	var offs []capacity.Offering
	for p, bp := range s.Config.Burst {
		if reservedPools[p] || (bp.MaxInstances > 0 && held[p]+sh.nodes > bp.MaxInstances) {
			continue
		}
		offs = append(offs, sh.available(p, un)...)
	}
	offs = capacity.Order(offs, r.Tier, "")
	if len(offs) == 0 {
		return Allocation{}, false
	}
	a := Allocation{Request: r, Layer: BurstLayer, Pool: s.poolOf(offs[0]), Offerings: offs}
	if sh.nodes > 1 {
		p := s.index().poolOf[keyOf(offs[0])]
		a.Offerings = slices.DeleteFunc(slices.Clone(offs), func(o capacity.Offering) bool { return s.index().poolOf[keyOf(o)] != p })
		a.Nodes = make([]NodeGrant, sh.nodes)
	}
	return a, true
}

// pickMachines chooses the base machines for a request of the shape, in
// rank order, or nil: for one node, the machine left with the fewest
// free GPUs (the first such); for a gang, as many distinct machines,
// those with the fewest free GPUs in the zone (or, when it may spread,
// the group) they fill most tightly.
func pickMachines(sh *shape, free []int, reserved []bool) []int {
	if sh.nodes == 1 {
		best := -1
		for _, i := range sh.suits {
			if !reserved[i] && free[i] >= sh.gpus && (best < 0 || free[i] < free[best]) {
				best = i
			}
		}
		if best < 0 {
			return nil
		}
		return []int{best}
	}
	var best []int
	bestLeft := 0
	for _, g := range sh.zones {
		var fit []int
		for _, i := range g {
			if !reserved[i] && free[i] >= sh.gpus {
				fit = append(fit, i)
			}
		}
		if len(fit) < sh.nodes {
			continue
		}
		slices.SortStableFunc(fit, func(a, b int) int { return cmp.Compare(free[a], free[b]) })
		fit = fit[:sh.nodes]
		slices.Sort(fit)
		left := 0
		for _, i := range fit {
			left += free[i] - sh.gpus
		}
		if best == nil || left < bestLeft || (left == bestLeft && fit[0] < best[0]) {
			best, bestLeft = fit, left
		}
	}
	return best
}

// Placeable reports whether r could be placed if nothing else held
// capacity: on machines that suit it (for a gang, as many in one zone
// unless it may spread), or in a burst pool with an offering its tier
// may use and a cap that allows every node.
func (s *State) Placeable(r Request) bool { return s.shapeOf(r).canPlace }
