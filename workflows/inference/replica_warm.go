package inference

import (
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/serving"
	"refuel/workflows/workload"
)

// A ServiceReplica started warm (ReplicaInput.Warm) is a serving
// service's warm-pool entry: it acquires its instance as any replica
// does, then stops it where its provider can (an on-demand instance on a
// capacity.Stopper), paying for its volume alone, or else holds it
// running at full price. It runs no server until its service promotes
// it (SignalReplicaPromote): it then starts its instance, if stopped,
// and serves like any replica. A drain gives the instance back, stopped
// or running.

// holdWarm keeps the warm entry until it is promoted, drained, asked by
// the pool to yield, or taken by its cloud (its instance is then given
// back and another acquired). A promoted entry whose instance will not start gives it back
// and acquires another, as a cold replica.
func (r *replicaRun) holdWarm(ctx workflow.Context) error {
	if !r.Promoted {
		r.stopWarm(ctx)
		r.report(ctx, string(ReplicaWarm), func(p *ReplicaReport) {
			p.Stopped, p.StoppedPricePerHour = r.Stopped, r.StoppedPricePerHour
		})
		id := r.Lease.Instance.ID
		if err := workflow.Await(ctx, func() bool { return r.Promoted || r.Draining || r.Seat().YieldAsked() || r.Taken[id] }); err != nil {
			return err
		}
		if r.Taken[id] && !r.Draining {
			// Its cloud took the spot entry back: acquire another.
			delete(r.Taken, id)
			r.Stopped = false
			r.AddFailure(ctx, string(capacity.InstanceLost), r.Lease.Offering().Key(), "its cloud took warm-pool instance "+id)
			r.Release(ctx, activities.ReleasePreempted)
			return nil
		}
	}
	switch {
	case r.Draining:
		return nil
	case !r.Promoted:
		r.Stopped = false
		r.Release(ctx, activities.ReleaseYielded)
		return nil
	}
	r.Warm, r.FromWarm = false, true
	if r.Stopped && !r.startWarm(ctx) {
		r.Stopped, r.FromWarm = false, false
		r.Release(ctx, activities.ReleaseFailed)
	}
	r.report(ctx, serving.ReplicaStarting, nil)
	return nil
}

// stoppable reports whether the replica's instance may be stopped: an
// on-demand one. Spot is reclaimed, not stopped; a base machine is the
// team's own and paid for anyway.
func (r *replicaRun) stoppable() bool {
	return r.Lease != nil && r.Lease.Offering().Market == capacity.OnDemand
}

// stopWarm stops the entry's instance where its provider can and books
// its time from now at its volume's price; where it cannot, or the stop
// fails, the entry stays running at full price. The stop is seen
// through if the replica is cancelled meanwhile, so what it holds is
// known when it is given back.
func (r *replicaRun) stopWarm(ctx workflow.Context) {
	if r.Stopped || !r.stoppable() {
		return
	}
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	id := r.Lease.Instance.ID
	var res activities.StopResult
	actx := workload.Titled(workload.StartStopOptions(dctx), "stop warm-pool instance "+id)
	err := workflow.ExecuteActivity(actx, activities.StopInstanceName, r.Lease.Instance).Get(dctx, &res)
	switch {
	case err != nil:
		workflow.GetLogger(ctx).Warn("warm-pool instance not stopped; it stays running", "instance", id, "error", err)
		return
	case !res.Stopped:
		workflow.GetLogger(ctx).Info("warm-pool instance kept running", "instance", id, "why", res.Reason)
		return
	}
	r.Stopped, r.StoppedPricePerHour = true, res.PricePerHour
	r.Held.Ledger.Reprice(id, workflow.Now(ctx), res.PricePerHour, true)
}

// startWarm starts the promoted entry's stopped instance and books its
// time from now at full price again; false when it did not start.
func (r *replicaRun) startWarm(ctx workflow.Context) bool {
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	l := r.Lease
	began := workflow.Now(ctx)
	var inst capacity.Instance
	actx := workload.Titled(workload.StartStopOptions(dctx), "start warm-pool instance "+l.Instance.ID)
	if err := workflow.ExecuteActivity(actx, activities.StartInstanceName, l.Instance).Get(dctx, &inst); err != nil {
		r.AddFailure(ctx, string(capacity.InstanceLost), l.Offering().Key(), "warm-pool instance "+l.Instance.ID+" did not start: "+err.Error())
		return false
	}
	if inst.ID == l.Instance.ID {
		l.Instance = inst // a start may give it a new address
	}
	r.Stopped, r.StartedIn = false, workflow.Now(ctx).Sub(began)
	r.Held.Ledger.Reprice(l.Instance.ID, workflow.Now(ctx), l.Offering().PricePerHour, false)
	return true
}

// promote is the replica's SignalReplicaPromote.
func (r *replicaRun) promote() { r.Promoted = true }

// startup is what the replica's first ready tells its service of its
// start-up: a promoted warm entry's is its instance's start and its
// model load; a cold one's, its provision and its model load.
func (r *replicaRun) startup(rp *ReplicaReport, load float64) {
	rp.LoadSeconds = load
	if r.FromWarm {
		rp.Warm, rp.StartSeconds = true, r.StartedIn.Seconds()
		r.FromWarm = false
		return
	}
	if l := r.Lease; l != nil {
		rp.ProvisionSeconds = l.Since.Sub(r.requested).Seconds()
	}
}
