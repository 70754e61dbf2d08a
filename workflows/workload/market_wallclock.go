package workload

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/capacity"
)

// WallClock is the market of a workload that finds capacity on its own,
// in wall time: it tries the tier's offerings in order (spot before
// on-demand where the tier allows both, cheaper first, the zone that
// just preempted it last) and waits with backoff while none can be had.
type WallClock struct{}

func (WallClock) Admit(ctx workflow.Context, w *Workload) error { return w.Host.HoldWhilePaused(ctx) }

// Next is the tier's order.
func (WallClock) Next(ctx workflow.Context, w *Workload) (*Ask, error) {
	if w.Host.MustStop(ctx, StopYield) != GoOn { // no pool: no yield
		return nil, nil
	}
	return w.AskFor(capacity.Order(w.Held.Offerings, w.Spec.Tier, w.Held.AvoidZone)), nil
}

func (WallClock) Acquired(workflow.Context, *Workload, *Lease, int) {}

// Failed: what never can be had ends the workload; anything else is
// waited for.
func (WallClock) Failed(ctx workflow.Context, w *Workload, _ Ask, details []activities.FailureDetail, backoff *time.Duration) (bool, error) {
	if Permanent(details) {
		return false, CannotAcquire("no offering can ever be acquired", details)
	}
	return w.backOff(ctx, details, backoff)
}

func (WallClock) Watch(ctx workflow.Context, _ *Workload, a *Attempt) Move {
	end, err := a.await(ctx)
	return Move{End: end, Err: err}
}

// Ended: a workload in wall time decides nothing that stops an attempt
// but an elastic gang's growth, which the run takes first (run.grew).
func (WallClock) Ended(AttemptEnd, []NodeEnd, bool) *MarketEnd { return nil }

// WidthToAcquire: a short gang given back whole is acquired whole again.
func (WallClock) WidthToAcquire(w *Workload) int { return w.Nodes() }

func (WallClock) Shrinks() bool                   { return true }
func (WallClock) DefersRelease() bool             { return true }
func (WallClock) ContinuesAsNew() bool            { return true }
func (WallClock) Status() (*MarketStatus, string) { return nil, "" }
