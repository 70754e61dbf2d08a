package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"refuel/jobs"
)

func TestPrintRowsShowsStepsOfRunsAndReplicasOfServices(t *testing.T) {
	ready, desired := 2, 3
	rows := []jobs.ListRow{
		{ID: "llama", Type: "training", State: "running", Team: "nlp", Tier: "deadline", Priority: 80, Step: 120, TotalSteps: 300, CostUSD: 0.31},
		{ID: "killed", Type: "training", State: "terminated", Team: "nlp", Tier: "deadline", Priority: 50, CostUSD: 0.25},
		{ID: "chat", Type: "service", State: "running", Team: "web", Tier: "critical", Priority: 90, CostUSD: 1.5, ReadyReplicas: &ready, DesiredReplicas: &desired},
	}
	var out bytes.Buffer
	printRows(&out, rows)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	fields := func(i int) []string { return strings.Fields(lines[i]) }
	if diff := cmp.Diff([]string{"llama", "training", "running", "nlp", "deadline", "80", "120/300", "(40%)", "0.3100"}, fields(1)); diff != "" {
		t.Errorf("training line (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"killed", "training", "terminated", "nlp", "deadline", "50", "-", "0.2500"}, fields(2)); diff != "" {
		t.Errorf("terminated line (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"chat", "service", "running", "web", "critical", "90", "2/3", "replicas", "1.5000"}, fields(3)); diff != "" {
		t.Errorf("service line (-want +got):\n%s", diff)
	}
}
