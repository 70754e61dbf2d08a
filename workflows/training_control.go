package workflows

import (
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
)

// A training run costs the control plane almost nothing while it trains:
// the node agent heartbeats every third of the heartbeat timeout (a dead
// agent is still found within it), checkpoints are signalled at most
// every RunOptions.SignalEvery, and the run reaches the agent by push
// (StopTraining on the instance's own queue) when it must stop the
// trainer. A run whose history grows long continues as new while it
// trains, without stopping the trainer: its next run attaches to it.

// stopOptions send StopTraining to the instance's own queue. A stop that
// finds no agent polling is given up quickly: the heartbeat timeout
// finds a dead agent anyway.
func stopOptions(ctx workflow.Context, taskQueue string, attempt int) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              taskQueue,
		ScheduleToStartTimeout: 30 * time.Second,
		StartToCloseTimeout:    10 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 3},
		Summary:                "stop attempt " + strconv.Itoa(attempt) + " at a checkpoint",
	})
}

// historyFull reports whether this run of the workflow should hand on to
// the next: the server suggests it, or the history passed MaxHistory.
func (r *run) historyFull(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= r.opts.MaxHistory
}

// continueTraining continues as new with the attempt under way: the
// trainer goes on training, and the next run attaches to it.
func (r *run) continueTraining(ctx workflow.Context) error {
	a := r.attempt
	r.Training = &CarriedAttempt{Started: a.started, Interval: a.in.CheckpointInterval}
	if r.nodes() > 1 {
		r.Training.Attempt = a.in.Attempt
	}
	return r.continueAsNew(ctx)
}

// resumeTraining takes up the attempt the previous run handed on: it
// attaches to its trainer and follows it as the previous run would
// have. A stop asked for as the previous run handed on is asked again.
func (r *run) resumeTraining(ctx workflow.Context) (attemptEnd, error) {
	l, t := r.Lease, r.Training
	in := activities.TrainingInput{
		Spec: r.spec, Attempt: l.Attempt, InstanceID: l.Instance.ID, CheckpointURL: r.spec.Checkpoint.URL, RunIdentity: r.identity,
		CheckpointInterval: t.Interval, StopGrace: r.opts.StopGrace,
	}
	r.Training = nil
	if t.Attempt > 0 {
		in.Attempt = t.Attempt
		r.startGang(ctx, in, t.Started)
	} else {
		r.launchAttempt(ctx, in, t.Started)
		// Its agent trains already: the RunTraining attaches, and there
		// is no restore to report.
		r.attempt.heard = true
	}
	if r.mustStop(ctx) != goOn {
		r.attempt.stop()
	}
	return r.trainOn(ctx)
}
