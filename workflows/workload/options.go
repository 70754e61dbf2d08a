package workload

import (
	"time"

	"refuel/activities"
	"refuel/workflows"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// RunOptions are the knobs of a TrainingRun that are not part of its
// JobSpec. A run records the ones it starts under and keeps them (see
// Workflows). Defaults suit real jobs; tests shorten them.
type RunOptions struct {
	CapacityBackoff    time.Duration // first wait after no capacity anywhere
	MaxCapacityBackoff time.Duration
	HeartbeatTimeout   time.Duration // how long an instance may be silent before the run asks its cloud about it
	// ControlPlaneTolerance is how long a run waits for the agent of an
	// instance its cloud still runs to be heard again (the cluster was
	// away or slow) before it counts the instance lost; the agent's
	// trainer trains on for as long.
	ControlPlaneTolerance time.Duration
	StopGrace             time.Duration // how long a pause or cancel waits for the final checkpoint
	// RestartBackoff is the wait before acquiring again after a fault
	// (trainer, agent, an instance gone silent), doubling with each
	// restart up to MaxRestartBackoff; the spec's max_restarts caps them.
	RestartBackoff, MaxRestartBackoff time.Duration
	// MaxUnknownWaits is how many waits in a row a run makes when every
	// acquisition failure is unclassified before it fails.
	MaxUnknownWaits int
	// MaxWaits bounds a run's history while it waits for capacity: after
	// this many waits it continues as new (sooner if the server suggests).
	MaxWaits int
	// MaxHistory bounds a run's history while it trains: past this many
	// events it continues as new, the trainer going on.
	MaxHistory int
	// ResendAfter is how long a run of one node waits to hear from the
	// agent of an attempt before it sends the attempt again: the server
	// may record a RunTraining as started that never reached the agent
	// (attempt.send).
	ResendAfter time.Duration
	// SignalEvery is the least time between two checkpoint progress
	// signals of a node agent: checkpoints in between are told together.
	SignalEvery time.Duration
	// A deadline run on on-demand asks refuel whether to try spot again
	// every SpotRetryInterval, backing off to MaxSpotRetryInterval while
	// tries find no stock (0 turns it off); RestartOverhead is what refuel
	// counts a changeover to cost (boot, setup, restoring the checkpoint).
	SpotRetryInterval, MaxSpotRetryInterval time.Duration
	RestartOverhead                         time.Duration
	// WaitForSpot makes a deadline run that finds no spot wait for it
	// while refuel says the slack allows, rather than take on-demand at
	// once.
	WaitForSpot bool
	// A start in another region than the one the run's checkpoint is in
	// moves the checkpoint there: EgressUSDPerGB for each of its GB, and
	// the time the transfer takes at TransferGbps. CheckpointGB is the
	// size counted while the run's checkpoints do not report their own,
	// and by a run on a market's clock, which prices its moves when it
	// opens. Zeros (as in runs recorded before these) make moves free.
	EgressUSDPerGB, CheckpointGB, TransferGbps float64
	// StoreURL is the checkpoint store of runs whose spec names none: the
	// worker's, which its node agents use too. A run shows it in its
	// status, so `starter logs` finds the run's output from anywhere.
	StoreURL string
}

// DefaultRunOptions are the options a TrainingRun uses unless the worker
// is told otherwise.
func DefaultRunOptions() RunOptions {
	return RunOptions{
		CapacityBackoff:    5 * time.Second,
		MaxCapacityBackoff: 2 * time.Minute,
		// The agent heartbeats every third of it: rare, and a dead agent
		// is found within a minute.
		HeartbeatTimeout: time.Minute,
		// A PostgreSQL failover or a server restart takes well under it.
		ControlPlaneTolerance: 5 * time.Minute,
		StopGrace:             2 * time.Minute,
		RestartBackoff:        10 * time.Second,
		MaxRestartBackoff:     5 * time.Minute,
		MaxUnknownWaits:       20,
		// A wait adds about eight events: a thousand stays far inside the
		// history limits.
		MaxWaits:             1000,
		MaxHistory:           10000,
		SignalEvery:          30 * time.Second,
		ResendAfter:          5 * time.Second, // an agent reports its restore within a second or two, a few on a busy machine
		SpotRetryInterval:    10 * time.Minute,
		MaxSpotRetryInterval: time.Hour,
		RestartOverhead:      12 * time.Minute,
		WaitForSpot:          true,
		// The starter's defaults for `starter sim-bench`: a 50 GB
		// checkpoint, at the egress AWS charges between US regions, over
		// a 1 Gbit/s link.
		EgressUSDPerGB: 0.02, CheckpointGB: 50, TransferGbps: 1,
	}
}

// Filled gives knobs a run recorded before they existed (zero in its
// recorded options) their defaults.
func (o RunOptions) Filled() RunOptions {
	d := DefaultRunOptions()
	if o.RestartBackoff == 0 {
		o.RestartBackoff = d.RestartBackoff
	}
	if o.MaxRestartBackoff == 0 {
		o.MaxRestartBackoff = d.MaxRestartBackoff
	}
	if o.MaxUnknownWaits == 0 {
		o.MaxUnknownWaits = d.MaxUnknownWaits
	}
	if o.MaxHistory == 0 {
		o.MaxHistory = d.MaxHistory
	}
	if o.ControlPlaneTolerance == 0 {
		o.ControlPlaneTolerance = d.ControlPlaneTolerance
	}
	if o.ResendAfter == 0 {
		o.ResendAfter = d.ResendAfter
	}
	return o
}

// ControlOptions are for quick control-plane activities.
func ControlOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           workflows.TaskQueue,
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
	})
}

