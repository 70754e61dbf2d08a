package training

import (
	"strconv"
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/pkg/capacity"
	"refuel/workflows/workload"
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

// short reports whether an elastic gang trains on fewer nodes than it
// asks for and should try for the others meanwhile.
func (c runClock) short(ctx workflow.Context) bool {
	r := c.r
	return r.Nodes() > 1 && r.NodesNow() < r.Nodes() && r.Recover().Shrinks(ctx)
}

// awaitNodes waits while a short gang trains, trying for its missing
// nodes every shrink_after. It returns true once it got one or more (in
// r.growing): the gang then stops at a checkpoint and trains on with
// them. It returns false once the attempt ends by itself or is stopped.
// A run whose history grew long continues as new instead (the error).
func (c runClock) awaitNodes(ctx workflow.Context, a *workload.Attempt) (bool, error) {
	r := c.r
	every := r.spec.Resources.ShrinkBound()
	return c.pollWhileTraining(ctx, a, func() (time.Duration, string) {
		return every, "try for the gang's " + strconv.Itoa(r.Nodes()-r.NodesNow()) + " missing node(s)"
	}, func() bool { return c.tryNodes(ctx) })
}

// tryNodes acquires what it can of the gang's missing ranks, beside rank
// 0, into r.growing.
func (c runClock) tryNodes(ctx workflow.Context) bool {
	r := c.r
	ask := r.AskFor(capacity.Order(r.Offerings, r.spec.Tier, ""))
	for rank := r.NodesNow(); rank < r.Nodes(); rank++ {
		lease, err := r.Leases.Acquire(ctx, r.Owner(), r.PeerAsk(*ask, rank, r.Lease.Offering()))
		if err != nil {
			if ctx.Err() == nil {
				r.RecordFailures(ctx, err)
			}
			break
		}
		r.Growing = append(r.Growing, lease)
	}
	return len(r.Growing) > 0
}

// grow adds the nodes acquired meanwhile to a gang stopped at a
// checkpoint for them.
func (r *run) grow(ctx workflow.Context, grown []*workload.Lease) {
	from := r.NodesNow()
	for _, l := range grown {
		l.Teaches = true
		r.Peers = append(r.Peers, l)
	}
	r.Width = len(r.Peers) + 1
	r.Resized(ctx, from)
}

// grew takes in the nodes an elastic gang got while short, when its
// attempt stopped at a checkpoint for them and nothing else ended it;
// otherwise they go back and the attempt's end is settled as it came.
func (r *run) grew(ctx workflow.Context, v workload.Verdict) bool {
	e := v.End
	grown := r.Growing
	r.Growing = nil
	if len(grown) == 0 {
		return false
	}
	if e.Cause == workload.GrownByMarket && len(v.Lost) == 0 && !v.Failed && workload.StoppedCleanly(e.Res, e.Err) && r.MustStop(ctx) == workload.GoOn {
		r.grow(ctx, grown)
		return true
	}
	r.Growing = grown
	r.ReleaseGrowing(ctx)
	return false
}
