package workload

import (
	"strconv"
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/internal/telemetry"
	"refuel/pkg/capacity"
	"refuel/workflows"
)

// replace goes on with a gang that lost some of its nodes: it acquires a
// replacement for each, in the zone of the nodes kept first, and the gang
// trains on from the latest checkpoint. A replacement that cannot be had
// gives the whole gang back, and the workload acquires a gang again,
// holding nothing while it waits; an elastic gang waits for its
// replacements only so long, then trains on the nodes it kept (shrink).
// A node lost without notice is a fault that max_restarts caps; a gang
// that lost every node restarts as a run of one does.
func (rc recovery) replace(ctx workflow.Context, l Loss, gang []*Lease) error {
	w := rc.w
	var kept *Lease
	var missing []int
	for rank, held := range gang {
		switch {
		case held == nil:
			missing = append(missing, rank)
		case kept == nil:
			kept = held
		}
	}
	if !l.Noticed() {
		if kept == nil {
			return rc.restart(ctx, l.Fault, l.msg)
		}
		if err := rc.CountRestart(l.Fault, l.msg); err != nil {
			rc.releaseLeft(ctx, gang, activities.ReleaseFailed)
			return err
		}
	}
	if kept == nil {
		return nil
	}
	w.Host.Enter(ctx, workflows.StateAcquiring)
	missing = rc.replaceRanks(ctx, gang, missing, kept)
	if len(missing) > 0 && rc.Shrinks(ctx) && w.NodesNow()-len(missing) >= w.Spec.Resources.MinNodeCount() {
		var err error
		if missing, err = rc.awaitReplacements(ctx, gang, missing); err != nil {
			return err
		}
		if len(missing) > 0 && w.Host.MustStop(ctx, StopBudget) == GoOn {
			rc.shrink(ctx, gang)
			return nil
		}
	}
	if len(missing) > 0 {
		// No replacement within the tier's rules: the whole gang goes
		// back, and the workload acquires a gang again.
		rc.releaseLeft(ctx, gang, activities.ReleaseCleanup)
		return nil
	}
	w.Held.Peers = gang[1:]
	w.take(ctx, gang[0])
	return nil
}

// Shrinks reports whether the gang may train on fewer nodes than it asks
// for: an elastic gang (resources.min_nodes below resources.nodes) on a
// market that lets it (market.shrinks; elasticGangVersion).
func (rc recovery) Shrinks(ctx workflow.Context) bool {
	w := rc.w
	if !w.Spec.Resources.Elastic() || !w.Market.Shrinks() {
		return false
	}
	return workflow.GetVersion(ctx, elasticGangVersion, workflow.DefaultVersion, 1) >= 1
}

// replaceRanks acquires a replacement for each of the gang's missing
// ranks in turn, beside kept, until one cannot be had; it returns the
// ranks still missing from that one on. The recovery is the
// replacement's: the drill and status follow it.
func (rc recovery) replaceRanks(ctx workflow.Context, gang []*Lease, missing []int, kept *Lease) []int {
	w := rc.w
	for i, rank := range missing {
		ask := w.AskFor(capacity.Order(w.Held.Offerings, w.Spec.Tier, ""))
		lease, err := w.Held.Leases.Acquire(ctx, w.Owner(), w.PeerAsk(*ask, rank, kept.Offering()))
		if err != nil {
			w.RecordFailures(ctx, err)
			return missing[i:]
		}
		lease.Teaches = true
		gang[rank] = lease
		w.Market.Acquired(ctx, w, lease, rank)
		w.Counts.NodeReplacements++
		rc.replaced(lease, lease.Since)
		workflow.GetMetricsHandler(ctx).Counter(telemetry.NodeReplacementsTotal).Inc(1)
	}
	return nil
}

// awaitReplacements holds an elastic gang's kept nodes while it tries
// again for the missing ranks, until shrink_after since the loss. It
// returns the ranks still missing; none when the gang is whole again.
// A pause or a yield ends the wait at once (the caller gives the gang
// back); the gang is the workload's meanwhile, so a cancel releases it.
func (rc recovery) awaitReplacements(ctx workflow.Context, gang []*Lease, missing []int) ([]int, error) {
	w := rc.w
	bound := w.Spec.Resources.ShrinkBound()
	deadline := w.Held.Recovery.Since.Add(bound)
	rc.hold(gang)
	for len(missing) > 0 {
		left := deadline.Sub(workflow.Now(ctx))
		if left <= 0 || w.Host.MustStop(ctx, StopBudget) != GoOn {
			break
		}
		wait := min(left, max(time.Second, bound/4))
		summary := "wait " + wait.Round(time.Second).String() + " for " + strconv.Itoa(len(missing)) +
			" lost node(s) to be replaced before training on " + strconv.Itoa(w.NodesNow()-len(missing))
		if _, err := WaitFor(ctx, wait, summary, func() bool { return w.Host.MustStop(ctx, StopBudget) != GoOn }); err != nil {
			return missing, err // the workload ends and releases what it holds
		}
		if w.Host.MustStop(ctx, StopBudget) != GoOn {
			break
		}
		missing = rc.replaceRanks(ctx, gang, missing, w.Held.Lease)
	}
	w.Held.Lease, w.Held.Peers = nil, nil // the caller settles the gang
	return missing, nil
}

// shrink makes the nodes left of the gang the whole of it, renumbered
// from rank 0: it trains on from the latest checkpoint without the
// missing ones. The recovery is the gang's on the nodes it kept, from
// now.
func (rc recovery) shrink(ctx workflow.Context, gang []*Lease) {
	w := rc.w
	from := w.NodesNow()
	rc.hold(gang)
	lead := w.Held.Lease
	w.Held.Lease = nil
	w.Held.Width = len(w.Held.Peers) + 1
	w.take(ctx, lead)
	rc.replaced(lead, workflow.Now(ctx))
	w.Resized(ctx, from)
}

// releaseLeft gives back what is left of a gang being taken apart.
func (rc recovery) releaseLeft(ctx workflow.Context, gang []*Lease, reason activities.ReleaseReason) {
	w := rc.w
	for _, held := range gang {
		if held != nil {
			w.Held.Leases.Release(ctx, held, reason)
		}
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, workflows.AttrCostUSD.ValueSet(w.Held.Ledger.CostUSD(workflow.Now(ctx))), workflows.AttrMarket.ValueUnset())
	w.Host.ShowDetails(ctx)
}

// hold makes the gang's leases present, in rank order, the workload's:
// those a cancel or a failure releases.
func (rc recovery) hold(gang []*Lease) {
	w := rc.w
	var held []*Lease
	for _, l := range gang {
		if l != nil {
			held = append(held, l)
		}
	}
	w.Held.Lease, w.Held.Peers = held[0], held[1:]
}
