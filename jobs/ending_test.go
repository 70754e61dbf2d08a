package jobs

import (
	"errors"
	"strings"
	"testing"

	"go.temporal.io/api/enums/v1"

	"refuel/workflows"
)

func TestOnlyACompletedRunIsASuccess(t *testing.T) {
	for status, want := range map[enums.WorkflowExecutionStatus]struct {
		result    string
		completed bool
	}{
		enums.WORKFLOW_EXECUTION_STATUS_COMPLETED:        {ResultCompleted, true},
		enums.WORKFLOW_EXECUTION_STATUS_FAILED:           {ResultFailed, false},
		enums.WORKFLOW_EXECUTION_STATUS_CANCELED:         {ResultCancelled, false},
		enums.WORKFLOW_EXECUTION_STATUS_TERMINATED:       {ResultTerminated, false},
		enums.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:        {ResultTimedOut, false},
		enums.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW: {ResultRunning, false},
	} {
		e := Ending{ID: "job-1", Result: ResultOf(status)}
		if e.Result != want.result || e.Succeeded() != want.completed {
			t.Errorf("%s: result %q succeeded %v; want %q %v", status, e.Result, e.Succeeded(), want.result, want.completed)
		}
	}
}

// A service ends by being stopped: Temporal records a cancellation, its
// state says stopped, and whoever waited on it sees a success. A run or
// service cancelled otherwise is not one.
func TestAStoppedServiceIsASuccess(t *testing.T) {
	for name, tc := range map[string]struct {
		e    Ending
		want bool
	}{
		"stopped service":   {Ending{Type: "service", Result: ResultCancelled, State: "stopped"}, true},
		"cancelled service": {Ending{Type: "service", Result: ResultCancelled, State: "cancelled"}, false},
		"cancelled run":     {Ending{Type: "training", Result: ResultCancelled, State: "cancelled"}, false},
		"failed, stopped":   {Ending{Type: "service", Result: ResultFailed, State: "stopped"}, false},
	} {
		if got := tc.e.Succeeded(); got != tc.want {
			t.Errorf("%s: succeeded %v; want %v", name, got, tc.want)
		}
	}
}

func TestEndedErrorSaysHowAndWhy(t *testing.T) {
	e := Ending{ID: "llama", Type: "training", Result: ResultFailed, State: "failed:quota", Error: "no offering could be acquired (quota)"}
	if got := (&EndedError{Ending: e}).Error(); !strings.HasPrefix(got, "llama failed (state failed:quota): no offering") {
		t.Errorf("EndedError: %s", got)
	}
}

func TestFailureMessageIsTheInnermostCause(t *testing.T) {
	inner := errors.New("resources.gpus 9: no offering has that many")
	wrapped := wrapErr{"workflow execution error", wrapErr{"activity error", inner}}
	if got := FailureMessage(wrapped); got != inner.Error() {
		t.Errorf("FailureMessage: %q", got)
	}
	if FailureMessage(nil) != "" {
		t.Error("FailureMessage(nil) is not empty")
	}
}

type wrapErr struct {
	msg   string
	cause error
}

func (e wrapErr) Error() string { return e.msg + ": " + e.cause.Error() }
func (e wrapErr) Unwrap() error { return e.cause }

func TestAReplicaIsNamedAndPointsAtItsService(t *testing.T) {
	cases := []struct{ id, service string }{
		{"chat/r3", "chat"},
		{"team/chat/r12", "team/chat"},
		{"chat", "chat"},
	}
	for _, c := range cases {
		if got := ServiceOfReplica(c.id); got != c.service {
			t.Errorf("ServiceOfReplica(%q) = %q, want %q", c.id, got, c.service)
		}
	}
	if got := KindName(workflows.ServiceReplicaName); got != "replica" {
		t.Errorf("KindName(ServiceReplica) = %q, want replica", got)
	}
	if got := KindOf(workflows.ServiceReplicaName); got != "a service's replica" {
		t.Errorf("KindOf(ServiceReplica) = %q", got)
	}
}
