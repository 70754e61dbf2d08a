package main

import (
	"testing"

	"refuel/pkg/capacity"
	"refuel/workflows"
)

// An attempt counts as lost on a healthy instance when it restarted for
// any cause but a market that took its instance without the run seeing
// the notice; control-plane restarts count, though max_restarts does not
// cap them.
func TestHealthyAttemptsLost(t *testing.T) {
	for name, tc := range map[string]struct {
		st    workflows.Status
		taken int
		want  int
	}{
		"untouched":                        {workflows.Status{}, 0, 0},
		"preempted with notice":            {workflows.Status{RunRecord: workflows.RunRecord{Record: workflows.Record{Preemptions: 1}}}, 1, 0},
		"taken before the notice was seen": {workflows.Status{RunRecord: workflows.RunRecord{Record: workflows.Record{Restarts: workflows.Restarts{capacity.InstanceLost: 1}}}}, 1, 0},
		"agent fault on a healthy one":     {workflows.Status{RunRecord: workflows.RunRecord{Record: workflows.Record{Restarts: workflows.Restarts{capacity.AgentFault: 1}}}}, 0, 1},
		"control plane":                    {workflows.Status{RunRecord: workflows.RunRecord{Record: workflows.Record{Restarts: workflows.Restarts{capacity.ControlPlane: 2}}}}, 0, 2},
		"both":                             {workflows.Status{RunRecord: workflows.RunRecord{Record: workflows.Record{Preemptions: 1, Restarts: workflows.Restarts{capacity.AgentFault: 1, capacity.InstanceLost: 1}}}}, 2, 1},
	} {
		if got := healthyLost(tc.st, tc.taken); got != tc.want {
			t.Errorf("%s: %d healthy attempts lost; want %d", name, got, tc.want)
		}
	}
}
