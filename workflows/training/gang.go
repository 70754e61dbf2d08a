package training

import "refuel/workflows/workload"

// A run whose spec asks for several nodes (resources.nodes) trains on a
// gang: its Lease is rank 0 and its Peers the ranks after it, all held
// together. The gang is acquired whole or not at all, trains as one (each
// rank's trainer told its rank and where rank 0 listens), and when the
// market takes one node only that node is replaced: every rank stops at
// a checkpoint, the lost node's lease goes back, a replacement is
// acquired (in the same zone first) and the gang trains on from the
// latest checkpoint. A replacement that cannot be had gives the whole
// gang back, and the run acquires a gang again as a one-node run would.
//
// On a market with a clock of its own (gangClockVersion,
// clocked.go) a gang follows it as `starter sim --nodes N`
// replays it: the policy decides at each tick on the counts of its nodes
// in stock (an elastic gang on the width to hold), and a node the market
// takes is the whole gang preempted. Elsewhere gangs
// decide in wall time. A gang of deadline tier decides as one node does,
// for all its nodes at once
// (gangSpotVersion, wallclock.go): it waits for spot while
// refuel says its slack allows, and on on-demand it acquires a whole spot
// gang while it trains, then changes over at a checkpoint. An elastic
// gang trains on fewer nodes for a while (elastic.go).

// NodeStatus is one node of a gang as status shows it.
type NodeStatus struct {
	Rank     int                   `json:"rank"`
	Instance *workload.InstanceRef `json:"instance"`
}

// nodeStatus is the gang as status shows it; nil for a run of one node.
func (r *run) nodeStatus() []NodeStatus {
	if r.Nodes() < 2 {
		return nil
	}
	out := []NodeStatus{}
	for rank, l := range r.Gang() {
		out = append(out, NodeStatus{Rank: rank, Instance: l.Ref()})
	}
	return out
}
