package workload

import (
	"errors"
	"strconv"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/internal/telemetry"
	"refuel/pkg/capacity"
)

// A workload rides out its own control plane. The node agent runs on
// whatever the cluster does (activities.Node), so when the cluster stops
// hearing an attempt's heartbeats the workload does not take the
// instance for lost on the cluster's word alone: it asks the instance's
// cloud, and while the cloud still runs it, attaches to the attempt
// again, as a workload that continued as new does. Only an instance the
// cloud says is gone, or one not heard from for the control-plane
// tolerance, ends the attempt as lost; a dead instance is still found
// within the heartbeat timeout.

// Follow runs a rank's RunTraining to its end, attaching again each time
// the cluster lost touch with a healthy instance's agent. ctx is the
// activity's (disconnected) context.
func (a *Attempt) Follow(ctx workflow.Context, k *rankAttempt) workflow.Future {
	w := a.W
	f, settle := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		actx := ctx
		var silentSince time.Time // when the agent was last heard, in this outage
		for {
			scheduled := workflow.Now(ctx)
			var res activities.TrainingResult
			f := a.send(ctx, actx, k)
			if a.takenFirst(ctx, f, k) {
				settle.Set(a.takenResult(k))
				return
			}
			err := f.Get(ctx, &res)
			if err == nil {
				a.countTrainerRestarts(ctx, res.Outage)
			}
			if !unheard(err) {
				settle.Set(res, err)
				return
			}
			now := workflow.Now(ctx)
			if silentSince.IsZero() || now.Sub(scheduled) > 2*w.Opts.HeartbeatTimeout {
				// A new outage: the agent was heard until a heartbeat
				// timeout ago.
				silentSince = now.Add(-w.Opts.HeartbeatTimeout)
			}
			left := silentSince.Add(w.Opts.ControlPlaneTolerance).Sub(now)
			if left <= 0 || a.instanceGone(ctx, k.lease) {
				settle.Set(res, err)
				return
			}
			a.lostTouch(ctx, k, now.Sub(silentSince))
			actx = workflow.WithScheduleToStartTimeout(ctx, left)
		}
	})
	return f
}

// unheard reports whether an attempt ended because the cluster stopped
// hearing its agent's heartbeats. (Attaching again, an agent that takes
// no work within the time left ends the attempt for good, as one that
// never took its first.)
func unheard(err error) bool {
	var timeout *temporal.TimeoutError
	return errors.As(err, &timeout) && timeout.TimeoutType() == enums.TIMEOUT_TYPE_HEARTBEAT
}

// instanceGone asks the instance's cloud whether it took the instance
// back. A cloud that cannot be asked says nothing: the workload waits for the
// agent within its tolerance.
func (a *Attempt) instanceGone(ctx workflow.Context, l *Lease) bool {
	actx := Titled(ControlOptions(ctx), "does the cloud still run "+l.Instance.ID+"?")
	var lost []activities.LostInstance
	if err := workflow.ExecuteActivity(actx, activities.LostInstancesName, []capacity.Instance{l.Instance}).Get(ctx, &lost); err != nil {
		workflow.GetLogger(ctx).Warn("the cloud could not say whether it still runs the instance", "instance", l.Instance.ID, "error", err)
		return false
	}
	return len(lost) > 0
}

// lostTouch records that the cluster did not hear an attempt's agent for
// a while though its instance runs: cause control-plane, not a fault of
// the instance, counted against nothing; its cure is to attach again.
func (a *Attempt) lostTouch(ctx workflow.Context, k *rankAttempt, silent time.Duration) {
	w := a.W
	msg := "the cluster has not heard the agent of attempt " + strconv.Itoa(k.in.Attempt) + " on " + k.lease.Instance.ID +
		" for " + silent.Round(time.Second).String() + ", but its cloud still runs it: attaching again (the trainer trains on; the instance is counted lost after " +
		w.Opts.ControlPlaneTolerance.String() + ")"
	workflow.GetLogger(ctx).Warn("lost touch with a training attempt", "instance", k.lease.Instance.ID, "silent", silent)
	w.AddFailure(ctx, string(capacity.ControlPlane), k.lease.Offering().Key(), msg)
	workflow.GetMetricsHandler(ctx).Counter(telemetry.ControlPlaneOutagesTotal).Inc(1)
}

// countTrainerRestarts books the trainers an attempt's agent stopped
// because no workflow attached within the tolerance, and started again when
// one did.
func (a *Attempt) countTrainerRestarts(ctx workflow.Context, o *activities.Outage) {
	w := a.W
	if o == nil || o.TrainerRestarts == 0 {
		return
	}
	w.Counts.Restarts.Add(capacity.ControlPlane, o.TrainerRestarts)
	workflow.GetMetricsHandler(ctx).Counter(telemetry.ControlPlaneRestartsTotal).Inc(int64(o.TrainerRestarts))
}
