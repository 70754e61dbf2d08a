package training

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
)

// askPlans reports whether this run asks the worker's plans; false for
// runs recorded before plansVersion, which solve in workflow code.
func askPlans(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, plansVersion, workflow.DefaultVersion, 1) >= 1
}

// decide asks the worker's plans the run's question. Deciding is pure
// and quick once an outlook is solved, so the local activity is retried
// a few times and then the caller falls back to what costs no plan.
func decide(ctx workflow.Context, in activities.DecisionInput, summary string) (activities.Decision, error) {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: 5 * time.Minute,
		StartToCloseTimeout:    2 * time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5},
		Summary:                summary,
	})
	var d activities.Decision
	err := workflow.ExecuteLocalActivity(lctx, activities.DecideMarketName, in).Get(ctx, &d)
	return d, err
}
