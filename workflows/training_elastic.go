package workflows

import (
	"strconv"
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/internal/telemetry"
	"refuel/pkg/capacity"
)

// An elastic gang (resources.min_nodes below resources.nodes) does not
// wait for a lost node's replacement longer than resources.shrink_after:
// past it, the gang trains on from its latest checkpoint on the nodes it
// still holds, renumbered from rank 0, as long as they are at least
// min_nodes (RunState.Width is how many). While it is short of nodes it
// tries for them again every shrink_after as it trains, and when it gets
// any it stops at a checkpoint and trains on with them: it grows back.
// Every trainer learns the gang's width for its attempt from
// REFUEL_NUM_NODES. The ledger books each shrink and growth
// (cost.Ledger.Resizes).
//
// A gang shrinks after a loss on the wall clock only: a gang granted by
// the pool is given back whole, as is one on a market's clock, whose
// policy chooses the width it acquires at each tick instead
// (clockedMarket.holdWidth). The change: elasticGangVersion (versions.go).

// width is how many nodes the gang trains on now: all it asks for but
// while an elastic gang is short.
func (r *run) width() int {
	if r.Width > 0 && r.Width < r.nodes() {
		return r.Width
	}
	return r.nodes()
}

// elastic reports whether the run's gang may train on fewer nodes than
// it asks for.
func (r *run) elastic(ctx workflow.Context) bool {
	if !r.spec.Resources.Elastic() {
		return false
	}
	if !r.market.shrinks() {
		return false
	}
	return workflow.GetVersion(ctx, elasticGangVersion, workflow.DefaultVersion, 1) >= 1
}

// replaceRanks acquires a replacement for each of the gang's missing
// ranks in turn, beside kept, until one cannot be had; it returns the
// ranks still missing from that one on.
func (r *run) replaceRanks(ctx workflow.Context, gang []*Lease, missing []int, kept *Lease) []int {
	for i, rank := range missing {
		ask := r.askFor(capacity.Order(r.Offerings, r.spec.Tier, ""))
		lease, err := r.Leases.acquire(ctx, r.owner(), r.peerAsk(*ask, rank, kept.Offering()))
		if err != nil {
			r.recordFailures(ctx, err)
			return missing[i:]
		}
		lease.Teaches = true
		gang[rank] = lease
		r.bindRank(ctx, rank, lease)
		r.NodeReplacements++
		r.LastRecovery = &RecoveryInfo{ReplacementAt: lease.Since, InstanceID: lease.Instance.ID}
		workflow.GetMetricsHandler(ctx).Counter(telemetry.NodeReplacementsTotal).Inc(1)
	}
	return nil
}

// awaitReplacements holds an elastic gang's kept nodes while it tries
// again for the missing ranks, until shrink_after since the loss. It
// returns the ranks still missing; none when the gang is whole again.
// A pause or a yield ends the wait at once (the caller gives the gang
// back); the gang is the run's meanwhile, so a cancel releases it.
func (r *run) awaitReplacements(ctx workflow.Context, gang []*Lease, missing []int) ([]int, error) {
	bound := r.spec.Resources.ShrinkBound()
	deadline := r.Recovery.Since.Add(bound)
	r.hold(gang)
	for len(missing) > 0 {
		left := deadline.Sub(workflow.Now(ctx))
		if left <= 0 || r.mustStop(ctx, stopBudget) != goOn {
			break
		}
		wait := min(left, max(time.Second, bound/4))
		summary := "wait " + wait.Round(time.Second).String() + " for " + strconv.Itoa(len(missing)) +
			" lost node(s) to be replaced before training on " + strconv.Itoa(r.width()-len(missing))
		if _, err := waitFor(ctx, wait, summary, func() bool { return r.mustStop(ctx, stopBudget) != goOn }); err != nil {
			return missing, err // the run ends and releases what it holds
		}
		if r.mustStop(ctx, stopBudget) != goOn {
			break
		}
		missing = r.replaceRanks(ctx, gang, missing, r.Lease)
	}
	r.Lease, r.Peers = nil, nil // the caller settles the gang
	return missing, nil
}

