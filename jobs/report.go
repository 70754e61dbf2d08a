package jobs

import (
	"context"
	"fmt"

	"refuel/workflows/training"

	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"refuel/activities"
)

// StatusNow is a run's status with the step and the latest checkpoint of
// its agent's latest report: the heartbeat of the attempt training on the
// run's instance now. The run itself hears of steps and checkpoints only
// when its agent signals them, which it does seldom to keep the history
// short (checkpoints close together are told together), and its step
// never goes back; the heartbeat carries both as they happen. dc decodes the heartbeat: the client's
// data converter, so that an encrypted one reads (nil: the default).
func StatusNow(ctx context.Context, c client.Client, dc converter.DataConverter, id string) (training.Status, error) {
	st, err := Status(ctx, c, id)
	if err != nil || st.Instance == nil {
		return st, err
	}
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return st, fmt.Errorf("describe %s: %w", id, err)
	}
	if p, ok := latestReport(desc.GetPendingActivities(), dc, st.Instance.ID); ok {
		st = withReport(st, p)
	}
	return st, nil
}

// latestReport is the heartbeat of the newest training attempt on the
// instance among a run's pending activities. A gang's other ranks, and an
// attempt on an instance the run no longer holds (lost, its activity not
// timed out yet), report steps that are not the run's.
func latestReport(pending []*workflowpb.PendingActivityInfo, dc converter.DataConverter, instance string) (activities.Progress, bool) {
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	var latest activities.Progress
	found := false
	for _, pa := range pending {
		if pa.GetActivityType().GetName() != activities.RunTrainingName || pa.GetHeartbeatDetails() == nil {
			continue
		}
		var p activities.Progress
		if dc.FromPayloads(pa.GetHeartbeatDetails(), &p) != nil || p.InstanceID != instance {
			continue
		}
		if !found || p.Attempt > latest.Attempt {
			latest, found = p, true
		}
	}
	return latest, found
}

// withReport is st with the step and the checkpoint of its agent's
// latest report p, that of the attempt training now: the step is where
// the trainer is (after a loss, behind the step the run had reached
// before it; never behind the checkpoint), and the checkpoint the newer
// of the run's and the report's.
func withReport(st training.Status, p activities.Progress) training.Status {
	st.Step = p.Step
	if p.TotalSteps > 0 {
		st.TotalSteps = p.TotalSteps
	}
	if c := p.Checkpoint; c != nil && (st.LastCheckpoint == nil || c.Step > st.LastCheckpoint.Step) {
		st.LastCheckpoint = c
	}
	if c := st.LastCheckpoint; c != nil {
		st.Step = max(st.Step, c.Step)
	}
	return st
}
