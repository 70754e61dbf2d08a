package instances

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/workflows"
)

// JanitorReport says what one janitor pass found.
type JanitorReport struct {
	Checked  int      `json:"checked"`
	Released []string `json:"released"`
}

// JanitorInput makes one janitor workflow pass again and again: every
// Every, for Span, so the schedule that starts it adds one row to the
// workflow list per Span rather than one a minute (the schedule skips its
// firings while a janitor runs). nil, as the schedules made before it
// pass, is one pass.
type JanitorInput struct {
	Every time.Duration `json:"every"`
	Span  time.Duration `json:"span"`
}

// janitorMaxHistory ends a janitor early whose passes made its history
// long (many instances checked); the schedule starts the next.
const janitorMaxHistory = 10000

// Janitor releases instances refuel launched that no running run owns any
// more: their run was terminated (no cleanup code runs then), or a release
// failed. A Temporal Schedule starts it; it passes every in.Every for
// in.Span, and its result is its last pass.
func Janitor(ctx workflow.Context, in *JanitorInput) (JanitorReport, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           workflows.TaskQueue,
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	end := workflow.Now(ctx)
	if in != nil {
		end = end.Add(in.Span)
	}
	for {
		report, err := janitorPass(ctx)
		if err != nil || in == nil || in.Every <= 0 {
			return report, err
		}
		info := workflow.GetInfo(ctx)
		if !workflow.Now(ctx).Add(in.Every).Before(end) || info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= janitorMaxHistory {
			return report, nil
		}
		if err := workflow.Sleep(ctx, in.Every); err != nil {
			return report, err
		}
	}
}

// janitorPass lists the instances refuel launched and releases those no
// running run owns.
func janitorPass(ctx workflow.Context) (JanitorReport, error) {
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
