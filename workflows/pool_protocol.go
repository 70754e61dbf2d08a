package workflows

import (
	"refuel/pkg/capacity"
)

// The capacity pool's protocol. Runs and services talk to the pool
// workflow, and it to them, by signals: a workflow cannot wait on another
// workflow's update, and a signal to a pool that is not running fails at
// once, which tells a run there is no pool to ask.
const (
	CapacityPoolName = "CapacityPool"
	// PoolWorkflowID is the one pool workflow of a namespace.
	PoolWorkflowID = "refuel-capacity-pool"

	// To the pool.
	SignalPoolConfigure = "configure"        // pool.Config: the pools file, at start and on every worker start
	SignalPoolRequest   = "request-capacity" // admission.Request: queue for one instance, or a gang (resources.nodes)
	SignalPoolBind      = "bind-capacity"    // PoolBind: which offering an allocation (a gang's node) acquired
	SignalPoolRelease   = "release-capacity" // PoolRef: the capacity is given back for good
	SignalPoolYielded   = "capacity-yielded" // PoolRef: a yielding holder stopped; queue it again
	SignalPoolPriority  = "queue-priority"   // PoolPriority: a request's priority changed
	SignalPoolPause     = "queue-pause"      // PoolRef: hold a queued request
	SignalPoolResume    = "queue-resume"     // PoolRef: let a held request be admitted again

	// From the pool, to a request's owner.
	SignalCapacityGranted = "capacity-granted" // admission.Allocation: for a gang, every node's in nodes
	SignalYield           = "yield"            // YieldRequest: checkpoint, give the capacity back and requeue
)

// PoolRef names a request or allocation.
type PoolRef struct {
	ID string `json:"id"`
}

// PoolBind says which offering an allocation's instance was acquired on.
type PoolBind struct {
	ID       string            `json:"id"`
	Offering capacity.Offering `json:"offering"`
	// Rank is the gang's node that acquired it; 0 for a one-node
	// request. A burst gang binds every node within the pools file's
	// gang_timeout of its grant, or gives the grant back.
	Rank int `json:"rank,omitempty"`
}

// PoolPriority is a request's new priority.
type PoolPriority struct {
	ID       string `json:"id"`
	Priority int    `json:"priority"`
}

// YieldRequest asks a holder to give its capacity back.
type YieldRequest struct {
	ID string `json:"id"`
	// Reason says why, for status and logs: preempted for a higher
	// priority, or moved from burst to freed base capacity.
	Reason string `json:"reason"`
	// For is the request the capacity goes to, when one is waiting.
	For string `json:"for,omitempty"`
}
