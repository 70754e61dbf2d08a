package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
)

// JanitorReport says what one janitor pass found.
type JanitorReport struct {
	Checked  int      `json:"checked"`
	Released []string `json:"released"`
}

// Janitor releases instances refuel launched that no running run owns any
// more: their run was terminated (no cleanup code runs then), or a release
// failed. A Temporal Schedule starts it every minute.
func Janitor(ctx workflow.Context) (JanitorReport, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           TaskQueue,
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var managed []activities.ManagedInstance
	if err := workflow.ExecuteActivity(ctx, activities.ListManagedName).Get(ctx, &managed); err != nil {
		return JanitorReport{}, err
	}
	report := JanitorReport{Checked: len(managed), Released: []string{}}
	for _, m := range managed {
		var owned bool
		in := activities.OwnershipInput{RunID: m.RunID, InstanceID: m.Instance.ID}
		if err := workflow.ExecuteActivity(ctx, activities.RunOwnsInstanceName, in).Get(ctx, &owned); err != nil {
			workflow.GetLogger(ctx).Warn("ownership unknown; keeping instance", "instance", m.Instance.ID, "error", err)
			continue
		}
		if owned {
			continue
		}
		rel := activities.ReleaseInput{Instance: m.Instance, Reason: activities.ReleaseOrphaned}
		if err := workflow.ExecuteActivity(ctx, activities.ReleaseName, rel).Get(ctx, nil); err != nil {
			return report, err
		}
		report.Released = append(report.Released, m.Instance.ID)
	}
	return report, nil
}
