package admission

import (
	"slices"
	"time"

	"refuel/pkg/pool"
)

// Moves chooses running burst training allocations to move onto base
// machines that have come free, most expensive first (ReleaseOrder), as
// long as nothing that could use the base is waiting: burst capacity is
// given back before base whenever load falls. Each move is a yield (the
// run checkpoints and is requeued) after which Admit places it on base.
// Allocations not yet bound to their instances, or already yielding,
// stay, but under UnfilledGangRules a burst gang that has not acquired
// every node moves at once: base machines are free for it now, and the
// market may not fill its grant before its gang_timeout. A gang moves
// only when machines for all its nodes are free. Under UnfilledRules a
// run of one node waiting on its burst grant moves the same way.
func (s *State) Moves() []Allocation {
	for _, r := range s.Waiting {
		if !r.Paused {
			return nil
		}
	}
	free := slices.Clone(s.holdings().freeY)
	// Burst runs already yielding are requeued and will take free base
	// first: count what they need as spoken for.
	spoken, left := 0, 0
	for _, a := range s.Running {
		if a.Layer == BurstLayer && a.Yielding {
			spoken += a.GPUs() * a.NodeCount()
		}
	}
	for i := range s.Nodes {
		take := min(spoken, free[i])
		free[i] -= take
		spoken -= take
		left += max(free[i], 0)
	}
	if left == 0 {
		return nil
	}
	var out []Allocation
	failed := map[*shape]bool{}
	for _, a := range ReleaseOrder(s.Running) {
		movesUnfilled := s.Rules >= UnfilledRules || s.Rules >= UnfilledGangRules && len(a.Nodes) > 0
		if a.Layer != BurstLayer || a.Request.Kind != Training || !a.Acquired() && !movesUnfilled || a.Yielding {
			continue
		}
		sh := s.shapeOf(a.Request)
		if failed[sh] {
			continue
		}
		picked := firstFit(sh, free)
		if picked == nil {
			failed[sh] = true // free base only shrinks from here
			continue
		}
		for _, i := range picked {
			free[i] -= a.GPUs()
		}
		out = append(out, a)
	}
	return out
}

// firstFit is the first machines in inventory order with room for every
// node of the shape, in one zone for a one-zone gang, or nil.
func firstFit(sh *shape, free []int) []int {
	for _, g := range sh.zones {
		var fit []int
		for _, i := range g {
			if free[i] >= sh.gpus {
				if fit = append(fit, i); len(fit) == sh.nodes {
					return fit
				}
			}
		}
	}
	return nil
}

// Unready are the burst gangs admitted at least the pools file's
// gang_timeout before now that have not bound every node yet, nor been
// asked to yield: the pool takes their grant back (a yield) and requeues
// them, so capacity a gang cannot fill does not sit idle under it while
// others wait. A base gang is exempt: its machines are the pool's own
// and no market runs out of them.
func (s *State) Unready(now time.Time) []Allocation {
	if s.Rules < GangRules {
		return nil
	}
	var out []Allocation
	for _, a := range s.Running {
		if a.Layer == BurstLayer && len(a.Nodes) > 0 && !a.Yielding && !a.Acquired() && now.Sub(a.AdmittedAt) >= s.Config.GangTimeoutOrDefault() {
			out = append(out, a)
		}
	}
	return out
}

// Reconfigure takes a new pools file. What runs keeps running, even on a
// machine or pool the new file drops: it is given back when its holder
// ends, and only new admissions follow the new file.
func (s *State) Reconfigure(c pool.Config) {
	s.Config = c
	s.Nodes = s.inventory()
	s.ix = nil
}
