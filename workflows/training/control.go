package training

import (
	"go.temporal.io/sdk/workflow"

	"refuel/workflows/workload"
)

// A training run costs the control plane almost nothing while it trains:
// the node agent heartbeats every third of the heartbeat timeout (a dead
// agent is still found within it), checkpoints are signalled at most
// every RunOptions.SignalEvery, and the run reaches the agent by push
// (StopTraining on the instance's own queue) when it must stop the
// trainer. A run whose history grows long continues as new while it
// trains, without stopping the trainer: its next run attaches to it.

// resumeTraining takes up the attempt the previous run handed on: it
// attaches to its trainer and follows it as the previous run would
// have. A stop asked for as the previous run handed on is asked again.
func (r *run) resumeTraining(ctx workflow.Context) (workload.Verdict, error) {
	t := r.Training
	in := r.attemptInput(t.Interval)
	r.Training = nil
	if t.Attempt > 0 {
		in.Attempt = t.Attempt
	}
	a := r.Launch(ctx, in, t.Started)
	a.Attached()
	if r.MustStop(ctx) != workload.GoOn {
		a.Stop()
	}
	return r.Follow(ctx, a)
}
