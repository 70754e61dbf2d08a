package jobs

import (
	"errors"
	"strings"
	"testing"

	"refuel/workflows/training"
	"refuel/workflows/workload"

	"refuel/workflows"
)

func TestInstanceOfPicksTheRankAskedFor(t *testing.T) {
	one := training.Status{RunRecord: training.RunRecord{ID: "solo", State: workflows.StateRunning}, Instance: &workload.InstanceRef{ID: "i-1"}}
	gang := training.Status{RunRecord: training.RunRecord{ID: "gang", State: workflows.StateRunning}, Instance: &workload.InstanceRef{ID: "i-a"}, Nodes: []training.NodeStatus{
		{Rank: 0, Instance: &workload.InstanceRef{ID: "i-a"}}, {Rank: 1, Instance: &workload.InstanceRef{ID: "i-b"}},
	}}
	for name, tc := range map[string]struct {
		st      training.Status
		node    int
		want    string
		wantErr string
	}{
		"one node":             {st: one, want: "i-1"},
		"one node, rank 1":     {st: one, node: 1, wantErr: "its only rank is 0"},
		"gang rank 1":          {st: gang, node: 1, want: "i-b"},
		"gang rank 2":          {st: gang, node: 2, wantErr: "ranks 0..1"},
		"waiting for capacity": {st: training.Status{RunRecord: training.RunRecord{ID: "w", State: workflows.StateAcquiring}}, wantErr: "holds no instance"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := instanceOf(tc.st, tc.node)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v; want it to say %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	var nh *NotHoldingError
	if _, err := instanceOf(training.Status{RunRecord: training.RunRecord{ID: "w", State: workflows.StatePaused}}, 0); !errors.As(err, &nh) {
		t.Errorf("a paused run: %v; want a *NotHoldingError", err)
	}
}
