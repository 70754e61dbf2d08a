package workload

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/workflows"
)

// A workload that recovers in one trip (oneTripRecoveryVersion) spends
// few round trips on it: its lost instance is given back by the activity
// that acquires the replacement (Replace), its search attributes are
// written once per workflow task, and it reads the market memory in a
// local activity.

// recoversInOneTrip reports whether the workload, whose instance was just
// lost, recovers the one-trip way; from then on its search attributes
// are written once per workflow task.
func (w *Workload) recoversInOneTrip(ctx workflow.Context) bool {
	if w.Nodes() > 1 || workflow.GetVersion(ctx, oneTripRecoveryVersion, workflow.DefaultVersion, 1) < 1 {
		return false
	}
	w.oneTrip = true
	w.Attrs.batch(ctx)
	return true
}

// ReadMemory reads the market memory (StockHistory, PoolCheckpointLog).
// A workload that recovers in one trip reads it in a local activity, within
// the workflow task, rather than in a round trip of its own: a read that
// fails leaves the workload to its priors either way.
func (w *Workload) ReadMemory(ctx workflow.Context, name, summary string, arg any) workflow.Future {
	if !w.oneTrip {
		return workflow.ExecuteActivity(Titled(ControlOptions(ctx), summary), name, arg)
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
		Summary:             summary,
	})
	return workflow.ExecuteLocalActivity(lctx, name, arg)
}

// releaseLater does what release does but for the Release activity
// itself: the instance's cost stops now, and the next acquisition
// (Replace) gives the instance back before it launches the replacement.
// Only a market where no one else counts what the workload holds defers
// it (market.DefersRelease).
func (w *Workload) releaseLater(ctx workflow.Context, reason activities.ReleaseReason) {
	if !w.Market.DefersRelease() || w.Held.Lease == nil {
		w.Release(ctx, reason)
		return
	}
	l := w.Held.Lease
	in := w.Held.Leases.closeLease(ctx, l, reason)
	w.unreleased = &in
	w.Held.Lease = nil
	w.Attrs.Upsert(ctx, workflows.AttrCostUSD.ValueSet(w.Held.Ledger.CostUSD(workflow.Now(ctx))), workflows.AttrMarket.ValueUnset())
	w.Host.ShowDetails(ctx)
}

// ReleaseNow gives back an instance whose release was deferred, for a
// workload that does not go straight on to acquire (paused, over budget,
// asked to yield, or ending).
func (w *Workload) ReleaseNow(ctx workflow.Context) {
	if w.unreleased == nil {
		return
	}
	in := *w.unreleased
	w.unreleased = nil
	w.Held.Leases.releaseInput(ctx, in)
}

// acquireLease makes one attempt to acquire for ask, giving back a lost
// instance not yet released in the same activity.
func (w *Workload) acquireLease(ctx workflow.Context, a LeaseAsk) (*Lease, error) {
	if w.unreleased == nil {
		return w.Held.Leases.Acquire(ctx, w.Owner(), a)
	}
	rel := *w.unreleased
	w.unreleased = nil
	lease, err := w.Held.Leases.acquireReleasing(ctx, w.Owner(), a, &rel)
	var app *temporal.ApplicationError
	if err == nil || (errors.As(err, &app) && app.Type() != activities.ReleaseFailedType) {
		return lease, err // released; acquired, or no offering could be had
	}
	// The provider refused the release, or Replace timed out or was
	// cancelled, perhaps before it released: release on its own,
	// retried until it is done (an instance already gone is fine).
	w.Held.Leases.releaseInput(ctx, rel)
	if app != nil {
		return w.Held.Leases.Acquire(ctx, w.Owner(), a) // nothing was launched
	}
	return nil, err
}

// searchAttrs writes a workload's search attributes: at once, or, once
// it recovers in one trip, once per workflow task (batch).
type searchAttrs struct {
	// batching is set when attributes are written once per workflow
	// task, held until then.
	batching bool
	held     []temporal.SearchAttributeUpdate
}

// batch makes the workload write its search attributes once per
// workflow task: upsert holds them, and a coroutine writes what is held
// when the workflow's other coroutines block. stop writes what is left.
func (a *searchAttrs) batch(ctx workflow.Context) {
	if a.batching {
		return
	}
	a.batching = true
	workflow.Go(ctx, func(ctx workflow.Context) {
		for workflow.Await(ctx, func() bool { return len(a.held) > 0 }) == nil {
			a.flush(ctx)
		}
	})
}

// Upsert writes search attributes, or holds them for one write with the
// rest of the workflow task's.
func (a *searchAttrs) Upsert(ctx workflow.Context, u ...temporal.SearchAttributeUpdate) {
	if a.batching {
		a.held = append(a.held, u...)
		return
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, u...)
}

// flush writes the held search attributes in one upsert; a later value
// of an attribute replaces an earlier one.
func (a *searchAttrs) flush(ctx workflow.Context) {
	if len(a.held) == 0 {
		return
	}
	u := a.held
	a.held = nil
	_ = workflow.UpsertTypedSearchAttributes(ctx, u...)
}

// Stop writes what is held and has every later search attribute written
// at once: the workflow is ending, and no coroutine may write after it
// does.
func (a *searchAttrs) Stop(ctx workflow.Context) {
	a.flush(ctx)
	a.batching = false
}
