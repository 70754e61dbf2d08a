package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"refuel/workflows/training"
	"refuel/workflows/workload"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/estimate"
	"refuel/pkg/replay"
	"refuel/workflows"
)

func TestPrintStatusShowsChangeoversWhenThereAreAny(t *testing.T) {
	for _, n := range []int{0, 2} {
		var out bytes.Buffer
		printStatus(&out, training.Status{RunRecord: training.RunRecord{ID: "job-1", State: workflows.StateRunning, Changeovers: n}})
		got := strings.Contains(out.String(), "moved      2 times from on-demand back to spot")
		if got != (n > 0) {
			t.Errorf("changeovers %d: output\n%s", n, out.String())
		}
	}
}

func TestPrintStatusShowsEachNodeOfAGang(t *testing.T) {
	node := func(rank int, id, zone string) training.NodeStatus {
		return training.NodeStatus{Rank: rank, Instance: &workload.InstanceRef{ID: id, Offering: "sim/gpu.1x/" + zone + "/spot", Market: "spot", Zone: zone, PricePerHour: 1}}
	}
	st := training.Status{RunRecord: training.RunRecord{ID: "job-1", State: workflows.StateRunning, Record: workload.Record{NodeReplacements: 1}}, Instance: node(0, "i-1", "us-east-1a").Instance, Nodes: []training.NodeStatus{node(0, "i-1", "us-east-1a"), node(1, "i-3", "us-east-1a")}}
	var out bytes.Buffer
	printStatus(&out, st)
	for _, want := range []string{"nodes      2, 1 replaced", "rank 0   i-1", "rank 1   i-3", "zone us-east-1a, spot"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "instance   ") {
		t.Errorf("a gang's status names each node, not one instance:\n%s", out.String())
	}
	if line := statusLine(st, time.Now()); !strings.Contains(line, "i-1 (spot) and 1 more node ") {
		t.Errorf("status line %q; want rank 0 and the count of the others", line)
	}
}

func TestPrintStatusSaysWhyTheMarketWasChosen(t *testing.T) {
	why := "on-demand: 3.1 h slack left, spot in us-west-2b expected back in 4 h"
	for _, m := range []*workload.MarketStatus{nil, {Clock: workload.ClockWall, Why: why}} {
		var out bytes.Buffer
		printStatus(&out, training.Status{RunRecord: training.RunRecord{ID: "job-1", State: workflows.StateRunning}, Market: m})
		if got := strings.Contains(out.String(), "market     "+why); got != (m != nil) {
			t.Errorf("market %+v: output\n%s", m, out.String())
		}
	}
}

// Restarts show when there are any, the control plane's apart from the
// faults max_restarts caps.
func TestPrintStatusShowsRestartsWhenThereAreAny(t *testing.T) {
	for name, tc := range map[string]struct {
		r    workload.Restarts
		want string
	}{
		"none":          {workload.Restarts{}, ""},
		"a fault":       {workload.Restarts{capacity.AgentFault: 1}, "restarts   trainer 0, agent 1, instance lost 0 (max_restarts caps these); control plane 0, node lost 0"},
		"control plane": {workload.Restarts{capacity.ControlPlane: 2}, "restarts   trainer 0, agent 0, instance lost 0 (max_restarts caps these); control plane 2, node lost 0"},
	} {
		var out bytes.Buffer
		printStatus(&out, training.Status{RunRecord: training.RunRecord{ID: "job-1", State: workflows.StateRunning, Record: workload.Record{Restarts: tc.r}}})
		if got := strings.Contains(out.String(), "restarts   "); got != (tc.want != "") || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%s: output\n%s", name, out.String())
		}
	}
}