// ProbeOptions are for trying spot only to learn its stock
// (activities.ProbeSpot): its acquisitions are retried as a run's are,
// and its tokens return what a first try had, to be let go.
func ProbeOptions(ctx workflow.Context) workflow.Context { return acquireOptions(ctx) }

// StartStopOptions are for stopping an instance and starting it again
// (a warm-pool entry): a start takes the provider's start time, minutes
// on a GPU instance, so the activity heartbeats while it waits. A start
// asked for while the instance is still stopping fails until it has
// stopped, so failures are retried for as long as a start may take; an
// instance gone fails at once (non-retryable).
func StartStopOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              workflows.TaskQueue,
		StartToCloseTimeout:    10 * time.Minute,
		ScheduleToCloseTimeout: 15 * time.Minute,
		HeartbeatTimeout:       activities.CapacityHeartbeatTimeout,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 15 * time.Second},
	})
}

// acquireOptions leave to Temporal's retry policy only the failures whose
// capacity.Remedy says a prompt retry may cure them (the Acquire activity
// marks the rest non-retryable); a run or service handles the rest itself.
func acquireOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           workflows.TaskQueue,
		StartToCloseTimeout: activities.AcquireAttemptTimeout,
		// The activity heartbeats while the provider works: a worker that
		// dies mid-acquire has it retried elsewhere within seconds, and
		// the idempotency token returns what the first try launched.
		HeartbeatTimeout: activities.CapacityHeartbeatTimeout,
		// With its retries an acquisition ends within the time the janitor
		// leaves a new instance alone.
		ScheduleToCloseTimeout: activities.MaxAcquireTime,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 8,
		},
	})
}

// MarketOptions wait for a market's next tick, however slow its clock:
// a wait that outlasts its timeout is simply asked again.
func MarketOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           workflows.TaskQueue,
		StartToCloseTimeout: 10 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 10 * time.Second},
	})
}

// releaseOptions retry for as long as it takes: an instance must never be
// left running because one call failed, or because the worker making it
// died (the heartbeat has another worker retry within seconds).
func releaseOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           workflows.TaskQueue,
		StartToCloseTimeout: time.Minute,
		HeartbeatTimeout:    activities.CapacityHeartbeatTimeout,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute},
	})
}

// trainingOptions send the training activity to the instance's own task
// queue. It is not retried: a failed attempt means a lost instance, and the
// run itself acquires a replacement.
func trainingOptions(ctx workflow.Context, taskQueue string, work time.Duration, o RunOptions) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              taskQueue,
		ScheduleToStartTimeout: 2 * time.Minute,
		StartToCloseTimeout:    max(4*work, time.Hour),
		HeartbeatTimeout:       o.HeartbeatTimeout,
		WaitForCancellation:    true,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
}

// RecordOptions returns the options a workflow starts under, recorded in
// its history, or nil for a run recorded before options were.
func RecordOptions[T any](ctx workflow.Context, worker T) *T {
	if workflow.GetVersion(ctx, optionsVersion, workflow.DefaultVersion, 1) < 1 {
		return nil
	}
	var o T
	if err := workflow.SideEffect(ctx, func(workflow.Context) any { return worker }).Get(&o); err != nil {
		return nil
	}
	return &o
}
