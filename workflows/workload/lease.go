package workload

import (
	"cmp"
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/internal/telemetry"
	"refuel/pkg/admission"
	"refuel/pkg/capacity"
	"refuel/pkg/cost"
	"refuel/pkg/policy"
)

// Lease is one instance a workflow holds, from the acquisition that got
// it to its release: the attempt that acquired it (half of the
// provider's idempotency token), since when it is paid for, and what its
// time taught about its pool.
type Lease struct {
	Instance capacity.Instance `json:"instance"`
	Attempt  int               `json:"attempt,omitempty"`
	Since    time.Time         `json:"acquired_at"`
	// Team is whose cost the lease's time is.
	Team string `json:"team,omitempty"`
	// Teaches is set on a run's leases: what the instance's time taught
	// about its pool (Log: time held, a preemption, checkpoint writes) is
	// added to the pool's checkpoint log when it is released.
	Teaches bool                 `json:"teaches,omitempty"`
	Log     policy.CheckpointLog `json:"log,omitzero"`
}

// Offering is what the lease's instance was acquired on.
func (l *Lease) Offering() capacity.Offering { return l.Instance.Offering }

// Ref is the lease as status shows it.
func (l *Lease) Ref() *InstanceRef {
	o := l.Instance.Offering
	return &InstanceRef{ID: l.Instance.ID, Offering: o.Key(), Market: string(o.Market), Zone: o.Zone, PricePerHour: o.PricePerHour, Since: l.Since}
}

// Leases are every lease a workflow takes: they number its attempts to
// acquire, so no two acquisitions share an idempotency token, and book
// each lease's time in one ledger from launch to release.
type Leases struct {
	Attempts int         `json:"attempts"`
	Ledger   cost.Ledger `json:"ledger"`
}

// LeaseAsk is what to acquire: the offerings in order of preference, and
// what the instance is tagged with (team, layer, base machine).
type LeaseAsk struct {
	Offerings []capacity.Offering
	Team      string
	Layer     admission.Layer
	Node      string // the base machine, on the base layer
	MaxPrice  float64
	// Pool is the burst pool of the pools file that granted the
	// capacity, which the ledger books it to; "" books it to the
	// offering's provider (the base group's provider on base).
	Pool string
}

// Tags are the tags an instance acquired for the ask carries, beside the
// run's own.
func (a LeaseAsk) Tags() map[string]string {
	layer := a.Layer
	if layer == "" {
		layer = admission.BurstLayer
	}
	tags := map[string]string{capacity.TagTeam: a.Team, capacity.TagPool: string(layer)}
	if a.Node != "" {
		tags[capacity.TagNode] = a.Node
	}
	return tags
}

// Owner is the workflow leases are acquired for: its workflow ID, which
// instances are tagged with and the janitor looks up, and its identity
// (its first run ID), which idempotency tokens derive from.
type Owner struct{ WorkflowID, Identity string }

// Acquire makes one attempt of o's to get an instance on the first of
// the offerings a provider can fill; what it gets is paid for from now.
// A failure carries every offering's classified reason (see
// FailureDetails).
func (b *Leases) Acquire(ctx workflow.Context, who Owner, ask LeaseAsk) (*Lease, error) {
	return b.acquireReleasing(ctx, who, ask, nil)
}

// acquireReleasing is acquire, giving back rel's instance first in the
// same activity (Replace) when rel is set.
func (b *Leases) acquireReleasing(ctx workflow.Context, who Owner, ask LeaseAsk, rel *activities.ReleaseInput) (*Lease, error) {
	b.Attempts++
	req := capacity.Request{
		RunID: who.WorkflowID, Identity: who.Identity, Attempt: b.Attempts, Offerings: ask.Offerings, Tags: ask.Tags(), MaxPricePerHour: ask.MaxPrice,
	}
	var inst capacity.Instance
	name, arg, summary := activities.AcquireName, any(req), acquireSummary(req.Attempt, req.Offerings)
	if rel != nil {
		name, arg = activities.ReplaceName, activities.ReplaceInput{Release: *rel, Request: req}
		summary = "release " + rel.Instance.ID + " (" + string(rel.Reason) + "), then " + summary
	}
	actx := Titled(acquireOptions(ctx), summary)
	if err := workflow.ExecuteActivity(actx, name, arg).Get(ctx, &inst); err != nil {
		return nil, err
	}
	l := &Lease{Instance: inst, Attempt: req.Attempt, Since: workflow.Now(ctx), Team: ask.Team}
	o := inst.Offering
	b.Ledger.Open(cost.Segment{
		InstanceID: inst.ID, Pool: cmp.Or(ask.Pool, o.Provider), Market: string(o.Market), Offering: o.Key(),
		PricePerHour: o.PricePerHour, Start: l.Since,
	})
	return l, nil
}

// Release gives the lease's instance back and stops paying for it. It
// runs in a disconnected context, so it completes while the workflow is
// being cancelled too; a release that keeps failing leaves the instance
// to the janitor, which reclaims what no running workflow owns.
func (b *Leases) Release(ctx workflow.Context, l *Lease, reason activities.ReleaseReason) {
	b.releaseInput(ctx, releaseInputOf(ctx, l, reason))
	b.closed(ctx, l)
}

// releaseInputOf is what the Release activity is given for l: with
// what the instance's time taught about its pool, on a run's lease.
func releaseInputOf(ctx workflow.Context, l *Lease, reason activities.ReleaseReason) activities.ReleaseInput {
	in := activities.ReleaseInput{Instance: l.Instance, Reason: reason}
	if l.Teaches {
		l.Log.Ran(workflow.Now(ctx).Sub(l.Since))
		if reason == activities.ReleasePreempted {
			l.Log.Preempted()
		}
		log := l.Log
		in.Log = &log
	}
	return in
}

// releaseInput runs the Release activity (see release).
func (b *Leases) releaseInput(ctx workflow.Context, in activities.ReleaseInput) {
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	rctx := Titled(releaseOptions(dctx), "release "+in.Instance.ID+" ("+string(in.Reason)+")")
	if err := workflow.ExecuteActivity(rctx, activities.ReleaseName, in).Get(dctx, nil); err != nil {
		workflow.GetLogger(ctx).Error("release failed; the janitor will reclaim the instance", "instance", in.Instance.ID, "error", err)
	}
}

// closed stops paying for l's instance.
func (b *Leases) closed(ctx workflow.Context, l *Lease) {
	now := workflow.Now(ctx)
	b.Ledger.Close(l.Instance.ID, now)
	telemetry.CountClosedCost(workflow.GetMetricsHandler(ctx), l.Team, b.Ledger, l.Instance.ID, now)
}

// closeLease ends what the run books for l, as a release does, and
// returns what the Release activity is to be given.
func (b *Leases) closeLease(ctx workflow.Context, l *Lease, reason activities.ReleaseReason) activities.ReleaseInput {
	in := releaseInputOf(ctx, l, reason)
	b.closed(ctx, l)
	return in
}
