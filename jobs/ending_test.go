package jobs

import (
	"errors"
	"strings"
	"testing"

	"go.temporal.io/api/enums/v1"
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
		if e.Result != want.result || e.Completed() != want.completed {
			t.Errorf("%s: result %q completed %v; want %q %v", status, e.Result, e.Completed(), want.result, want.completed)
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
