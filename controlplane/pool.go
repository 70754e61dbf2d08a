package controlplane

import (
	"context"
	"fmt"
	"slices"

	"go.temporal.io/sdk/client"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/local"
	"refuel/pkg/pool"
	"refuel/workflows"
)

// startBase runs the base group's machines as a local cloud of their own,
// named for the group's provider: each machine's instances are node-agent
// processes, as on any other cloud of this control plane.
func startBase(c pool.Config, launcher local.LauncherConfig) (*local.Cloud, error) {
	var offerings []capacity.Offering
	for _, n := range c.Base.Inventory() {
		o := n.Offering(c.Base.Provider)
		if !slices.ContainsFunc(offerings, func(x capacity.Offering) bool { return x.Key() == o.Key() }) {
			offerings = append(offerings, o)
		}
	}
	base, err := local.New(local.Config{LauncherConfig: launcher, Name: c.Base.Provider, Offerings: offerings})
	if err != nil {
		return nil, fmt.Errorf("base group %s: %w", c.Base.Name, err)
	}
	return base, nil
}

// EnsurePool starts the CapacityPool workflow with the pools file, or
// hands the file to the one already running: a worker restart with an
// edited file reconfigures the pool without losing its queue.
func EnsurePool(ctx context.Context, c client.Client, cfg pool.Config, maxHistory int) error {
	opts := client.StartWorkflowOptions{ID: workflows.PoolWorkflowID, TaskQueue: workflows.TaskQueue, StaticSummary: workflows.PoolSummary(cfg)}
	in := workflows.PoolInput{Config: cfg, MaxHistory: maxHistory}
	if _, err := c.SignalWithStartWorkflow(ctx, workflows.PoolWorkflowID, workflows.SignalPoolConfigure, cfg, opts, workflows.CapacityPoolName, in); err != nil {
		return fmt.Errorf("start the capacity pool: %w", err)
	}
	return nil
}
