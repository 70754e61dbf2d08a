package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
)

// maxResends bounds how often a run sends an attempt again: each send
// puts the heartbeat timeout that finds a dead agent further off.
const maxResends = 2

// sendTraining schedules the attempt's RunTraining and returns its future
// once the run heard the attempt's agent, the activity ended, the cloud
// took the instance, or the sends ran out.
//
// The server can record a RunTraining as started and deliver it to no
// one: its matching gives a poller that was waiting one second to record
// the start, and when history takes longer (a storm of recoveries on a
// busy machine) the poll goes on empty while history holds the activity
// as started. The agent never gets the task, and the run would hear
// nothing until the heartbeat timeout. So a run of one node that hears
// nothing from the agent of an attempt within ResendAfter (twice as long
// each time after) asks the cluster where the RunTraining stands
// (TrainingReach): one the cluster started a while ago without a
// heartbeat never reached the agent, and the run sends the attempt again
// (maxResends at most), cancelling the send before; an agent that got it
// after all lets that one go, and the new one attaches to the same
// trainer. Runs recorded before resendVersion, and gangs, send once.
func (r *run) sendTraining(ctx, actx workflow.Context, a *attempt) workflow.Future {
	if r.nodes() > 1 || workflow.GetVersion(ctx, resendVersion, workflow.DefaultVersion, 1) < 1 {
		return workflow.ExecuteActivity(actx, activities.RunTrainingName, a.in)
	}
	sctx, cancel := workflow.WithCancel(actx)
	f := workflow.ExecuteActivity(sctx, activities.RunTrainingName, a.in)
	for wait, resends := r.opts.ResendAfter, 0; !r.awaitWord(ctx, f, a, wait); wait *= 2 {
		switch r.reach(ctx) {
		case activities.ReachHeard:
			a.heard = true
			return f
		case activities.ReachLost:
			if resends == maxResends {
				return f // its heartbeat timeout finds what became of it
			}
			workflow.GetLogger(ctx).Warn("the attempt's RunTraining never reached its agent: sending it again",
				"instance", a.lease.Instance.ID, "attempt", a.in.Attempt)
			cancel()
			sctx, cancel = workflow.WithCancel(actx)
			f = workflow.ExecuteActivity(sctx, activities.RunTrainingName, a.in)
			resends++
		}
	}
	return f
}

// awaitWord waits up to wait for a word from the attempt's agent, the
// end of its RunTraining f, or its cloud taking the instance; false when
// none came.
func (r *run) awaitWord(ctx workflow.Context, f workflow.Future, a *attempt, wait time.Duration) bool {
	tctx, stop := workflow.WithCancel(ctx)
	defer stop()
	timer := workflow.NewTimer(tctx, wait)
	word := func() bool { return a.heard || f.IsReady() || r.taken[a.lease.Instance.ID] }
	if err := workflow.Await(ctx, func() bool { return word() || timer.IsReady() }); err != nil {
		return true
	}
	return word()
}

// reach asks the cluster where the run's RunTraining stands with its
// agent; waiting when it cannot say.
func (r *run) reach(ctx workflow.Context) activities.Reach {
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
