package instances

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/workflows"
)

// InjectInterruption asks the cloud holding an instance to reclaim it the
// way a spot market does: a notice now, the instance gone after the grace
// period. Drills and demos start it; it is recorded like any other run so
// the Web UI shows who pulled the plug and when.
func InjectInterruption(ctx workflow.Context, in activities.InterruptInput) (activities.InterruptResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           workflows.TaskQueue,
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var res activities.InterruptResult
	err := workflow.ExecuteActivity(ctx, activities.InterruptName, in).Get(ctx, &res)
	return res, err
}
