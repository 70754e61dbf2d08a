package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/capacity"
)

// market is how a run finds its capacity: when it may acquire, which
// offerings to try next, what to do when none can be had, and whether
// to move while it trains. A run chooses one when it first starts (see
// open) and keeps it:
//   - wallClock: on its own, in wall time: the tier's order, a deadline
//     run waiting for spot and going back to it (training_wallclock.go);
//   - poolGrant: what the capacity pool grants (training_pool.go);
//   - clockedMarket: deciding with its policy at every tick of a market
//     that keeps a clock of its own (training_clocked.go).
type market interface {
	// admit returns once the run may acquire.
	admit(ctx workflow.Context, r *run) error
	// next is what to acquire now, or nil when the run should go round
	// again first (it was paused or asked to yield). It may wait: for a
	// market's next tick, say.
	next(ctx workflow.Context, r *run) (*ask, error)
	// acquired is told the lease the run got.
	acquired(ctx workflow.Context, r *run, l *Lease)
	// failed decides what follows a try that got nothing: try again
	// (after waiting, which backoff paces), or go round (again false),
	// or end the run (an error).
	failed(ctx workflow.Context, r *run, a ask, details []activities.FailureDetail, backoff *time.Duration) (again bool, err error)
	// watch waits beside the training attempt until it ends, or until
	// the market moves the run.
	watch(ctx workflow.Context, r *run) move

	// ended is how the market itself ended an attempt it stopped (e's
	// cause), or nil if it did not.
	ended(e attemptEnd, lost []nodeEnd, gang bool) *marketEnd
	// widthToAcquire is how many nodes the run's gang acquires now.
	widthToAcquire(r *run) int
	// shrinks reports whether an elastic gang trains on the nodes it kept
	// when a lost node's replacement takes too long, and grows back later
	// (training_elastic.go); elsewhere a gang is given back whole.
	shrinks() bool
	// defersRelease reports whether a lost instance's release may ride
	// with the acquisition of its replacement (Replace): only where no
	// one else counts what the run holds.
	defersRelease() bool
	// continuesAsNew reports whether the run may continue as new while
	// an attempt trains: not where the market keeps the run's account.
	continuesAsNew() bool
	// status is the market's part of the run's status, and why the
	// latest decision, in a line a person reads; nil and "" when it has
	// made none.
	status(r *run) (*MarketStatus, string)
}

// marketEnd is how a market ended an attempt it stopped.
type marketEnd struct {
	ending ending
	// first: settle heeds it before the ranks' own completion and
	// failures.
	first bool
	// silent is a rank lost without a word when the market took the
	// attempt: a fault besides.
	silent *nodeEnd
}

// ask is what a market wants acquired next.
type ask struct {
	leaseAsk
	// spotOnly is set when a run that may use on-demand tries spot
	// alone, waiting for it.
	spotOnly bool
}

// move is how a market ends a training attempt: with the attempt's end,
// with an instance acquired to change over to, with nodes a gang grows
// by, or with an error that ends the run.
type move struct {
	end  attemptEnd
	spot *Lease
	err  error
	// grow is set when an elastic gang got nodes it was short of (in
	// run.growing): it stops at a checkpoint to train on with them.
	grow bool
}

// askFor is an acquisition of offerings for the run, tagged with its team
// on the burst layer.
func (r *run) askFor(offerings []capacity.Offering) *ask {
	return &ask{leaseAsk: leaseAsk{offerings: offerings, team: r.spec.Team, maxPrice: r.spec.Resources.MaxPricePerHour}}
}
