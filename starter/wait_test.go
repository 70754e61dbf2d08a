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

// How each kind of ending reads: a stopped service as stopped, a run on a
// market's clock by the market's work and bill.
func TestEndingLines(t *testing.T) {
	market, err := json.Marshal(marketRun(true))
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		e    jobs.Ending
		want string
	}{
		"a stopped service": {
			jobs.Ending{ID: "chat-13b", Type: "service", Result: jobs.ResultCancelled, State: "stopped", Status: json.RawMessage(`{"cost_usd":0.1234}`)},
			"chat-13b stopped, cost $0.1234",
		},
		"a service cancelled otherwise": {
			jobs.Ending{ID: "chat-13b", Type: "service", Result: jobs.ResultCancelled, State: "cancelled"},
			"chat-13b cancelled",
		},
		"a run on a market's clock": {
			jobs.Ending{ID: "llama-48h", Type: "training", Result: jobs.ResultCompleted, State: "completed", Status: market},
			"llama-48h completed, 48.0 of 48.0 h of work in market time (deadline met, finished at 51.83 h of 52.00 h), cost $124.66 on the market's clock",
		},
	} {
		if got := endingLine(tc.e); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", name, got, tc.want)
		}
	}
}
