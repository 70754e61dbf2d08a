package training

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/policy"
	"refuel/workflows"
	"refuel/workflows/workload"
)

// A run trains in attempts (workload/attempt.go): it launches one on what it
// holds, follows it while its market watches, and acts once on the
// verdict its end comes to (settle). A market may move the run
// meanwhile: a deadline run on on-demand changes over to a spot instance
// it got, and trains on there.

// train runs the job on what the run holds until the attempt ends, and
// returns the verdict its end comes to.
func (r *run) train(ctx workflow.Context) (workload.Verdict, error) {
	if r.MustStop(ctx) != workload.GoOn {
		// Asked to stop while it acquired: the instance goes back untrained.
		return workload.Verdict{Ending: workload.EndStopped}, nil
	}
	return r.Follow(ctx, r.startAttempt(ctx))
}

// startAttempt starts the trainer on every instance the run holds; the
// node agent restores the latest checkpoint first.
func (r *run) startAttempt(ctx workflow.Context) *workload.Attempt {
	r.Enter(ctx, workflows.StateRunning)
	started := workflow.Now(ctx)
	in := r.attemptInput(r.checkpointInterval(ctx))
	if r.Nodes() > 1 {
		r.Attempts++
		in.Attempt = r.Attempts
	}
	return r.Launch(ctx, in, started)
}

// attemptInput is what rank 0's agent runs: the spec, from the latest
// checkpoint, checkpointing every interval, under the attempt number of
// the instance it holds.
func (r *run) attemptInput(interval time.Duration) activities.TrainingInput {
	l := r.Lease
	return activities.TrainingInput{
		Spec: r.spec, Attempt: l.Attempt, InstanceID: l.Instance.ID, CheckpointURL: r.spec.Checkpoint.URL, RunIdentity: r.Identity,
		CheckpointInterval: interval, StopGrace: r.opts.StopGrace,
	}
}

// AttemptStarted watches the attempt's spending from when rank 0 is
// launched.
func (r *run) AttemptStarted(ctx workflow.Context, a *workload.Attempt) { r.WatchBudget(ctx, a) }

// settle acts once on an attempt's verdict, for one node or a gang
// alike: an elastic gang's growth, a changeover, the market's own ends,
// completion, a stop; a loss or a failure is a recovery's
// (workload/recovery.go).
func (r *run) settle(ctx workflow.Context, v workload.Verdict) error {
	if r.grew(ctx, v) {
		return nil
	}
	switch v.Ending {
	case workload.EndChangedOver:
		// The spot instance becomes the run's, paid for since it was
		// launched; the on-demand one goes back.
		r.Release(ctx, activities.ReleaseChangeover)
		r.Use(ctx, v.Standby)
		r.Peers, r.StandbyPeers = r.StandbyPeers, nil
		r.Changeovers++
	case workload.EndMoved:
		r.Release(ctx, activities.ReleasePaused)
	case workload.EndDone:
		r.Release(ctx, activities.ReleaseCompleted)
		r.finished = true
	case workload.EndCompleted:
		r.finished = true
		r.ModelDigest = v.End.Res.ModelDigest
		r.Release(ctx, activities.ReleaseCompleted)
	case workload.EndLost, workload.EndTaken, workload.EndTrainerFailed, workload.EndCheckpointsFailed:
		return r.Recover().Run(ctx, r.Recover().LossOf(ctx, v))
	default:
		r.Stopped(ctx)
	}
	return nil
}

// Stopped gives back what an attempt stopped at a checkpoint held: for a
// yield to the pool, a spent budget, or a pause.
func (r *run) Stopped(ctx workflow.Context) {
	reason := activities.ReleasePaused // a pause, or a cancel
	switch r.MustStop(ctx, workload.StopPause) {
	case workload.StopYield:
		reason = activities.ReleaseYielded
	case workload.StopBudget:
		reason = activities.ReleaseOverBudget
	}
	r.Release(ctx, reason)
}

// checkpointInterval is how often the trainer on the run's instance
// should checkpoint: the spec's interval, or for "auto" the Young/Daly
// optimum from what every run so far measured on the instance's pool
// (write times, time held, preemptions), within the spec's bounds.
func (r *run) checkpointInterval(ctx workflow.Context) time.Duration {
	if d, ok := r.spec.Checkpoint.FixedInterval(); ok {
		return d
	}
	c := r.spec.Checkpoint
	var log policy.CheckpointLog
	if workflow.GetVersion(ctx, autoCheckpointVersion, workflow.DefaultVersion, 1) >= 1 {
		err := r.ReadMemory(ctx, activities.PoolCheckpointLogName, "what runs measured on "+workload.OfferingName(r.Lease.Offering())+" (interval: auto)", r.Lease.Offering()).Get(ctx, &log)
		if err != nil {
			workflow.GetLogger(ctx).Warn("pool's checkpoint log unavailable; checkpointing at the lower bound", "error", err)
		}
	}
	d := log.Interval(autoCheckpointPrior, c.MinInterval.D(), c.MaxInterval.D())
	r.CheckpointIntervalSecs = d.Seconds()
	return d
}

// autoCheckpointPrior is the preemption-free time a pool is credited with
// before any is measured: a new pool is neither trusted forever nor
// assumed to be taken at once.
const autoCheckpointPrior = time.Hour
