package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"refuel/jobs"
)

func TestReportEndingFailsUnlessTheRunCompleted(t *testing.T) {
	for _, result := range []string{jobs.ResultCompleted, jobs.ResultFailed, jobs.ResultCancelled, jobs.ResultTerminated, jobs.ResultTimedOut} {
		e := jobs.Ending{ID: "job-1", Type: "training", Result: result, State: result}
		var out bytes.Buffer
		err := reportEnding(&out, e, true)
		var ended *jobs.EndedError
		if got, want := errors.As(err, &ended), result != jobs.ResultCompleted; got != want {
			t.Errorf("%s: reportEnding error %v; want a failure: %v", result, err, want)
		}
		var printed map[string]any
		if err := json.Unmarshal(out.Bytes(), &printed); err != nil || printed["result"] != result || printed["id"] != "job-1" {
			t.Errorf("%s: --json printed %q (%v)", result, out.String(), err)
		}
	}
}

func TestEndingLineSaysWhereTheRunGotAndWhy(t *testing.T) {
	e := jobs.Ending{
		ID: "llama", Type: "training", Result: jobs.ResultFailed, State: "failed:quota", Error: "no offering could be acquired (quota)",
		Status: json.RawMessage(`{"step":120,"total_steps":300,"cost_usd":0.5,"last_checkpoint":{"step":100}}`),
	}
	want := "llama failed (state failed:quota), step 120 of 300, last checkpoint at step 100, cost $0.5000: no offering could be acquired (quota)"
	if got := endingLine(e); got != want {
		t.Errorf("endingLine:\n got %s\nwant %s", got, want)
	}
}
