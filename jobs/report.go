package jobs

import (
	"context"
	"fmt"

	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"refuel/activities"
	"refuel/workflows"
)

// StatusNow is a run's status with the step and the latest checkpoint of
// its agent's latest report: the heartbeat of the attempt training on the
// run's instance now. The run itself hears of steps and checkpoints only
// when its agent signals them, which it does seldom to keep the history
// short (checkpoints close together are told together); the heartbeat
// carries both as they happen. dc decodes the heartbeat: the client's
// data converter, so that an encrypted one reads (nil: the default).
func StatusNow(ctx context.Context, c client.Client, dc converter.DataConverter, id string) (workflows.Status, error) {
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

// withReport is st with the step and the checkpoint of its agent's report
// p where p is further on. The step never falls below the checkpoint's,
// so the two never contradict each other.
func withReport(st workflows.Status, p activities.Progress) workflows.Status {
	st.Step = max(st.Step, p.Step)
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
