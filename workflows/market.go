package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/capacity"
)

// market is how a workload finds its capacity: when it may acquire,
// which offerings to try next, what to do when none can be had, and
// whether to move while an attempt runs. Every question that depends on
// how a workload finds capacity is a method here: no code outside a
// market asks which one a workload has. A workload chooses its market
// when it first starts and keeps it:
//   - wallClock: on its own, in wall time: the tier's order, waiting with
//     backoff while none can be had (market_wallclock.go); a training run
//     adds its deadline's choice between spot and on-demand and an
//     elastic gang's growth (runClock, training_wallclock.go);
//   - poolGrant: what the capacity pool grants (market_pool.go);
//   - clockedMarket: deciding with its policy at every tick of a market
//     that keeps a clock of its own (training_clocked.go).
type market interface {
	// admit returns once the workload may acquire.
	admit(ctx workflow.Context, w *workload) error
	// next is what to acquire now, or nil when the workload should go
	// round again first (it was paused or asked to yield). It may wait:
	// for a market's next tick, say.
	next(ctx workflow.Context, w *workload) (*ask, error)
	// acquired is told each lease the workload got: rank 0's, or a
	// gang's other ranks'.
	acquired(ctx workflow.Context, w *workload, l *Lease, rank int)
	// failed decides what follows a try that got nothing: try again
	// (after waiting, which backoff paces), or go round (again false),
	// or end the workload (an error).
	failed(ctx workflow.Context, w *workload, a ask, details []activities.FailureDetail, backoff *time.Duration) (again bool, err error)
	// watch waits beside the attempt until it ends, or until the market
	// moves the workload.
	watch(ctx workflow.Context, w *workload, a *attempt) move

	// ended is how the market itself ended an attempt it stopped (e's
	// cause), or nil if it did not.
	ended(e attemptEnd, lost []nodeEnd, gang bool) *marketEnd
	// widthToAcquire is how many nodes the workload's gang acquires now.
	widthToAcquire(w *workload) int
	// shrinks reports whether an elastic gang trains on the nodes it kept
	// when a lost node's replacement takes too long, and grows back later
	// (recovery_gang.go); elsewhere a gang is given back whole.
	shrinks() bool
	// defersRelease reports whether a lost instance's release may ride
	// with the acquisition of its replacement (Replace): only where no
	// one else counts what the workload holds.
	defersRelease() bool
	// continuesAsNew reports whether the workload may continue as new
	// while an attempt runs: not where the market keeps its account.
	continuesAsNew() bool
	// status is the market's part of the workload's status, and why the
	// latest decision, in a line a person reads; nil and "" when it has
	// made none.
	status() (*MarketStatus, string)
}

// marketEnd is how a market ended an attempt it stopped.
type marketEnd struct {
	ending ending
	// first: the verdict heeds it before the ranks' own completion and
	// failures.
	first bool
	// silent is a rank lost without a word when the market took the
	// attempt: a fault besides.
	silent *nodeEnd
}

// ask is what a market wants acquired next.
type ask struct {
	leaseAsk
	// spotOnly is set when a workload that may use on-demand tries spot
	// alone, waiting for it.
	spotOnly bool
}

// move is how a market ends an attempt: with the attempt's end, with an
// instance acquired to change over to, with nodes a gang grows by, or
// with an error that ends the workload.
type move struct {
	end  attemptEnd
	spot *Lease
	err  error
	// grow is set when an elastic gang got nodes it was short of (in
	// workload.growing): it stops at a checkpoint to train on with them.
	grow bool
}

// askFor is an acquisition of offerings for the workload, tagged with
// its team on the burst layer.
func (w *workload) askFor(offerings []capacity.Offering) *ask {
	return &ask{leaseAsk: leaseAsk{offerings: offerings, team: w.spec.Team, maxPrice: w.spec.Resources.MaxPricePerHour}}
}
