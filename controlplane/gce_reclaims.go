package controlplane

import (
	"context"
	"fmt"
	"path"
	"sync"

	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/option"

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
	svc     *compute.Service
	project string
	// zones are those asked; nil until first found (the configured ones,
	// or every zone of the project).
	zones []string

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

// newGCEReclaims wraps c, asking Compute Engine's API at cfg's endpoint
// (without credentials, as the provider does) or Google's with
// Application Default Credentials.
func newGCEReclaims(ctx context.Context, c *gce.Cloud, cfg gce.Config) (*gceReclaims, error) {
	opts := []option.ClientOption{option.WithScopes(compute.ComputeScope)}
	if cfg.Endpoint != "" {
		opts = []option.ClientOption{option.WithEndpoint(cfg.Endpoint), option.WithoutAuthentication()}
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	svc, err := compute.NewService(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("--provider gce: the client that reads preemptions: %w", err)
	}
	return &gceReclaims{Cloud: c, svc: svc, project: c.Project(), zones: cfg.Zones, seen: map[string]reclaim{}, running: map[string]capacity.Instance{}}, nil
}

// Reclaimed implements capacity.Reclaimer.
func (g *gceReclaims) Reclaimed(ctx context.Context, tags map[string]string) ([]capacity.Instance, error) {
	zones, err := g.zonesToAsk(ctx)
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
	for _, zone := range zones {
		ops, err := g.svc.ZoneOperations.List(g.project, zone).Filter(`operationType = "compute.instances.preempted"`).Context(ctx).Do()
		if err != nil {
			return nil, fmt.Errorf("gce: listing the preemptions of %s: %w", zone, err)
		}
		for _, op := range ops.Items {
			name := path.Base(op.TargetLink)
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

// zonesToAsk are the configured zones, or every zone of the project,
// listed once.
func (g *gceReclaims) zonesToAsk(ctx context.Context) ([]string, error) {
	g.mu.Lock()
	zones := g.zones
	g.mu.Unlock()
	if zones != nil {
		return zones, nil
	}
	list, err := g.svc.Zones.List(g.project).Context(ctx).Do()
	if err != nil {
		return nil, fmt.Errorf("gce: listing the zones of project %s: %w", g.project, err)
	}
	for _, z := range list.Items {
		zones = append(zones, z.Name)
	}
	g.mu.Lock()
	g.zones = zones
	g.mu.Unlock()
	return zones, nil
}

func hasTags(inst capacity.Instance, tags map[string]string) bool {
	for k, v := range tags {
		if inst.Tags[k] != v {
			return false
		}
	}
	return true
}
