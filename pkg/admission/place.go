package admission

import (
	"slices"
	"time"

	"refuel/pkg/capacity"
)

// Admit places waiting requests in admission order as far as capacity
// allows and returns the new allocations, which are also in Running.
//
// A request goes on the base group when a machine that suits it has the
// GPUs free, choosing the machine left with the fewest free GPUs (so
// large holes stay for large jobs); otherwise it overflows to the burst
// pools under their caps, with the offerings its tier and resources
// allow, in capacity.Order's order, minus those in unavailable (keys of
// offerings just out of stock). Paused requests are passed over.
//
// The first request that cannot be placed reserves the base machines and
// burst pools that could take it: requests behind it are placed only
// elsewhere, so a large job is not starved by small ones slipping into
// every gap it would need.
func (s *State) Admit(now time.Time, unavailable []string) []Allocation {
	free := s.freeGPUs(false)
	held := s.poolCounts(false)
	reservedNodes := map[string]bool{}
	reservedPools := map[string]bool{}
	blocked := false
	var out []Allocation
	for _, r := range s.Queue(now) {
		if r.Paused {
			continue
		}
		a, ok := s.place(r, free, held, reservedNodes, reservedPools, unavailable)
		if !ok {
			if !blocked {
				blocked = true
				for _, n := range s.fitNodes(r) {
					reservedNodes[n] = true
				}
				for _, p := range s.fitPools(r, unavailable) {
					reservedPools[p] = true
				}
			}
			continue
		}
		a.AdmittedAt = now
		if a.Layer == BaseLayer {
			free[a.Node] -= a.GPUs()
		} else {
			held[a.Pool]++
		}
		s.Running = append(s.Running, a)
		s.Waiting = slices.DeleteFunc(s.Waiting, func(w Request) bool { return w.ID == r.ID })
		out = append(out, a)
	}
	return out
}

func (s *State) place(r Request, free map[string]int, held map[string]int, reservedNodes, reservedPools map[string]bool, unavailable []string) (Allocation, bool) {
	need := max(r.Resources.GPUs, 1)
	best := -1
	for i, n := range s.Nodes {
		if reservedNodes[n.Name] || free[n.Name] < need || !s.suits(r, i) {
			continue
		}
		if best < 0 || free[n.Name] < free[s.Nodes[best].Name] {
			best = i
		}
	}
	if best >= 0 {
		n := s.Nodes[best]
		return Allocation{Request: r, Layer: BaseLayer, Node: n.Name, Offerings: []capacity.Offering{n.Offering(s.Config.Base.Provider)}}, true
	}
	var offs []capacity.Offering
	for _, p := range s.Config.Burst {
		if reservedPools[p.Name] || (p.MaxInstances > 0 && held[p.Name] >= p.MaxInstances) {
			continue
		}
		offs = append(offs, available(capacity.Match(p.Offerings, r.Resources), unavailable)...)
	}
	offs = capacity.Order(offs, r.Tier, "")
	if len(offs) == 0 {
		return Allocation{}, false
	}
	return Allocation{Request: r, Layer: BurstLayer, Pool: s.poolOf(offs[0]), Offerings: offs}, true
}

// suits reports whether base machine i meets r's resources.
func (s *State) suits(r Request, i int) bool {
	return len(capacity.Match([]capacity.Offering{s.Nodes[i].Offering(s.Config.Base.Provider)}, r.Resources)) == 1
}

// fitNodes are the base machines that could take r once empty enough.
func (s *State) fitNodes(r Request) []string {
	var out []string
	for i, n := range s.Nodes {
		if s.suits(r, i) {
			out = append(out, n.Name)
		}
	}
	return out
}

// fitPools are the burst pools with an offering r may use.
func (s *State) fitPools(r Request, unavailable []string) []string {
	var out []string
	for _, p := range s.Config.Burst {
		if len(capacity.Order(available(capacity.Match(p.Offerings, r.Resources), unavailable), r.Tier, "")) > 0 {
			out = append(out, p.Name)
		}
	}
	return out
}

// freeGPUs is each base machine's GPUs not allocated; with yieldingFree,
// allocations being preempted count as free already.
func (s *State) freeGPUs(yieldingFree bool) map[string]int {
	free := map[string]int{}
	for _, n := range s.Nodes {
		free[n.Name] = n.GPUs
	}
	for _, a := range s.Running {
		if a.Layer == BaseLayer && !(yieldingFree && a.Yielding) {
			free[a.Node] -= a.GPUs()
		}
	}
	return free
}

// poolCounts is the instances held in each burst pool; with
// yieldingFree, allocations being preempted are not counted.
func (s *State) poolCounts(yieldingFree bool) map[string]int {
	held := map[string]int{}
	for _, a := range s.Running {
		if a.Layer == BurstLayer && !(yieldingFree && a.Yielding) {
			held[a.Pool]++
		}
	}
	return held
}

func available(offs []capacity.Offering, unavailable []string) []capacity.Offering {
	var out []capacity.Offering
	for _, o := range offs {
		if !slices.Contains(unavailable, o.Key()) {
			out = append(out, o)
		}
	}
	return out
}
