package main

import (
	"bytes"
	"strings"
	"testing"

	"refuel/workflows"
)

func TestPrintStatusShowsChangeoversWhenThereAreAny(t *testing.T) {
	for _, n := range []int{0, 2} {
		var out bytes.Buffer
		printStatus(&out, workflows.Status{ID: "job-1", State: workflows.StateRunning, Changeovers: n}, 0)
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
	st := workflows.Status{ID: "job-1", State: workflows.StateRunning, NodeReplacements: 1,
		Instance: node(0, "i-1", "us-east-1a").Instance,
		Nodes:    []workflows.NodeStatus{node(0, "i-1", "us-east-1a"), node(1, "i-3", "us-east-1a")}}
	var out bytes.Buffer
	printStatus(&out, st, 0)
	for _, want := range []string{"nodes      2, 1 replaced", "rank 0   i-1", "rank 1   i-3", "zone us-east-1a, spot"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "instance   ") {
		t.Errorf("a gang's status names each node, not one instance:\n%s", out.String())
	}
	if line := statusLine(st, 0); !strings.Contains(line, "i-1 (spot) and 1 more node ") {
		t.Errorf("status line %q; want rank 0 and the count of the others", line)
	}
}

func TestPrintStatusSaysWhyTheMarketWasChosen(t *testing.T) {
	why := "on-demand: 3.1 h slack left, spot in us-west-2b expected back in 4 h"
	for _, m := range []*workflows.MarketStatus{nil, {Clock: workflows.ClockWall, Why: why}} {
		var out bytes.Buffer
		printStatus(&out, workflows.Status{ID: "job-1", State: workflows.StateRunning, Market: m}, 0)
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
		"a fault":       {workflows.Restarts{Agent: 1}, "restarts   trainer 0, agent 1, instance lost 0 (max_restarts caps these); control plane 0"},
		"control plane": {workflows.Restarts{ControlPlane: 2}, "restarts   trainer 0, agent 0, instance lost 0 (max_restarts caps these); control plane 2"},
	} {
		var out bytes.Buffer
		printStatus(&out, workflows.Status{ID: "job-1", State: workflows.StateRunning, Restarts: tc.r}, 0)
		if got := strings.Contains(out.String(), "restarts   "); got != (tc.want != "") || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%s: output\n%s", name, out.String())
		}
	}
}
