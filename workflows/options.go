package workflows

import (
	"errors"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/capacity"
)

// controlOptions are for quick control-plane activities.
func controlOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           TaskQueue,
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
	})
}

// acquireOptions: the activity itself marks every class but throttling
// non-retryable, so Temporal's backoff here is the throttling backoff;
// the run's own loop handles no capacity.
func acquireOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           TaskQueue,
		StartToCloseTimeout: 3 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 8,
		},
	})
}

// marketOptions wait for a market's next tick, however slow its clock:
// a wait that outlasts its timeout is simply asked again.
func marketOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           TaskQueue,
		StartToCloseTimeout: 10 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 10 * time.Second},
	})
}

// releaseOptions retry for as long as it takes: an instance must never be
// left running because one call failed.
func releaseOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           TaskQueue,
		StartToCloseTimeout: time.Minute,
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

// failureDetails are the classified failures an Acquire error carries;
// an error without them counts as one failure of its type's class.
func failureDetails(err error) []activities.FailureDetail {
	var details []activities.FailureDetail
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.HasDetails() {
		_ = app.Details(&details)
	}
	if len(details) == 0 {
		class := capacity.Unknown
		if app != nil && app.Type() != "" {
			class = capacity.Class(app.Type())
		}
		details = []activities.FailureDetail{{Class: class, Message: err.Error()}}
	}
	return details
}

// recordAcquireFailure adds each classified failure (see failureDetails)
// to status and returns them.
func (r *run) recordAcquireFailure(ctx workflow.Context, err error) []activities.FailureDetail {
	details := failureDetails(err)
	for _, d := range details {
		r.addFailure(ctx, string(d.Class), d.Offering, d.Message)
	}
	return details
}

// classes are the failures' classes, for capacity's remedies.
func classes(details []activities.FailureDetail) []capacity.Class {
	out := make([]capacity.Class, len(details))
	for i, d := range details {
		out[i] = d.Class
	}
	return out
}

// permanent reports whether no offering can ever succeed.
func permanent(details []activities.FailureDetail) bool {
	return capacity.Permanent(classes(details)...)
}

// retryableClass is the class a waiting run waits on: the first failure
// that waiting can cure.
func retryableClass(details []activities.FailureDetail) capacity.Class {
	for _, d := range details {
		if d.Class.Retryable() {
			return d.Class
		}
	}
	return capacity.Unknown
}

func describeFailures(details []activities.FailureDetail) string {
	parts := make([]string, len(details))
	for i, d := range details {
		parts[i] = string(d.Class) + " on " + d.Offering + ": " + d.Message
	}
	return strings.Join(parts, "; ")
}

// autoCheckpointVersion marks runs that ask the pool's checkpoint log
// before each attempt.
const autoCheckpointVersion = "auto-checkpoint-log"

// autoCheckpointPrior is the preemption-free time a pool is credited with
// before any is measured: a new pool is neither trusted forever nor
// assumed to be taken at once.
const autoCheckpointPrior = time.Hour
