package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"refuel/workflows"
)

// explainStall logs where a run that overran its bound stands: its
// pending activities and children and the tail of its history, so that a
// run that stalls once in many says why the one time it does.
func explainStall(t *testing.T, c client.Client, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Logf("describe %s: %v", id, err)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "run %s is %s\n", id, desc.GetWorkflowExecutionInfo().GetStatus())
	for _, pa := range desc.GetPendingActivities() {
		fmt.Fprintf(&b, "  pending activity %s: %s, attempt %d, last heartbeat %s, last failure %q\n",
			pa.GetActivityType().GetName(), pa.GetState(), pa.GetAttempt(),
			pa.GetLastHeartbeatTime().AsTime().Format(time.RFC3339), pa.GetLastFailure().GetMessage())
	}
	for _, ch := range desc.GetPendingChildren() {
		fmt.Fprintf(&b, "  pending child %s (%s)\n", ch.GetWorkflowId(), ch.GetWorkflowTypeName())
	}
	// The events that move a run, not its workflow tasks or its
	// trainers' progress.
	var moves []*historypb.HistoryEvent
	for _, ev := range history(ctx, t, c, id) {
		switch ev.GetEventType() {
		case enums.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, enums.EVENT_TYPE_WORKFLOW_TASK_STARTED, enums.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			continue
		}
		if ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == workflows.SignalProgress {
			continue
		}
		moves = append(moves, ev)
	}
	from := max(0, len(moves)-60)
	fmt.Fprintf(&b, "  its last %d moves:\n", len(moves)-from)
	for _, ev := range moves[from:] {
		fmt.Fprintf(&b, "    %d %s %s\n", ev.GetEventId(), ev.GetEventTime().AsTime().Format("15:04:05.000"), brief(ev.String()))
	}
	t.Log(b.String())
}

// brief is an event's attributes cut to a line.
func brief(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 700 {
		s = s[:700] + "…"
	}
	return s
}
