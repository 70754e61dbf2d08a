package workload

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/workflows"
)

// An attempt's RunTraining may never reach its agent, and its agent may
// say nothing before its instance is taken: the attempt then hears from
// the cluster (TrainingReach) and from the control plane
// (instance-taken) rather than wait for its heartbeat timeout.

// maxResends bounds how often an attempt's RunTraining is sent again:
// each send puts the heartbeat timeout that finds a dead agent further
// off.
const maxResends = 2

// send schedules rank k's RunTraining and returns its future once the
// workload heard the rank's agent, the activity ended, the cloud took the
// instance, or the sends ran out.
//
// The server can record a RunTraining as started and deliver it to no
// one: its matching gives a poller that was waiting one second to record
// the start, and when history takes longer (a storm of recoveries on a
// busy machine) the poll goes on empty while history holds the activity
// as started. The agent never gets the task, and the workload would hear
// nothing until the heartbeat timeout. So a workload of one node that
// hears nothing from the agent of an attempt within ResendAfter (twice as
// long each time after) asks the cluster where the RunTraining stands
// (TrainingReach): one the cluster started a while ago without a
// heartbeat never reached the agent, and the workload sends it again
// (maxResends at most), cancelling the send before; an agent that got it
// after all lets that one go, and the new one attaches to the same
// trainer. Workloads recorded before resendVersion, and gangs, send once.
func (a *Attempt) send(ctx, actx workflow.Context, k *rankAttempt) workflow.Future {
	w := a.W
	if w.Nodes() > 1 || workflow.GetVersion(ctx, resendVersion, workflow.DefaultVersion, 1) < 1 {
		return workflow.ExecuteActivity(actx, activities.RunTrainingName, k.in)
	}
	sctx, cancel := workflow.WithCancel(actx)
	f := workflow.ExecuteActivity(sctx, activities.RunTrainingName, k.in)
	for wait, resends := w.Opts.ResendAfter, 0; !a.awaitWord(ctx, f, k, wait); wait *= 2 {
		switch a.reach(ctx) {
		case activities.ReachHeard:
			k.heard = true
			return f
		case activities.ReachLost:
			if resends == maxResends {
				return f // its heartbeat timeout finds what became of it
			}
			workflow.GetLogger(ctx).Warn("the attempt's RunTraining never reached its agent: sending it again",
				"instance", k.lease.Instance.ID, "attempt", k.in.Attempt)
			cancel()
			sctx, cancel = workflow.WithCancel(actx)
			f = workflow.ExecuteActivity(sctx, activities.RunTrainingName, k.in)
			resends++
		}
	}
	return f
}

// awaitWord waits up to wait for a word from rank k's agent, the end of
// its RunTraining f, or its cloud taking the instance; false when none
// came.
func (a *Attempt) awaitWord(ctx workflow.Context, f workflow.Future, k *rankAttempt, wait time.Duration) bool {
	tctx, stop := workflow.WithCancel(ctx)
	defer stop()
	timer := workflow.NewTimer(tctx, wait)
	word := func() bool { return k.heard || f.IsReady() || a.W.Taken[k.lease.Instance.ID] }
	if err := workflow.Await(ctx, func() bool { return word() || timer.IsReady() }); err != nil {
		return true
	}
	return word()
}

// reach asks the cluster where the workload's RunTraining stands with its
// agent; waiting when it cannot say.
func (a *Attempt) reach(ctx workflow.Context) activities.Reach {
	info := workflow.GetInfo(ctx)
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 2},
		Summary:             "did the attempt's RunTraining reach its agent?",
	})
	in := activities.ReachInput{WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID}
	var reach activities.Reach
	if err := workflow.ExecuteLocalActivity(lctx, activities.TrainingReachName, in).Get(ctx, &reach); err != nil {
		workflow.GetLogger(ctx).Warn("the cluster could not say whether the attempt's RunTraining reached its agent", "error", err)
		return activities.ReachWaiting
	}
	return reach
}

// takenInstances are the instances their cloud said it took
// (instance-taken), in this run of the workflow.
type takenInstances map[string]bool

// Note notes an instance its cloud took.
func (t *takenInstances) Note(taken workflows.InstanceTaken) {
	if *t == nil {
		*t = takenInstances{}
	}
	(*t)[taken.InstanceID] = true
}

// takenFirst waits for rank k's RunTraining f to end, and reports
// whether its cloud took the instance first: an agent whose notice left
// no time to checkpoint says nothing more, and the attempt then ends at
// once as a preemption, not after its heartbeat timeout. Workloads
// recorded before instanceTakenVersion wait for the activity.
func (a *Attempt) takenFirst(ctx workflow.Context, f workflow.Future, k *rankAttempt) bool {
	id := k.lease.Instance.ID
	for !f.IsReady() {
		if err := workflow.Await(ctx, func() bool { return f.IsReady() || a.W.Taken[id] }); err != nil || f.IsReady() {
			return false
		}
		if workflow.GetVersion(ctx, instanceTakenVersion, workflow.DefaultVersion, 1) >= 1 {
			a.cause = TakenByMarket
			return true
		}
		delete(a.W.Taken, id)
	}
	return false
}

// takenResult is how rank k's attempt ends when its cloud took the
// instance: preempted, the work since its latest checkpoint gone, with
// no word from the agent.
func (a *Attempt) takenResult(k *rankAttempt) (activities.TrainingResult, error) {
	return activities.TrainingResult{
		Outcome:  activities.OutcomePreempted,
		LastStep: a.W.Counts.Step,
		Message:  "its cloud took instance " + k.lease.Instance.ID + " at the end of its interruption notice, before the agent reported a final checkpoint",
	}, nil
}

// Attached notes that the attempt's agents train already, launched by an
// earlier run of the workflow that handed the attempt on: attaching, none
// has a restore to report.
func (a *Attempt) Attached() {
	for _, k := range a.ranks {
		k.heard = true
	}
}
