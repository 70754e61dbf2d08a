package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.temporal.io/api/enums/v1"
)

func TestOnlyACompletedRunIsASuccess(t *testing.T) {
	for status, want := range map[enums.WorkflowExecutionStatus]struct {
		result string
		fails  bool
	}{
		enums.WORKFLOW_EXECUTION_STATUS_COMPLETED:  {resultCompleted, false},
		enums.WORKFLOW_EXECUTION_STATUS_FAILED:     {resultFailed, true},
		enums.WORKFLOW_EXECUTION_STATUS_CANCELED:   {resultCancelled, true},
		enums.WORKFLOW_EXECUTION_STATUS_TERMINATED: {resultTerminated, true},
		enums.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:  {resultTimedOut, true},
	} {
		e := Ending{ID: "job-1", Type: "training", Result: resultOf(status), State: resultOf(status)}
		if e.Result != want.result {
			t.Errorf("%s: result %q; want %q", status, e.Result, want.result)
		}
		var out bytes.Buffer
		err := reportEnding(&out, e, true)
		var ended *EndedError
		if got := errors.As(err, &ended); got != want.fails {
			t.Errorf("%s: reportEnding error %v; want a failure: %v", status, err, want.fails)
		}
		var printed map[string]any
		if err := json.Unmarshal(out.Bytes(), &printed); err != nil || printed["result"] != want.result || printed["id"] != "job-1" {
			t.Errorf("%s: --json printed %q (%v)", status, out.String(), err)
		}
	}
}

func TestEndingLineSaysWhereTheRunGotAndWhy(t *testing.T) {
	e := Ending{
		ID: "llama", Type: "training", Result: resultFailed, State: "failed:quota", Error: "no offering could be acquired (quota)",
		Status: json.RawMessage(`{"step":120,"total_steps":300,"cost_usd":0.5,"last_checkpoint":{"step":100}}`),
	}
	want := "llama failed (state failed:quota), step 120 of 300, last checkpoint at step 100, cost $0.5000: no offering could be acquired (quota)"
	if got := endingLine(e); got != want {
		t.Errorf("endingLine:\n got %s\nwant %s", got, want)
	}
	if got := (&EndedError{Ending: e}).Error(); !strings.HasPrefix(got, "llama failed (state failed:quota): no offering") {
		t.Errorf("EndedError: %s", got)
	}
}

func TestFailureMessageIsTheInnermostCause(t *testing.T) {
	inner := errors.New("resources.gpus 9: no offering has that many")
	wrapped := wrapErr{"workflow execution error", wrapErr{"activity error", inner}}
	if got := failureMessage(wrapped); got != inner.Error() {
		t.Errorf("failureMessage: %q", got)
	}
	if failureMessage(nil) != "" {
		t.Error("failureMessage(nil) is not empty")
	}
}

type wrapErr struct {
	msg   string
	cause error
}

func (e wrapErr) Error() string { return e.msg + ": " + e.cause.Error() }
func (e wrapErr) Unwrap() error { return e.cause }
