package workflows

import (
	"errors"

	"go.temporal.io/sdk/workflow"

	"refuel/activities"
)

// SignalInstanceTaken carries InstanceTaken from the control plane to a
// run: the cloud took one of the run's instances.
const SignalInstanceTaken = "instance-taken"

// InstanceTaken is what the instance-taken signal carries: the cloud
// took an instance back at the end of its interruption notice, as a
// cloud's instance-state event says. The control plane sends it to the
// run the instance is tagged with (capacity.TagRun).
type InstanceTaken struct {
	InstanceID string `json:"instance_id"`
}

// onTaken notes an instance its cloud took.
func (r *run) onTaken(t InstanceTaken) {
	if r.taken == nil {
		r.taken = map[string]bool{}
	}
	r.taken[t.InstanceID] = true
}

// awaitTakenOrEnded waits for a RunTraining of the attempt to end, and reports
// whether its cloud took the instance first: an agent whose notice left
// no time to checkpoint in says nothing more, and the run then settles
// the attempt as the market's at once, not after its heartbeat timeout.
// Runs recorded before instanceTakenVersion wait for the activity.
func (r *run) awaitTakenOrEnded(ctx workflow.Context, f workflow.Future, a *attempt) bool {
	id := a.lease.Instance.ID
	for !f.IsReady() {
		if err := workflow.Await(ctx, func() bool { return f.IsReady() || r.taken[id] }); err != nil || f.IsReady() {
			return false
		}
		if workflow.GetVersion(ctx, instanceTakenVersion, workflow.DefaultVersion, 1) >= 1 {
			a.cause = takenByMarket
			return true
		}
		delete(r.taken, id)
	}
	return false
}

// takenResult is how an attempt whose instance its cloud took ends: the
// work since its latest checkpoint is gone, and the agent said nothing.
func takenResult(a *attempt) (activities.TrainingResult, error) {
	return activities.TrainingResult{}, errors.New("its cloud took instance " + a.lease.Instance.ID + " at the end of its interruption notice, before the agent reported a final checkpoint")
}
