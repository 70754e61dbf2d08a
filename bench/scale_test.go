package main

import (
	"testing"

	"refuel/workflows/training"
	"refuel/workflows/workload"

	"refuel/pkg/capacity"
)

// An attempt counts as lost on a healthy instance when it restarted for
// any cause but a market that took its instance without the run seeing
// the notice; control-plane restarts count, though max_restarts does not
// cap them.
func TestHealthyAttemptsLost(t *testing.T) {
	for name, tc := range map[string]struct {
		st    training.Status
		taken int
		want  int
	}{
		"untouched":                        {training.Status{}, 0, 0},
		"preempted with notice":            {training.Status{RunRecord: training.RunRecord{Record: workload.Record{Preemptions: 1}}}, 1, 0},
		"taken before the notice was seen": {training.Status{RunRecord: training.RunRecord{Record: workload.Record{Restarts: workload.Restarts{capacity.InstanceLost: 1}}}}, 1, 0},
		"agent fault on a healthy one":     {training.Status{RunRecord: training.RunRecord{Record: workload.Record{Restarts: workload.Restarts{capacity.AgentFault: 1}}}}, 0, 1},
		"control plane":                    {training.Status{RunRecord: training.RunRecord{Record: workload.Record{Restarts: workload.Restarts{capacity.ControlPlane: 2}}}}, 0, 2},
		"both":                             {training.Status{RunRecord: training.RunRecord{Record: workload.Record{Preemptions: 1, Restarts: workload.Restarts{capacity.AgentFault: 1, capacity.InstanceLost: 1}}}}, 2, 1},
	} {
		if got := healthyLost(tc.st, tc.taken); got != tc.want {
			t.Errorf("%s: %d healthy attempts lost; want %d", name, got, tc.want)
		}
	}
}
