package controlplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"refuel/workflows"
	"refuel/workflows/instances"
)

// JanitorScheduleID is the schedule that runs the janitor.
const JanitorScheduleID = "refuel-janitor"

// janitorSpan is how long one janitor workflow passes for: the workflow
// list gains a janitor row an hour, not one a minute.
const janitorSpan = time.Hour

// EnsureJanitorSchedule creates the janitor's schedule, or brings one an
// older refuel made (one workflow a pass) up to date. The schedule fires
// every `every`; a janitor still running skips the firing, and the one
// it started passes every `every` for janitorSpan.
func EnsureJanitorSchedule(ctx context.Context, c client.Client, every time.Duration) error {
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: every}}}
	action := &client.ScheduleWorkflowAction{
		ID: "refuel-janitor-run", Workflow: workflows.JanitorName, TaskQueue: workflows.TaskQueue,
		Args:               []any{&instances.JanitorInput{Every: every, Span: janitorSpan}},
		WorkflowRunTimeout: janitorSpan + 10*time.Minute,
	}
	_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{ID: JanitorScheduleID, Spec: spec, Action: action})
	var exists *serviceerror.AlreadyExists
	if errors.As(err, &exists) || errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		err = c.ScheduleClient().GetHandle(ctx, JanitorScheduleID).Update(ctx, client.ScheduleUpdateOptions{
			DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
				if a, ok := in.Description.Schedule.Action.(*client.ScheduleWorkflowAction); ok && len(a.Args) > 0 {
					return nil, temporal.ErrSkipScheduleUpdate // made by this refuel, or another worker got there first
				}
				in.Description.Schedule.Spec = &spec
				in.Description.Schedule.Action = action
				return &client.ScheduleUpdate{Schedule: &in.Description.Schedule}, nil
			},
		})
	}
	if err != nil {
		return fmt.Errorf("janitor schedule: %w", err)
	}
	return nil
}
