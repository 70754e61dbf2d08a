package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/capacity"
)

// wallClock is the market of a workload that finds capacity on its own,
// in wall time: it tries the tier's offerings in order (spot before
// on-demand where the tier allows both, cheaper first, the zone that
// just preempted it last) and waits with backoff while none can be had.
type wallClock struct{}

func (wallClock) admit(ctx workflow.Context, w *workload) error { return w.host.holdWhilePaused(ctx) }

// next is the tier's order.
func (wallClock) next(ctx workflow.Context, w *workload) (*ask, error) {
	if w.host.mustStop(ctx, stopYield) != goOn { // no pool: no yield
		return nil, nil
	}
	return w.askFor(capacity.Order(w.h.Offerings, w.spec.Tier, w.h.AvoidZone)), nil
}

func (wallClock) acquired(workflow.Context, *workload, *Lease, int) {}

// failed: what never can be had ends the workload; anything else is
// waited for.
func (wallClock) failed(ctx workflow.Context, w *workload, _ ask, details []activities.FailureDetail, backoff *time.Duration) (bool, error) {
	if permanent(details) {
		return false, cannotAcquire("no offering can ever be acquired", details)
	}
	return w.backOff(ctx, details, backoff)
}

func (wallClock) watch(ctx workflow.Context, _ *workload, a *attempt) move {
	end, err := a.await(ctx)
	return move{end: end, err: err}
}

// ended: a workload in wall time decides nothing that stops an attempt
// but an elastic gang's growth, which the run takes first (run.grew).
func (wallClock) ended(attemptEnd, []nodeEnd, bool) *marketEnd { return nil }

// widthToAcquire: a short gang given back whole is acquired whole again.
func (wallClock) widthToAcquire(w *workload) int { return w.nodes() }

func (wallClock) shrinks() bool                   { return true }
func (wallClock) defersRelease() bool             { return true }
func (wallClock) continuesAsNew() bool            { return true }
func (wallClock) status() (*MarketStatus, string) { return nil, "" }