func TestPrintStatusFoldsStockOuts(t *testing.T) {
	at := time.Date(2026, 4, 27, 18, 27, 34, 0, time.Local)
	stockOut := workload.Failure{Class: "no-capacity", Offering: "sim/p3.2xlarge/us-west-2a/spot", Message: "We currently do not have sufficient capacity", Time: at}
	quota := workload.Failure{Class: "quota", Offering: "aws/p4d.24xlarge/us-east-1a/on-demand", Message: "vCPU limit", Time: at}
	cases := map[string]struct {
		st       training.Status
		want     []string
		wantNone []string
	}{
		"counted by the run": {
			st:       training.Status{RunRecord: training.RunRecord{Record: workload.Record{Failures: []workload.Failure{stockOut, quota}, StockOuts: &workload.StockOuts{Count: 18, Last: at, Offering: stockOut.Offering, Zone: "us-west-2a"}}}},
			want:     []string{"stock-outs: 18, last 18:27:34 in us-west-2a\n", "failure    18:27:34 quota"},
			wantNone: []string{"no-capacity", "sufficient"},
		},
		"recorded before runs counted them": {
			st:       training.Status{RunRecord: training.RunRecord{Record: workload.Record{Failures: []workload.Failure{stockOut, stockOut, stockOut}}}},
			want:     []string{"stock-outs: 3, last 18:27:34 in us-west-2a\n"},
			wantNone: []string{"failure "},
		},
		"none": {st: training.Status{}, wantNone: []string{"stock-outs", "failure "}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			printStatus(&out, tc.st)
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

// viewTime is when the views' fixtures happened.
var viewTime = time.Date(2026, 11, 27, 14, 5, 0, 0, time.UTC)

// marketRun is a 48 h deadline run on the sim's market clock (worker
// --sim-market-time): its trainer took 102 steps of wall time while the
// market's clock went through 51.83 hours.
func marketRun(finished bool) training.Status {
	st := training.Status{
		RunRecord: training.RunRecord{
			ID: "llama-48h", Team: "nlp", Tier: "deadline", State: workflows.StateCompleted, Priority: 50,
			Record: workload.Record{
				Step: 102, TotalSteps: 1728000, Preemptions: 2, Recoveries: 2, LostWorkSecs: 1.5,
				LastCheckpoint: &activities.CheckpointRef{Step: 100, Time: viewTime, URL: "file:///srv/refuel/checkpoints/llama-48h/step-100"},
			},
		},
		CostUSD: 0.0085,
		Market: &workload.MarketStatus{
			Clock: workload.ClockMarket, Policy: "refuel", TickSeconds: 600,
			Job:     replay.Job{Tier: "deadline", Work: 48 * time.Hour, Deadline: 52 * time.Hour, SpotPrice: 0.9701, OnDemandPrice: 3.06},
			CostUSD: 124.66, SpotHours: 38.2, OnDemandHours: 13.63, Preemptions: 2, Changeovers: 3,
			DoneHours: 48, Finished: true, FinishHours: 51.83, DeadlineMet: true,
			Decisions: make([]workload.MarketDecision, 311),
		},
	}
	if !finished {
		st.State, st.Step = workflows.StateRunning, 40
		st.Instance = &workload.InstanceRef{ID: "i-0a1b", Offering: "sim/p3.2xlarge/us-west-2a/spot", Market: "spot", Zone: "us-west-2a", PricePerHour: 0.9701, Since: viewTime}
		m := st.Market
		m.CostUSD, m.SpotHours, m.OnDemandHours, m.DoneHours, m.Finished, m.FinishHours, m.DeadlineMet = 21.4, 19.5, 0.8, 18.25, false, 0, false
		m.Decisions = m.Decisions[:122]
		m.Why = "spot in us-west-2a: 31.7 h slack left"
	}
	return st
}

// The plain status of each kind of run, whole: a run on the wall clock
// (pausing), one over its budget, and runs on a market's clock, whose
// progress, deadline and bill are the market's.
func TestStatusViews(t *testing.T) {
	overBudget := training.Status{
		RunRecord: training.RunRecord{
			ID: "example-deadline-1", Team: "vision", Tier: "deadline", State: workflows.StateOverBudget, Priority: 60,
			BudgetUSD: 5, StoreURL: "file:///srv/refuel/checkpoints",
			Record: workload.Record{
				Step: 610, TotalSteps: 900, Preemptions: 1, Recoveries: 1, LostWorkSecs: 3.2,
				LastCheckpoint: &activities.CheckpointRef{Step: 600, Time: viewTime, URL: "file:///srv/refuel/checkpoints/example-deadline-1/step-600"},
			},
		},
		CostUSD: 5.0123,
	}
	pausing := training.Status{
		RunRecord: training.RunRecord{
			ID: "llama-ft-0427", Team: "nlp", Tier: "flexible", State: workflows.StateRunning, Priority: 50, BudgetUSD: 20,
			Record: workload.Record{
				Step: 310, TotalSteps: 1200,
				LastCheckpoint: &activities.CheckpointRef{Step: 300, Time: viewTime, URL: "file:///srv/refuel/checkpoints/llama-ft-0427/step-300"},
			},
		},
		Paused: true, CostUSD: 0.0312,
		Instance: &workload.InstanceRef{ID: "i-9f8e", Offering: "sim/p3.2xlarge/us-west-2b/spot", Market: "spot", Zone: "us-west-2b", PricePerHour: 0.9701, Since: viewTime},
	}
	for name, st := range map[string]training.Status{
		"status-pausing":          pausing,
		"status-over-budget":      overBudget,
		"status-market-completed": marketRun(true),
		"status-market-running":   marketRun(false),
	} {
		t.Run(name, func(t *testing.T) {
			var out strings.Builder
			printStatus(&out, st)
			out.WriteString(statusLine(st, viewTime) + "\n")
			golden(t, name+".golden", out.String())
		})
	}
}

func TestPrintStatusShowsTheEstimateBesideTheOutcome(t *testing.T) {
	p50 := 50.0
	e := &estimate.Submitted{Case: estimate.Case{CostUSD: estimate.Spread{P10: 40, P50: 45, P90: 60}, OnDemandCostUSD: 147.49, FinishHours: estimate.Finish{P50: &p50, P90: &p50}}}
	var out bytes.Buffer
	printStatus(&out, training.Status{RunRecord: training.RunRecord{ID: "job-1", State: workflows.StateRunning}, Estimate: e})
	if want := "estimated  at submit: $45.00 (p10 $40.00, p90 $60.00; on-demand $147.49), finish p50 50.0h, p90 50.0h"; !strings.Contains(out.String(), want) || strings.Contains(out.String(), "it cost") {
		t.Errorf("a running run's status:\n%s\nwant %q and no outcome yet", out.String(), want)
	}
	e.Outcome = &estimate.Outcome{CostUSD: 52.5, FinishHours: 49.2, CostWithin: true}
	out.Reset()
	printStatus(&out, training.Status{RunRecord: training.RunRecord{ID: "job-1", State: workflows.StateCompleted}, Estimate: e})
	if want := "it cost $52.50 (within p10..p90) and ended 49.2h after submit"; !strings.Contains(out.String(), want) {
		t.Errorf("a finished run's status:\n%s\nwant %q", out.String(), want)
	}
}
