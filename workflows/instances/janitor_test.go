package instances

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/workflows"
)

// One janitor workflow passes every Every for its Span, so the list gains
// a janitor row per span; one started without input (by an older
// schedule) passes once.
func TestJanitorPassesForItsSpan(t *testing.T) {
	cases := map[string]struct {
		in     *JanitorInput
		passes int32
	}{
		"an older schedule's": {in: nil, passes: 1},
		"every minute for 5":  {in: &JanitorInput{Every: time.Minute, Span: 5 * time.Minute}, passes: 5},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.RegisterWorkflowWithOptions(Janitor, workflow.RegisterOptions{Name: workflows.JanitorName})
			var passes atomic.Int32
			env.RegisterActivityWithOptions(func(context.Context) ([]activities.ManagedInstance, error) {
				passes.Add(1)
				return nil, nil
			}, activity.RegisterOptions{Name: activities.ListManagedName})
			if tc.in == nil {
				env.ExecuteWorkflow(workflows.JanitorName)
			} else {
				env.ExecuteWorkflow(workflows.JanitorName, tc.in)
			}
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if got := passes.Load(); got != tc.passes {
				t.Errorf("%d passes; want %d", got, tc.passes)
			}
		})
	}
}
