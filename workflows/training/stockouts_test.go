package training

import (
	"strings"
	"testing"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
	"refuel/workflows"
	"refuel/workflows/workload"
)

func TestFoldStockOuts(t *testing.T) {
	at := time.Date(2026, 4, 27, 18, 27, 34, 0, time.UTC)
	out := workload.Failure{Class: string(capacity.NoCapacity), Offering: "sim/p3.2xlarge/us-west-2a/spot", Time: at}
	quota := workload.Failure{Class: string(capacity.Quota), Offering: "aws/p3.2xlarge/us-east-1a/on-demand", Time: at}
	cases := map[string]struct {
		failures []workload.Failure
		counted  *workload.StockOuts
		rest     int
		want     string
	}{
		"counted":               {failures: []workload.Failure{out, quota}, counted: &workload.StockOuts{Count: 18, Last: at, Zone: "us-west-2a"}, rest: 1, want: "stock-outs: 18, last 18:27:34 in us-west-2a"},
		"listed only (older)":   {failures: []workload.Failure{out, quota, out}, rest: 1, want: "stock-outs: 2, last 18:27:34 in us-west-2a"},
		"failures that are not": {failures: []workload.Failure{quota}, rest: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rest, so := workload.FoldStockOuts(tc.failures, tc.counted)
			got := ""
			if so != nil {
				got = so.String()
			}
			if len(rest) != tc.rest || got != tc.want {
				t.Errorf("got %d failures and %q; want %d and %q", len(rest), got, tc.rest, tc.want)
			}
		})
	}
}

// A run's details say what it met while it runs, and only what ended it
// once it has ended.
func TestDetailsClearWhenTheRunEnds(t *testing.T) {
	at := time.Date(2026, 4, 27, 18, 27, 34, 0, time.UTC)
	base := func(state workflows.State) *run {
		r := runOf("j", "")
		r.spec = spec.JobSpec{ID: "j", Team: "t", Tier: spec.TierFlexible}
		r.RunRecord = RunRecord{State: state, Record: workload.Record{Failures: []workload.Failure{{Class: string(capacity.NoCapacity), Offering: "sim/p3.2xlarge/us-west-2a/spot", Message: "We currently do not have sufficient capacity", Time: at}}, StockOuts: &workload.StockOuts{Count: 18, Last: at, Zone: "us-west-2a"}}}
		r.Offerings = []capacity.Offering{{Provider: "sim", InstanceType: "p3.2xlarge", Zone: "us-west-2a", Market: capacity.Spot},
			{Provider: "gce", InstanceType: "a3-highgpu-1g", Zone: "us-central1-a", Market: capacity.Spot}}
		return r
	}
	cases := map[string]struct {
		r        *run
		want     []string
		wantNone []string
	}{
		"waiting": {r: base(workflows.StateWaiting), want: []string{"stock-outs: 18, last 18:27:34 UTC in us-west-2a",
			"may acquire: sim spot p3.2xlarge in us-west-2a", "gce spot a3-highgpu-1g in us-central1-a"}, wantNone: []string{"sufficient"}},
		"waiting, until": {r: func() *run {
			r := base(workflows.StateWaiting)
			until := at.Add(40 * time.Second)
			r.WaitingUntil, r.WaitingOn = &until, string(capacity.NoCapacity)
			return r
		}(), want: []string{"waits out no-capacity until 18:28:14 UTC, then tries its offerings again"}},
		"completed": {r: base(workflows.StateCompleted), wantNone: []string{"stock-outs", "may acquire", "last failure"}},
		"paused":    {r: func() *run { r := base(workflows.StatePaused); r.Paused = true; return r }(), want: []string{"**paused** ·"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.r.details(at)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("details lack %q:\n%s", w, got)
				}
			}
			for _, w := range tc.wantNone {
				if strings.Contains(got, w) {
					t.Errorf("details have %q:\n%s", w, got)
				}
			}
		})
	}
}
