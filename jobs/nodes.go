package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"refuel/workflows/capacitypool"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"refuel/workflows"
)

// Node is a machine that joined the base group, as `starter nodes`
// shows it.
type Node struct {
	Name         string    `json:"name"`
	GPUs         int       `json:"gpus"`
	State        string    `json:"state"` // ready, draining or lost
	Runs         []string  `json:"runs"`
	LastSeen     time.Time `json:"last_seen"`
	InstanceType string    `json:"instance_type"`
	Zone         string    `json:"zone,omitempty"`
	PricePerHour float64   `json:"price_per_hour,omitempty"`
	Joins        int       `json:"joins"`
}

// Nodes lists the machines that joined, by name, with the runs the pool
// placed on each and when each was last heard (its presence's last
// heartbeat; for a lost one, when it went silent).
func Nodes(ctx context.Context, c client.Client) ([]Node, error) {
	query := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", workflows.BaseNodeName)
	var ids []string
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list base machines: %w", err)
		}
		for _, e := range resp.Executions {
			ids = append(ids, e.Execution.WorkflowId)
		}
		if token = resp.NextPageToken; len(token) == 0 {
			break
		}
	}
	pool, perr := PoolStatus(ctx, c)
	out := []Node{}
	for _, id := range ids {
		st, seen, err := nodeStatus(ctx, c, id)
		if err != nil {
			return nil, err
		}
		if st.Session == "" {
			continue // a join being checked, or refused
		}
		n := Node{Name: st.Node.Name, GPUs: st.Node.GPUs, State: string(st.State), Runs: []string{}, LastSeen: seen,
			InstanceType: st.Node.InstanceType, Zone: st.Node.Zone, PricePerHour: st.Node.PricePerHour, Joins: st.Joins}
		if perr == nil {
			n.Runs = capacitypool.RunsOn(pool, n.Name)
		}
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// nodeStatus is a BaseNode workflow's status and when its machine was
// last heard.
func nodeStatus(ctx context.Context, c client.Client, id string) (capacitypool.BaseNodeStatus, time.Time, error) {
	var st capacitypool.BaseNodeStatus
	v, err := c.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
	if err != nil {
		return st, time.Time{}, fmt.Errorf("base machine %s: %w", id, err)
	}
	if err := v.Get(&st); err != nil {
		return st, time.Time{}, err
	}
	seen := st.LastSeen
	if d, err := c.DescribeWorkflowExecution(ctx, id, ""); err == nil {
		for _, a := range d.PendingActivities {
			if t := a.GetLastHeartbeatTime(); t != nil && t.AsTime().After(seen) {
				seen = t.AsTime()
			}
		}
	}
	if seen.IsZero() {
		seen = st.JoinedAt
	}
	return st, seen, nil
}

// ErrNoNode says no machine of the name has joined.
var ErrNoNode = errors.New("no machine of this name has joined the base group")

// Drain asks a joined machine's runs to move off it and the pool to
// place nothing new there; Undrain makes it take runs again.
func Drain(ctx context.Context, c client.Client, name string) error {
	return signalNode(ctx, c, name, workflows.SignalDrain)
}

// Undrain makes a drained machine ready again.
func Undrain(ctx context.Context, c client.Client, name string) error {
	return signalNode(ctx, c, name, workflows.SignalUndrain)
}

func signalNode(ctx context.Context, c client.Client, name, signal string) error {
	w, err := Describe(ctx, c, capacitypool.BaseNodeID(name))
	if errors.Is(err, ErrNoWorkflow) || err == nil && !w.Running {
		return fmt.Errorf("%s: %w (starter nodes lists those that have)", name, ErrNoNode)
	}
	if err != nil {
		return err
	}
	return c.SignalWorkflow(ctx, capacitypool.BaseNodeID(name), "", signal, nil)
}

// WaitEmpty returns once the pool holds nothing on the machine, calling
// each with what still runs there every time it looks.
func WaitEmpty(ctx context.Context, c client.Client, name string, every time.Duration, each func(runs []string)) error {
	for {
		st, err := PoolStatus(ctx, c)
		if err != nil {
			return err
		}
		runs := capacitypool.RunsOn(st, name)
		if each != nil {
			each(runs)
		}
		if len(runs) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s still runs %v: %w", name, runs, ctx.Err())
		case <-time.After(every):
		}
	}
}
