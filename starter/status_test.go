package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/workflows"
)

func TestPrintStatusShowsChangeoversWhenThereAreAny(t *testing.T) {
	for _, n := range []int{0, 2} {
		var out bytes.Buffer
		printStatus(&out, workflows.Status{RunRecord: workflows.RunRecord{ID: "job-1", State: workflows.StateRunning, Changeovers: n}}, activities.Progress{})
		got := strings.Contains(out.String(), "moved      2 times from on-demand back to spot")
		if got != (n > 0) {
			t.Errorf("changeovers %d: output\n%s", n, out.String())
		}
	}
}

func TestPrintStatusShowsEachNodeOfAGang(t *testing.T) {
	node := func(rank int, id, zone string) workflows.NodeStatus {
		return workflows.NodeStatus{Rank: rank, Instance: &workflows.InstanceRef{ID: id, Offering: "sim/gpu.1x/" + zone + "/spot", Market: "spot", Zone: zone, PricePerHour: 1}}
	}
	st := workflows.Status{RunRecord: workflows.RunRecord{ID: "job-1", State: workflows.StateRunning, Record: workflows.Record{NodeReplacements: 1}}, Instance: node(0, "i-1", "us-east-1a").Instance, Nodes: []workflows.NodeStatus{node(0, "i-1", "us-east-1a"), node(1, "i-3", "us-east-1a")}}
	var out bytes.Buffer
	printStatus(&out, st, activities.Progress{})
	for _, want := range []string{"nodes      2, 1 replaced", "rank 0   i-1", "rank 1   i-3", "zone us-east-1a, spot"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "instance   ") {
		t.Errorf("a gang's status names each node, not one instance:\n%s", out.String())
	}
	if line := statusLine(st, activities.Progress{}); !strings.Contains(line, "i-1 (spot) and 1 more node ") {
		t.Errorf("status line %q; want rank 0 and the count of the others", line)
	}
}

func TestPrintStatusSaysWhyTheMarketWasChosen(t *testing.T) {
	why := "on-demand: 3.1 h slack left, spot in us-west-2b expected back in 4 h"
	for _, m := range []*workflows.MarketStatus{nil, {Clock: workflows.ClockWall, Why: why}} {
		var out bytes.Buffer
		printStatus(&out, workflows.Status{RunRecord: workflows.RunRecord{ID: "job-1", State: workflows.StateRunning}, Market: m}, activities.Progress{})
		if got := strings.Contains(out.String(), "market     "+why); got != (m != nil) {
			t.Errorf("market %+v: output\n%s", m, out.String())
		}
	}
}

// Restarts show when there are any, the control plane's apart from the
// faults max_restarts caps.
func TestPrintStatusShowsRestartsWhenThereAreAny(t *testing.T) {
	for name, tc := range map[string]struct {
		r    workflows.Restarts
		want string
	}{
		"none":          {workflows.Restarts{}, ""},
		"a fault":       {workflows.Restarts{capacity.AgentFault: 1}, "restarts   trainer 0, agent 1, instance lost 0 (max_restarts caps these); control plane 0, node lost 0"},
		"control plane": {workflows.Restarts{capacity.ControlPlane: 2}, "restarts   trainer 0, agent 0, instance lost 0 (max_restarts caps these); control plane 2, node lost 0"},
	} {
		var out bytes.Buffer
		printStatus(&out, workflows.Status{RunRecord: workflows.RunRecord{ID: "job-1", State: workflows.StateRunning, Record: workflows.Record{Restarts: tc.r}}}, activities.Progress{})
		if got := strings.Contains(out.String(), "restarts   "); got != (tc.want != "") || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%s: output\n%s", name, out.String())
		}
	}
}

func TestPrintStatusFoldsStockOuts(t *testing.T) {
	at := time.Date(2026, 4, 27, 18, 27, 34, 0, time.Local)
	stockOut := workflows.Failure{Class: "no-capacity", Offering: "sim/p3.2xlarge/us-west-2a/spot", Message: "We currently do not have sufficient capacity", Time: at}
	quota := workflows.Failure{Class: "quota", Offering: "aws/p4d.24xlarge/us-east-1a/on-demand", Message: "vCPU limit", Time: at}
	cases := map[string]struct {
		st       workflows.Status
		want     []string
		wantNone []string
	}{
		"counted by the run": {
			st:       workflows.Status{RunRecord: workflows.RunRecord{Record: workflows.Record{Failures: []workflows.Failure{stockOut, quota}, StockOuts: &workflows.StockOuts{Count: 18, Last: at, Offering: stockOut.Offering, Zone: "us-west-2a"}}}},
			want:     []string{"stock-outs: 18, last 18:27:34 in us-west-2a\n", "failure    18:27:34 quota"},
			wantNone: []string{"no-capacity", "sufficient"},
		},
		"recorded before runs counted them": {
			st:       workflows.Status{RunRecord: workflows.RunRecord{Record: workflows.Record{Failures: []workflows.Failure{stockOut, stockOut, stockOut}}}},
			want:     []string{"stock-outs: 3, last 18:27:34 in us-west-2a\n"},
			wantNone: []string{"failure "},
		},
		"none": {st: workflows.Status{}, wantNone: []string{"stock-outs", "failure "}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			printStatus(&out, tc.st, activities.Progress{})
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("status lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tc.wantNone {
				if strings.Contains(out.String(), w) {
					t.Errorf("status has %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestPrintStatusProgressFromTheHeartbeat(t *testing.T) {
	cases := map[string]struct {
		st    workflows.Status
		live  activities.Progress
		state string
		want  string
	}{
		"before the first checkpoint": {st: workflows.Status{RunRecord: workflows.RunRecord{State: workflows.StateRunning}}, live: activities.Progress{Step: 120, TotalSteps: 900}, state: "running\n", want: "step 120 of 900"},
		"paused":                      {st: workflows.Status{RunRecord: workflows.RunRecord{State: workflows.StatePaused, Record: workflows.Record{Step: 300, TotalSteps: 900}}, Paused: true}, state: "paused\n", want: "step 300 of 900"},
		"pausing":                     {st: workflows.Status{RunRecord: workflows.RunRecord{State: workflows.StateRunning, Record: workflows.Record{Step: 300, TotalSteps: 900}}, Paused: true}, live: activities.Progress{Step: 310, TotalSteps: 900}, state: "running (pausing)\n", want: "step 310 of 900"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			printStatus(&out, tc.st, tc.live)
			if !strings.Contains(out.String(), "state      "+tc.state) || !strings.Contains(out.String(), tc.want) {
				t.Errorf("status:\n%s\nwant state %q and %q", out.String(), tc.state, tc.want)
			}
		})
	}
}
