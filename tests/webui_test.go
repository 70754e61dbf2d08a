package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	"refuel/workflows/training"

	"go.temporal.io/api/enums/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/converter"

	"refuel/jobs"
	"refuel/pkg/spec"
	"refuel/workflows"
)

// TestTheWebUITellsTheStory reads a run the way the Web UI does: its
// static summary and details, its current details while it trains, the
// descriptions of its signals, updates and queries, and a summary on
// each activity and timer of its history.
func TestTheWebUITellsTheStory(t *testing.T) {
	parallel(t) // a stack of its own; it mostly waits
	s := startStack(t, nil)
	ctx := context.Background()
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	js := quickJob("ui-story", spec.TierFlexible)
	js.Work = spec.Duration(12 * time.Second) // still running when its current details are read
	run, err := jobs.Submit(ctx, s.Client, js)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.WaitFor(wctx, s.Client, js.ID, func(st training.Status) bool { return st.State == workflows.StateRunning }); err != nil {
		t.Fatal(err)
	}
	dc := converter.GetDefaultDataConverter()
	text := func(p interface{ GetData() []byte }) string { return string(p.GetData()) }

	desc, err := s.Client.DescribeWorkflowExecution(wctx, js.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	md := desc.GetExecutionConfig().GetUserMetadata()
	var summary, details string
	_ = dc.FromPayload(md.GetSummary(), &summary)
	_ = dc.FromPayload(md.GetDetails(), &details)
	if !strings.Contains(summary, js.ID) || !strings.Contains(summary, "flexible") || !strings.Contains(details, "**tier** flexible") {
		t.Errorf("static summary %q and details %q; want the job, its tier and what it may use", summary, details)
	}

	v, err := s.Client.QueryWorkflow(wctx, js.ID, "", "__temporal_workflow_metadata")
	if err != nil {
		t.Fatal(err)
	}
	var meta sdkpb.WorkflowMetadata
	if err := v.Get(&meta); err != nil {
		t.Fatal(err)
	}
	if cur := meta.GetCurrentDetails(); !strings.Contains(cur, "**running**") || !strings.Contains(cur, "spot gpu.1x in") || !strings.Contains(cur, "attempt 1") {
		t.Errorf("current details while training: %q; want the phase, the instance and the attempt", cur)
	}
	described := map[string]string{}
	for _, d := range meta.GetDefinition().GetSignalDefinitions() {
		described[d.GetName()] = d.GetDescription()
	}
	for _, d := range meta.GetDefinition().GetUpdateDefinitions() {
		described[d.GetName()] = d.GetDescription()
	}
	for _, d := range meta.GetDefinition().GetQueryDefinitions() {
		described[d.GetName()] = d.GetDescription()
	}
	for _, name := range []string{workflows.SignalPause, workflows.SignalResume, workflows.UpdatePriority, workflows.UpdateBudget, workflows.QueryStatus} {
		if described[name] == "" {
			t.Errorf("%s has no description (handlers: %v)", name, described)
		}
	}

	if err := run.Get(wctx, nil); err != nil {
		t.Fatal(err)
	}
	var activities []string
	iter := s.Client.GetWorkflowHistory(wctx, js.ID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetEventType() != enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
			continue
		}
		name := ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
		var sum string
		if p := ev.GetUserMetadata().GetSummary(); p != nil {
			_ = dc.FromPayload(p, &sum)
		}
		if sum == "" {
			t.Errorf("activity %s (event %d) has no summary: %s", name, ev.GetEventId(), text(ev.GetUserMetadata().GetSummary()))
		}
		activities = append(activities, sum)
	}
	joined := strings.Join(activities, " | ")
	for _, want := range []string{"acquire (attempt 1): spot gpu.1x in", "train attempt 1 on", "release "} {
		if !strings.Contains(joined, want) {
			t.Errorf("activity summaries %q lack %q", joined, want)
		}
	}
}
