package controlplane

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"refuel/workflows/capacitypool"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/capacity"
	"refuel/pkg/cloud/joined"
	"refuel/pkg/cloud/local"
	"refuel/pkg/pool"
	"refuel/workflows"
)

// startBase returns the base group's provider. The machines the pools
// file lists or counts run as a local cloud of their own (listed), named
// for the group's provider: each machine's instances are node-agent
// processes, as on any other cloud of this control plane. With base.join
// the machines that joined are base machines too, found through their
// BaseNode workflows.
func startBase(c pool.Config, launcher local.LauncherConfig, tc client.Client) (base capacity.Provider, listed *local.Cloud, err error) {
	if len(c.Base.Inventory()) > 0 {
		if listed, err = startListed(c, launcher); err != nil {
			return nil, nil, err
		}
	}
	if !c.Base.Join {
		return listed, listed, nil
	}
	joins := joined.New(c.Base.Provider, joinedDirectory{tc})
	if listed == nil {
		return joins, nil, nil
	}
	var names []string
	for _, n := range c.Base.Inventory() {
		names = append(names, n.Name)
	}
	return &joined.Beside{Cloud: joins, Listed: listed, Names: names}, listed, nil
}

// joinedDirectory finds joined machines through their BaseNode workflows.
type joinedDirectory struct{ c client.Client }

func (d joinedDirectory) Machine(ctx context.Context, name string) (joined.Machine, error) {
	v, err := d.c.QueryWorkflow(ctx, capacitypool.BaseNodeID(name), "", workflows.QueryStatus)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return joined.Machine{}, &joined.NotJoinedError{Name: name}
	}
	if err != nil {
		return joined.Machine{}, err
	}
	var st capacitypool.BaseNodeStatus
	if err := v.Get(&st); err != nil {
		return joined.Machine{}, err
	}
	present := st.State == admission.NodeReady || st.State == admission.NodeDraining
	return joined.Machine{Name: name, TaskQueue: st.TaskQueue, Present: present}, nil
}

// joinChecker is the VerifyJoin activity's: the token of the pools
// file's base.token_file, or none (every join refused) without base.join.
func joinChecker(c *pool.Config) (*activities.Joins, error) {
	if c == nil || !c.Base.Join {
		return &activities.Joins{}, nil
	}
	tok, err := pool.ReadToken(c.Base.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("pools file base.token_file: %w", err)
	}
	return &activities.Joins{Token: tok, HeartbeatTimeout: c.Base.HeartbeatTimeoutOrDefault()}, nil
}

func startListed(c pool.Config, launcher local.LauncherConfig) (*local.Cloud, error) {
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
	opts := client.StartWorkflowOptions{ID: workflows.PoolWorkflowID, TaskQueue: workflows.TaskQueue, StaticSummary: capacitypool.PoolSummary(cfg)}
	in := capacitypool.PoolInput{Config: cfg, MaxHistory: maxHistory}
	if _, err := c.SignalWithStartWorkflow(ctx, workflows.PoolWorkflowID, workflows.SignalPoolConfigure, cfg, opts, workflows.CapacityPoolName, in); err != nil {
		return fmt.Errorf("start the capacity pool: %w", err)
	}
	return nil
}
