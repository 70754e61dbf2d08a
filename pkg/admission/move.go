package admission

import (
	"refuel/pkg/pool"
)

// Moves chooses running burst training allocations to move onto base
// machines that have come free, most expensive first (ReleaseOrder), as
// long as nothing that could use the base is waiting: burst capacity is
// given back before base whenever load falls. Each move is a yield (the
// run checkpoints and is requeued) after which Admit places it on base.
// Allocations not yet bound to an instance, or already yielding, stay.
func (s *State) Moves() []Allocation {
	for _, r := range s.Waiting {
		if !r.Paused {
			return nil
		}
	}
	free := s.freeGPUs(true)
	// Burst runs already yielding are requeued and will take free base
	// first: count what they need as spoken for.
	spoken := 0
	for _, a := range s.Running {
		if a.Layer == BurstLayer && a.Yielding {
			spoken += a.GPUs()
		}
	}
	for _, n := range s.Nodes {
		take := min(spoken, free[n.Name])
		free[n.Name] -= take
		spoken -= take
	}
	var out []Allocation
	for _, a := range ReleaseOrder(s.Running) {
		if a.Layer != BurstLayer || a.Request.Kind != Training || !a.Bound || a.Yielding {
			continue
		}
		for i, n := range s.Nodes {
			if free[n.Name] >= a.GPUs() && s.suits(a.Request, i) {
				free[n.Name] -= a.GPUs()
				out = append(out, a)
				break
			}
		}
	}
	return out
}

// Reconfigure takes a new pools file. What runs keeps running, even on a
// machine or pool the new file drops: it is given back when its holder
// ends, and only new admissions follow the new file.
func (s *State) Reconfigure(c pool.Config) {
	s.Config, s.Nodes = c, c.Base.Inventory()
}
