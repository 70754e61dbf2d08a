package workflows

import (
	"hash/fnv"
	"strconv"
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/capacity"
)

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
// training_clocked.go) a gang follows it as `starter sim --nodes N`
// replays it: the policy decides at each tick on the counts of its nodes
// in stock (an elastic gang on the width to hold), and a node the market
// takes is the whole gang preempted. Elsewhere gangs
// decide in wall time. A gang of deadline tier decides as one node does,
// for all its nodes at once
// (gangSpotVersion, training_wallclock.go): it waits for spot while
// refuel says its slack allows, and on on-demand it acquires a whole spot
// gang while it trains, then changes over at a checkpoint. An elastic
// gang trains on fewer nodes for a while (training_elastic.go).

// nodes is how many instances the run trains on at once.
func (r *run) nodes() int { return r.spec.Resources.NodeCount() }

// gang is the run's leases in rank order.
func (r *run) gang() []*Lease {
	if r.Lease == nil {
		return nil
	}
	return append([]*Lease{r.Lease}, r.Peers...)
}

// acquirePeers acquires the gang's ranks after rank 0 (just acquired on
// ask), each like it: in its zone unless the spec allows spreading, and
// on its market. A rank that cannot be had gives the whole gang back:
// the run holds nothing while it waits. It returns what failed.
func (r *run) acquirePeers(ctx workflow.Context, ask ask) []activities.FailureDetail {
	if from := r.width(); r.market.widthToAcquire(r) != from {
		// A short gang given back whole is acquired whole again, unless
		// the market chose its width (clockedMarket.holdWidth).
		r.Width = 0
		r.resized(ctx, from)
	}
	for rank := len(r.Peers) + 1; rank < r.width(); rank++ {
		lease, err := r.Leases.acquire(ctx, r.owner(), r.peerAsk(ask, rank, r.Lease.Offering()))
		if err != nil {
			details := r.recordFailures(ctx, err)
			r.release(ctx, activities.ReleaseCleanup)
			return details
		}
		lease.Teaches = true
		r.Peers = append(r.Peers, lease)
		r.bindRank(ctx, rank, lease)
	}
	r.showDetails(ctx)
	return nil
}

// peerAsk is what rank acquires beside rank 0, which is on first: a
// granted base machine of its own, or the run's offerings on first's
// market, in first's zone unless the spec allows spreading.
func (r *run) peerAsk(ask ask, rank int, first capacity.Offering) leaseAsk {
	a := ask.leaseAsk
	if p := r.Pool; p != nil && p.Grant != nil && p.Grant.Layer == admission.BaseLayer && rank < len(p.Grant.Nodes) {
		n := p.Grant.Nodes[rank]
		a.offerings, a.node = n.Offerings, n.Node
		return a
	}
	var like []capacity.Offering
	for _, o := range a.offerings {
		if o.Market == first.Market && (!r.spec.Resources.OneZone() || o.Zone == first.Zone) {
			like = append(like, o)
		}
	}
	a.offerings = capacity.First(like, first) // its type and zone first
	return a
}

// bindRank tells the pool which burst offering a rank acquired.
func (r *run) bindRank(ctx workflow.Context, rank int, l *Lease) {
	if p := r.Pool; p != nil && p.Grant != nil && p.Grant.Layer == admission.BurstLayer {
		r.tellPool(ctx, SignalPoolBind, PoolBind{ID: r.id, Offering: l.Offering(), Rank: rank})
	}
}

// startGang starts every rank's trainer, all under one attempt number
// (which the agents and the trainer contract see: a new one for each
// start of the gang, the carried one when a run that continued as new
// attaches to the trainers still running), and a watcher that stops the
// gang when any rank ends first.
func (r *run) startGang(ctx workflow.Context, in activities.TrainingInput, started time.Time) {
	in.Gang = activities.Gang{Rank: 0, Nodes: r.width(), MasterAddr: r.Lease.Instance.Address, MasterPort: masterPort(r.identity, in.Attempt)}
	r.launchAttempt(ctx, in, started)
	r.peers = nil
	for i, l := range r.Peers {
		pin := in
		pin.InstanceID, pin.Gang.Rank = l.Instance.ID, i+1
		r.peers = append(r.peers, r.launchOn(ctx, l, pin, started))
	}
	lead, peers := r.attempt, r.peers
	workflow.Go(ctx, func(ctx workflow.Context) {
		sel := workflow.NewSelector(ctx)
		completed := false
		ended := func(f workflow.Future) {
			var res activities.TrainingResult
			completed = f.Get(ctx, &res) == nil && res.Outcome == activities.OutcomeCompleted
		}
		sel.AddFuture(lead.result, ended)
		for _, p := range peers {
			sel.AddFuture(p.result, ended)
		}
		sel.Select(ctx)
		if completed {
			// The ranks finish the last step together: stopping the
			// others now would only race rank 0's final model.
			return
		}
		// One rank ended: the others cannot train on without it.
		lead.stop()
		for _, p := range peers {
			p.stop()
		}
	})
}

// masterPort is where rank 0 listens for the other ranks: a port of its
// own for each run and attempt, as gangs on one machine's loopback (the
// local and simulated clouds) must not meet. The embedded server never
// picks a port of this range for itself (devserver's gangPorts).
func masterPort(identity string, attempt int) int {
	h := fnv.New32a()
	h.Write([]byte(identity + "/" + strconv.Itoa(attempt)))
	return 20000 + int(h.Sum32()%10000)
}