// hold makes the gang's leases present, in rank order, the run's: those
// a cancel or a failure releases.
func (r *run) hold(gang []*Lease) {
	var held []*Lease
	for _, l := range gang {
		if l != nil {
			held = append(held, l)
		}
	}
	r.Lease, r.Peers = held[0], held[1:]
}

// shrink makes the nodes left of the gang the whole of it, renumbered
// from rank 0: it trains on from the latest checkpoint without the
// missing ones.
func (r *run) shrink(ctx workflow.Context, gang []*Lease) {
	from := r.width()
	r.hold(gang)
	lead := r.Lease
	r.Lease = nil
	r.Width = len(r.Peers) + 1
	r.use(ctx, lead)
	if r.Recovery != nil {
		// The recovery is the gang's on the nodes it kept, from now.
		r.LastRecovery = &RecoveryInfo{ReplacementAt: workflow.Now(ctx), InstanceID: lead.Instance.ID}
	}
	r.resized(ctx, from)
}

// resized books a change of the gang's width, from the checkpoint it
// resumes from.
func (r *run) resized(ctx workflow.Context, from int) {
	step := int64(0)
	if ck := r.LastCheckpoint; ck != nil {
		step = ck.Step
	}
	now := workflow.Now(ctx)
	r.Ledger.AddResize(now, step, from, r.width())
	workflow.GetLogger(ctx).Info("the gang changed width", "from", from, "to", r.width(), "step", step)
	r.showDetails(ctx)
}

// short reports whether an elastic gang trains on fewer nodes than it
// asks for and should try for the others meanwhile.
func (r *run) short(ctx workflow.Context) bool {
	return r.nodes() > 1 && r.width() < r.nodes() && r.elastic(ctx)
}

// awaitNodes waits while a short gang trains, trying for its missing
// nodes every shrink_after. It returns true once it got one or more (in
// r.growing): the gang then stops at a checkpoint and trains on with
// them. It returns false once the attempt ends by itself or is stopped.
// A run whose history grew long continues as new instead (the error).
func (r *run) awaitNodes(ctx workflow.Context) (bool, error) {
	every := r.spec.Resources.ShrinkBound()
	return r.pollWhileTraining(ctx, func() (time.Duration, string) {
		return every, "try for the gang's " + strconv.Itoa(r.nodes()-r.width()) + " missing node(s)"
	}, func() bool { return r.tryNodes(ctx) })
}

// tryNodes acquires what it can of the gang's missing ranks, beside rank
// 0, into r.growing.
func (r *run) tryNodes(ctx workflow.Context) bool {
	ask := r.askFor(capacity.Order(r.Offerings, r.spec.Tier, ""))
	for rank := r.width(); rank < r.nodes(); rank++ {
		lease, err := r.Leases.acquire(ctx, r.owner(), r.peerAsk(*ask, rank, r.Lease.Offering()))
		if err != nil {
			if ctx.Err() == nil {
				r.recordFailures(ctx, err)
			}
			break
		}
		r.growing = append(r.growing, lease)
	}
	return len(r.growing) > 0
}

// grow adds the nodes acquired meanwhile to a gang stopped at a
// checkpoint for them.
func (r *run) grow(ctx workflow.Context, grown []*Lease) {
	from := r.width()
	for _, l := range grown {
		l.Teaches = true
		r.Peers = append(r.Peers, l)
	}
	r.Width = len(r.Peers) + 1
	r.resized(ctx, from)
}

// releaseGrowing gives back nodes acquired to grow a gang that is not
// going to train with them.
func (r *run) releaseGrowing(ctx workflow.Context) {
	for _, l := range r.growing {
		r.Leases.release(ctx, l, activities.ReleaseCleanup)
	}
	r.growing = nil
}
