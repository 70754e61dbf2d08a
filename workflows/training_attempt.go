package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/policy"
)

// A run trains in attempts (attempt.go): it launches one on what it
// holds, follows it while its market watches, and acts once on the
// verdict its end comes to (settle). A market may move the run
// meanwhile: a deadline run on on-demand changes over to a spot instance
// it got, and trains on there.

// train runs the job on what the run holds until the attempt ends, and
// returns the verdict its end comes to.
func (r *run) train(ctx workflow.Context) (verdict, error) {
	if r.mustStop(ctx) != goOn {
		// Asked to stop while it acquired: the instance goes back untrained.
		return verdict{ending: endStopped}, nil
	}
	return r.follow(ctx, r.startAttempt(ctx))
}

// startAttempt starts the trainer on every instance the run holds; the
// node agent restores the latest checkpoint first.
func (r *run) startAttempt(ctx workflow.Context) *attempt {
	r.enter(ctx, StateRunning)
	started := workflow.Now(ctx)
	in := r.attemptInput(r.checkpointInterval(ctx))
	if r.nodes() > 1 {
		r.Attempts++
		in.Attempt = r.Attempts
	}
	return r.launch(ctx, in, started)
}

// attemptInput is what rank 0's agent runs: the spec, from the latest
// checkpoint, checkpointing every interval, under the attempt number of
// the instance it holds.
func (r *run) attemptInput(interval time.Duration) activities.TrainingInput {
	l := r.Lease
	return activities.TrainingInput{
		Spec: r.spec, Attempt: l.Attempt, InstanceID: l.Instance.ID, CheckpointURL: r.spec.Checkpoint.URL, RunIdentity: r.identity,
		CheckpointInterval: interval, StopGrace: r.opts.StopGrace,
	}
}

// attemptStarted watches the attempt's spending from when rank 0 is
// launched.
func (r *run) attemptStarted(ctx workflow.Context, a *attempt) { r.watchBudget(ctx, a) }

// settle acts once on an attempt's verdict, for one node or a gang
// alike: an elastic gang's growth, a changeover, the market's own ends,
// completion, a stop; a loss or a failure is a recovery's
// (recovery.go).
func (r *run) settle(ctx workflow.Context, v verdict) error {
	if r.grew(ctx, v) {
		return nil
	}
	switch v.ending {
	case endChangedOver:
		// The spot instance becomes the run's, paid for since it was
		// launched; the on-demand one goes back.
		r.release(ctx, activities.ReleaseChangeover)
		r.use(ctx, v.standby)
		r.Peers, r.standbyPeers = r.standbyPeers, nil
		r.Changeovers++
	case endMoved:
		r.release(ctx, activities.ReleasePaused)
	case endDone:
		r.release(ctx, activities.ReleaseCompleted)
		r.finished = true
	case endCompleted:
		r.finished = true
		r.ModelDigest = v.end.res.ModelDigest
		r.release(ctx, activities.ReleaseCompleted)
	case endLost, endTaken, endTrainerFailed, endCheckpointsFailed:
		return r.recovery().run(ctx, r.recovery().lossOf(ctx, v))
	default:
		r.stopped(ctx)
	}
	return nil
}

// stopped gives back what an attempt stopped at a checkpoint held: for a
// yield to the pool, a spent budget, or a pause.
func (r *run) stopped(ctx workflow.Context) {
	reason := activities.ReleasePaused // a pause, or a cancel
	switch r.mustStop(ctx, stopPause) {
	case stopYield:
		reason = activities.ReleaseYielded
	case stopBudget:
		reason = activities.ReleaseOverBudget
	}
	r.release(ctx, reason)
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
		err := r.readMemory(ctx, activities.PoolCheckpointLogName, "what runs measured on "+offeringName(r.Lease.Offering())+" (interval: auto)", r.Lease.Offering()).Get(ctx, &log)
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