// grew takes in the nodes an elastic gang got while short, when its
// attempt stopped at a checkpoint for them and nothing else ended it;
// otherwise they go back and the attempt's end is settled as it came.
func (r *run) grew(ctx workflow.Context, e attemptEnd, v verdict) bool {
	grown := r.growing
	r.growing = nil
	if len(grown) == 0 {
		return false
	}
	if e.cause == grownByMarket && len(v.lost) == 0 && !v.failed && stoppedCleanly(e.res, e.err) && r.mustStop(ctx) == goOn {
		r.grow(ctx, grown)
		return true
	}
	r.growing = grown
	r.releaseGrowing(ctx)
	return false
}

// replaceNodes gives back the nodes the market took, keeps the others,
// and acquires a replacement for each, in the zone of the nodes kept
// first; the gang then trains on from the latest checkpoint. A
// replacement that cannot be had gives the whole gang back: the run then
// acquires a gang again, holding nothing while it waits. A node lost
// without notice counts as a restart (max_restarts caps them). The work
// lost is every node's.
func (r *run) replaceNodes(ctx workflow.Context, first nodeEnd, lost []nodeEnd) error {
	withNotice := first.noticed()
	r.lose(ctx, lostNodes{lead: first.lease, end: first.end, atStep: r.Step, withNotice: withNotice, preemption: true})

	gang := r.gang()
	var kept *Lease
	var taken []int
	for rank, l := range gang {
		if endOf(lost, l) != nil {
			taken = append(taken, rank)
			r.Leases.release(ctx, l, activities.ReleasePreempted)
			gang[rank] = nil
			continue
		}
		if kept == nil {
			kept = l
		}
	}
	r.Lease, r.Peers = nil, nil
	if !withNotice {
		// A node lost without a word is a fault that max_restarts caps;
		// the nodes kept wait for its replacement as after a notice.
		cause, msg := lossCause(first.end.err), first.message()
		r.addFailure(ctx, string(cause), first.lease.Offering().Key(), msg)
		if kept == nil {
			return r.restart(ctx, cause, msg) // every node lost: as a run of one
		}
		if err := r.countRestart(cause, msg); err != nil {
			releaseLeft(ctx, r, gang, activities.ReleaseFailed)
			return err
		}
	}
	if kept == nil {
		return nil
	}
	r.enter(ctx, StateAcquiring)
	missing := r.replaceRanks(ctx, gang, taken, kept)
	if len(missing) > 0 && r.elastic(ctx) && r.width()-len(missing) >= r.spec.Resources.MinNodeCount() {
		// An elastic gang waits for its replacements only so long, then
		// trains on without them.
		var err error
		if missing, err = r.awaitReplacements(ctx, gang, missing); err != nil {
			return err
		}
		if len(missing) > 0 && r.mustStop(ctx, stopBudget) == goOn {
			r.shrink(ctx, gang)
			return nil
		}
	}
	if len(missing) > 0 {
		// No replacement within the tier's rules: the whole gang goes
		// back, and the run acquires a gang again.
		releaseLeft(ctx, r, gang, activities.ReleaseCleanup)
		return nil
	}
	// The recovery is the replacement's: the drill and status follow it.
	replaced := r.LastRecovery
	r.Peers = gang[1:]
	r.use(ctx, gang[0])
	r.LastRecovery = replaced
	return nil
}

// joinedMachineLost is the first of the nodes lost that ran on a machine
// that joined the base group, or nil.
func joinedMachineLost(lost []nodeEnd) *nodeEnd {
	for i := range lost {
		if onJoinedMachine(lost[i].lease) {
			return &lost[i]
		}
	}
	return nil
}

// endOf is how the lease's attempt ended, if it is among ends.
func endOf(ends []nodeEnd, l *Lease) *nodeEnd {
	for i := range ends {
		if ends[i].lease == l {
			return &ends[i]
		}
	}
	return nil
}

// releaseLeft gives back what is left of a gang being taken apart.
func releaseLeft(ctx workflow.Context, r *run, gang []*Lease, reason activities.ReleaseReason) {
	for _, l := range gang {
		if l != nil {
			r.Leases.release(ctx, l, reason)
		}
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, AttrCostUSD.ValueSet(r.Ledger.CostUSD(workflow.Now(ctx))), AttrMarket.ValueUnset())
	r.showDetails(ctx)
}

// releasePeers gives back the gang's ranks after rank 0.
func (r *run) releasePeers(ctx workflow.Context, reason activities.ReleaseReason) {
	for _, l := range r.Peers {
		r.Leases.release(ctx, l, reason)
	}
	r.Peers = nil
}

// NodeStatus is one node of a gang as status shows it.
type NodeStatus struct {
	Rank     int          `json:"rank"`
	Instance *InstanceRef `json:"instance"`
}

// nodeStatus is the gang as status shows it; nil for a run of one node.
func (r *run) nodeStatus() []NodeStatus {
	if r.nodes() < 2 {
		return nil
	}
	out := []NodeStatus{}
	for rank, l := range r.gang() {
		out = append(out, NodeStatus{Rank: rank, Instance: l.Ref()})
	}
	return out
}
