package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
)

// recoversInOneTrip reports whether the run, whose instance was just
// lost, recovers the one-trip way; from then on its search attributes
// are written once per workflow task.
func (r *run) recoversInOneTrip(ctx workflow.Context) bool {
	if r.nodes() > 1 || workflow.GetVersion(ctx, oneTripRecoveryVersion, workflow.DefaultVersion, 1) < 1 {
		return false
	}
	r.oneTrip = true
	r.batchAttributes(ctx)
	return true
}

// readMemory reads the market memory (StockHistory, PoolCheckpointLog).
// A run that recovers in one trip reads it in a local activity, within
// the workflow task, rather than in a round trip of its own: a read that
// fails leaves the run to its priors either way.
func (r *run) readMemory(ctx workflow.Context, name, summary string, arg any) workflow.Future {
	if !r.oneTrip {
		return workflow.ExecuteActivity(titled(controlOptions(ctx), summary), name, arg)
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
// Only a run that finds capacity on its own defers it: the pool and a
// clocked market count what a run holds.
func (r *run) releaseLater(ctx workflow.Context, reason activities.ReleaseReason) {
	if !r.market.defersRelease() || r.Lease == nil {
		r.release(ctx, reason)
		return
	}
	l := r.Lease
	in := r.Leases.closeLease(ctx, l, reason)
	r.unreleased = &in
	r.Lease = nil
	r.upsertAttrs(ctx, AttrCostUSD.ValueSet(r.Ledger.CostUSD(workflow.Now(ctx))), AttrMarket.ValueUnset())
	r.showDetails(ctx)
}

// releaseNow gives back an instance whose release was deferred, for a
// run that does not go straight on to acquire (paused, over budget,
// asked to yield, or ending).
func (r *run) releaseNow(ctx workflow.Context) {
	if r.unreleased == nil {
		return
	}
	in := *r.unreleased
	r.unreleased = nil
	r.Leases.releaseInput(ctx, in)
}

// acquireLease makes one attempt to acquire for ask, giving back a lost
// instance not yet released in the same activity.
func (r *run) acquireLease(ctx workflow.Context, a leaseAsk) (*Lease, error) {
	if r.unreleased == nil {
		return r.Leases.acquire(ctx, r.owner(), a)
	}
	rel := *r.unreleased
	r.unreleased = nil
	lease, err := r.Leases.acquireReleasing(ctx, r.owner(), a, &rel)
	var app *temporal.ApplicationError
	if err == nil || (errors.As(err, &app) && app.Type() != activities.ReleaseFailedType) {
		return lease, err // released; acquired, or no offering could be had
	}
	// The provider refused the release, or Replace timed out or was
	// cancelled, perhaps before it released: release on its own,
	// retried until it is done (an instance already gone is fine).
	r.Leases.releaseInput(ctx, rel)
	if app != nil {
		return r.Leases.acquire(ctx, r.owner(), a) // nothing was launched
	}
	return nil, err
}

// batchAttributes makes the run write its search attributes once per
// workflow task: upsertAttrs holds them, and a coroutine writes what is
// held when the run's other coroutines block. end writes what is left.
func (r *run) batchAttributes(ctx workflow.Context) {
	if r.batching {
		return
	}
	r.batching = true
	workflow.Go(ctx, func(ctx workflow.Context) {
		for workflow.Await(ctx, func() bool { return len(r.heldAttrs) > 0 }) == nil {
			r.flushAttrs(ctx)
		}
	})
}

// upsertAttrs writes search attributes, or holds them for one write
// with the rest of the workflow task's.
func (r *run) upsertAttrs(ctx workflow.Context, u ...temporal.SearchAttributeUpdate) {
	if r.batching {
		r.heldAttrs = append(r.heldAttrs, u...)
		return
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, u...)
}

// flushAttrs writes the held search attributes in one upsert; a later
// value of an attribute replaces an earlier one.
func (r *run) flushAttrs(ctx workflow.Context) {
	if len(r.heldAttrs) == 0 {
		return
	}
	u := r.heldAttrs
	r.heldAttrs = nil
	_ = workflow.UpsertTypedSearchAttributes(ctx, u...)
}

// stopBatching writes what is held and has every later search attribute
// written at once: the run is ending, and no coroutine may write after
// it does.
func (r *run) stopBatching(ctx workflow.Context) {
	r.flushAttrs(ctx)
	r.batching = false
}

// closeLease ends what the run books for l, as a release does, and
// returns what the Release activity is to be given.
func (b *Leases) closeLease(ctx workflow.Context, l *Lease, reason activities.ReleaseReason) activities.ReleaseInput {
	in := releaseInputOf(ctx, l, reason)
	b.closed(ctx, l)
	return in
}
