package workflows

import (
	"strings"
	"testing"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

func TestFoldStockOuts(t *testing.T) {
	at := time.Date(2026, 4, 27, 18, 27, 34, 0, time.UTC)
	out := Failure{Class: string(capacity.NoCapacity), Offering: "sim/p3.2xlarge/us-west-2a/spot", Time: at}
	quota := Failure{Class: string(capacity.Quota), Offering: "aws/p3.2xlarge/us-east-1a/on-demand", Time: at}
	cases := map[string]struct {
		failures []Failure
		counted  *StockOuts
		rest     int
		want     string
	}{
		"counted":               {failures: []Failure{out, quota}, counted: &StockOuts{Count: 18, Last: at, Zone: "us-west-2a"}, rest: 1, want: "stock-outs: 18, last 18:27:34 in us-west-2a"},
		"listed only (older)":   {failures: []Failure{out, quota, out}, rest: 1, want: "stock-outs: 2, last 18:27:34 in us-west-2a"},
		"failures that are not": {failures: []Failure{quota}, rest: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rest, so := FoldStockOuts(tc.failures, tc.counted)
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
	base := func(state State) *run {
		r := runOf("j", "")
		r.spec = spec.JobSpec{ID: "j", Team: "t", Tier: spec.TierFlexible}
		r.RunRecord = RunRecord{State: state, Record: Record{Failures: []Failure{{Class: string(capacity.NoCapacity), Offering: "sim/p3.2xlarge/us-west-2a/spot", Message: "We currently do not have sufficient capacity", Time: at}}, StockOuts: &StockOuts{Count: 18, Last: at, Zone: "us-west-2a"}}}
		r.Offerings = []capacity.Offering{{Provider: "sim", InstanceType: "p3.2xlarge", Zone: "us-west-2a", Market: capacity.Spot}}
		return r
	}
	cases := map[string]struct {
		r        *run
		want     []string
		wantNone []string
	}{
		"waiting": {r: base(StateWaiting), want: []string{"stock-outs: 18, last 18:27:34 UTC in us-west-2a", "may acquire"}, wantNone: []string{"sufficient"}},
		"waiting, until": {r: func() *run {
			r := base(StateWaiting)
			until := at.Add(40 * time.Second)
			r.WaitingUntil, r.WaitingOn = &until, string(capacity.NoCapacity)
			return r
		}(), want: []string{"waits out no-capacity until 18:28:14 UTC, then tries its offerings again"}},
		"completed": {r: base(StateCompleted), wantNone: []string{"stock-outs", "may acquire", "last failure"}},
		"paused":    {r: func() *run { r := base(StatePaused); r.Paused = true; return r }(), want: []string{"**paused** ·"}},
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
