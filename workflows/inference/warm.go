package inference

import (
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/capacity"
	"refuel/workflows/workload"
)

// A warm-pool entry on an instance its provider can stop (on-demand, on
// a capacity.Stopper) is kept stopped: acquired, then stopped, paid for
// its volume alone, and started when scale-out takes it, in the
// provider's start time rather than a cold acquisition's. Spot, base
// machines and providers that cannot stop keep it running at full price.

// stoppable reports whether the replica's instance may be stopped: an
// on-demand burst instance. Spot is reclaimed, not stopped; a base
// machine is the team's own and paid for anyway.
func (r *Replica) stoppable() bool {
	return r.Lease != nil && r.Instance.Offering.Market == capacity.OnDemand && r.Layer == admission.BurstLayer
}

// stopWarm stops a warm-pool entry's instance where its provider can,
// and books its time from now at the volume's price. Where it cannot, or
// the stop fails, the entry stays running at full price.
func (p placement) stopWarm(ctx workflow.Context, r *Replica) {
	s := p.s
	if r.Stopped || !r.stoppable() || !s.live(ctx, r) ||
		workflow.GetVersion(ctx, stoppedWarmVersion, workflow.DefaultVersion, 1) < 1 {
		return
	}
	var res activities.StopResult
	r.stopping = true
	defer func() { r.stopping = false }()
	err := s.call(ctx, r, func(ctx workflow.Context) error {
		actx := workload.Titled(workload.StartStopOptions(ctx), "stop warm-pool instance "+r.Instance.ID)
		return workflow.ExecuteActivity(actx, activities.StopInstanceName, r.Instance).Get(ctx, &res)
	})
	switch {
	case err != nil:
		workflow.GetLogger(ctx).Warn("warm-pool instance not stopped; it stays running", "replica", r.ID, "instance", r.Instance.ID, "error", err)
		return
	case !res.Stopped:
		workflow.GetLogger(ctx).Info("warm-pool instance kept running", "replica", r.ID, "instance", r.Instance.ID, "why", res.Reason)
		return
	}
	r.Stopped, r.StoppedPricePerHour = true, res.PricePerHour
	s.Ledger.Reprice(r.Instance.ID, workflow.Now(ctx), res.PricePerHour, true)
	s.ShowDetails(ctx)
}

// promote takes a warm-pool entry into service: a stop under way ends
// first, a stopped instance is started, then the model loads. One whose
// start fails is released and replaced.
func (p placement) promote(ctx workflow.Context, r *Replica) {
	s := p.s
	if r.Stopped || r.stopping {
		if workflow.Await(ctx, func() bool { return !r.stopping || !s.live(ctx, r) }) != nil || !s.live(ctx, r) {
			return
		}
	}
	if r.Stopped && !p.start(ctx, r) {
		return
	}
	p.loadModel(ctx, r)
}

// start starts a stopped warm-pool entry's instance and books its time
// from now at full price again; false when it could not be started (the
// replica is then released, and converging replaces it).
func (p placement) start(ctx workflow.Context, r *Replica) bool {
	s := p.s
	var inst capacity.Instance
	began := workflow.Now(ctx)
	err := s.call(ctx, r, func(ctx workflow.Context) error {
		actx := workload.Titled(workload.StartStopOptions(ctx), "start warm-pool instance "+r.Instance.ID)
		return workflow.ExecuteActivity(actx, activities.StartInstanceName, r.Instance).Get(ctx, &inst)
	})
	if err != nil {
		s.AddFailure(ctx, string(capacity.InstanceLost), r.Instance.Offering.Key(), "warm-pool instance "+r.Instance.ID+" of "+r.ID+" did not start: "+err.Error())
		s.Release(ctx, r, activities.ReleaseFailed)
		s.converge(ctx)
		return false
	}
	r.Stopped, r.StartedIn = false, workflow.Now(ctx).Sub(began)
	if inst.ID == r.Instance.ID {
		r.Instance = inst // a start may give it a new address
	}
	s.Ledger.Reprice(r.Instance.ID, workflow.Now(ctx), r.Instance.Offering.PricePerHour, false)
	return s.live(ctx, r)
}
