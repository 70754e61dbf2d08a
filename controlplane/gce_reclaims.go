package controlplane

import (
	"context"
	"sync"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/gce"
)

// gceReclaims is the Compute Engine provider with what Compute Engine
// took back (capacity.Reclaimer), read from the zones'
// compute.instances.preempted operations. An instance is listed once it
// has stopped or is gone, not while its 30 s notice runs and its agent
// may still be writing the final checkpoint; a spot VM is deleted once it
// stops (instanceTerminationAction DELETE), so its tags are kept from a
// look while it was stopping.
type gceReclaims struct {
	*gce.Cloud

	mu sync.Mutex
	// seen are the preempted instances by name: as last described, and
	// whether they have ended.
	seen map[string]reclaim
	// running are the instances with the tags asked for that ran at the
	// last call: the tags of one preempted and deleted before it was
	// seen stopping.
	running map[string]capacity.Instance
}

type reclaim struct {
	inst  capacity.Instance
	ended bool
}

// newGCEReclaims wraps c.
func newGCEReclaims(c *gce.Cloud) *gceReclaims {
	return &gceReclaims{Cloud: c, seen: map[string]reclaim{}, running: map[string]capacity.Instance{}}
}

// Reclaimed implements capacity.Reclaimer.
func (g *gceReclaims) Reclaimed(ctx context.Context, tags map[string]string) ([]capacity.Instance, error) {
	// Every preemption Compute Engine still lists (the configured zones,
	// or every zone of the project): those already told are remembered.
	preempted, err := g.Preemptions(ctx, nil, time.Time{})
	if err != nil {
		return nil, err
	}
	running, err := g.List(ctx, tags)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	before := g.running
	g.running = map[string]capacity.Instance{}
	for _, inst := range running {
		g.running[inst.ID] = inst
	}
	listed := map[string]bool{}
	for _, p := range preempted {
		name := p.Instance
		listed[name] = true
		if r, ok := g.seen[name]; ok && r.ended {
			continue
		}
		inst, state, err := g.Describe(ctx, name)
		switch {
		case capacity.IsNotFound(err):
			if r, ok := g.seen[name]; ok {
				g.seen[name] = reclaim{r.inst, true}
			} else if inst, ok := before[name]; ok {
				g.seen[name] = reclaim{inst, true}
			} // never seen with its tags: its run learns at its heartbeat timeout
		case err != nil:
			return nil, err
		default:
			g.seen[name] = reclaim{inst, state == capacity.StateTerminated}
		}
	}
	var out []capacity.Instance
	for name, r := range g.seen {
		switch {
		case !listed[name]:
			delete(g.seen, name) // Compute Engine no longer lists its operation
		case r.ended && hasTags(r.inst, tags):
			out = append(out, r.inst)
		}
	}
	return out, nil
}

func hasTags(inst capacity.Instance, tags map[string]string) bool {
	for k, v := range tags {
		if inst.Tags[k] != v {
			return false
		}
	}
	return true
}
