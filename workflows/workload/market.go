package workload

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/capacity"
)

// Market is how a workload finds its capacity: when it may acquire,
// which offerings to try next, what to do when none can be had, and
// whether to move while an attempt runs. Every question that depends on
// how a workload finds capacity is a method here: no code outside a
// market asks which one a workload has. A workload chooses its market
// when it first starts and keeps it:
//   - WallClock: on its own, in wall time: the tier's order, waiting with
//     backoff while none can be had (market_wallclock.go); a training run
//     adds its deadline's choice between spot and on-demand and an
//     elastic gang's growth (runClock, training/wallclock.go);
//   - PoolGrant: what the capacity pool grants (market_pool.go);
//   - clockedMarket: deciding with its policy at every tick of a market
//     that keeps a clock of its own (training/clocked.go).
type Market interface {
	// Admit returns once the workload may acquire.
	Admit(ctx workflow.Context, w *Workload) error
	// Next is what to acquire now, or nil when the workload should go
	// round again first (it was paused or asked to yield). It may wait:
	// for a market's next tick, say.
	Next(ctx workflow.Context, w *Workload) (*Ask, error)
	// Acquired is told each lease the workload got: rank 0's, or a
	// gang's other ranks'.
	Acquired(ctx workflow.Context, w *Workload, l *Lease, rank int)
	// Failed decides what follows a try that got nothing: try again
	// (after waiting, which backoff paces), or go round (again false),
	// or end the workload (an error).
	Failed(ctx workflow.Context, w *Workload, a Ask, details []activities.FailureDetail, backoff *time.Duration) (again bool, err error)
	// Watch waits beside the attempt until it ends, or until the market
	// moves the workload.
	Watch(ctx workflow.Context, w *Workload, a *Attempt) Move

	// Ended is how the market itself ended an attempt it stopped (e's
	// cause), or nil if it did not.
	Ended(e AttemptEnd, lost []NodeEnd, gang bool) *MarketEnd
	// WidthToAcquire is how many nodes the workload's gang acquires now.
	WidthToAcquire(w *Workload) int
	// Shrinks reports whether an elastic gang trains on the nodes it kept
	// when a lost node's replacement takes too long, and grows back later
	// (recovery_gang.go); elsewhere a gang is given back whole.
	Shrinks() bool
	// DefersRelease reports whether a lost instance's release may ride
	// with the acquisition of its replacement (Replace): only where no
	// one else counts what the workload holds.
	DefersRelease() bool
	// ContinuesAsNew reports whether the workload may continue as new
	// while an attempt runs: not where the market keeps its account.
	ContinuesAsNew() bool
	// Status is the market's part of the workload's status, and why the
	// latest decision, in a line a person reads; nil and "" when it has
	// made none.
	Status() (*MarketStatus, string)
}

// MarketEnd is how a market ended an attempt it stopped.
type MarketEnd struct {
	Ending Ending
	// First: the verdict heeds it before the ranks' own completion and
	// failures.
	First bool
	// Silent is a rank lost without a word when the market took the
	// attempt: a fault besides.
	Silent *NodeEnd
}

// Ask is what a market wants acquired next.
type Ask struct {
	LeaseAsk
	// SpotOnly is set when a workload that may use on-demand tries spot
	// alone, waiting for it.
	SpotOnly bool
}

// Move is how a market ends an attempt: with the attempt's end, with an
// instance acquired to change over to, with nodes a gang grows by, or
// with an error that ends the workload.
type Move struct {
	End  AttemptEnd
	Spot *Lease
	Err  error
	// Grow is set when an elastic gang got nodes it was short of (in
	// workload.growing): it stops at a checkpoint to train on with them.
	Grow bool
}

// AskFor is an acquisition of offerings for the workload, tagged with
// its team on the burst layer.
func (w *Workload) AskFor(offerings []capacity.Offering) *Ask {
	return &Ask{LeaseAsk: LeaseAsk{Offerings: offerings, Team: w.Spec.Team, MaxPrice: w.Spec.Resources.MaxPricePerHour}}
}
