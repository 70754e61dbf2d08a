package main

import (
	"bytes"
	"testing"

	"refuel/jobs"
)

// The list shows runs by their steps and tier, services by their
// replicas and no tier: a service has none (the RefuelTier its
// placement matches is for filters).
func TestListView(t *testing.T) {
	ready, desired := 2, 3
	rows := []jobs.ListRow{
		{ID: "llama", Type: "training", State: "running", Team: "nlp", Tier: "deadline", Priority: 80, Step: 120, TotalSteps: 300, CostUSD: 0.31},
		{ID: "killed", Type: "training", State: "terminated", Team: "nlp", Tier: "deadline", Priority: 50, CostUSD: 0.25},
		{ID: "chat", Type: "service", State: "running", Team: "web", Tier: "deadline", Priority: 90, CostUSD: 1.5, ReadyReplicas: &ready, DesiredReplicas: &desired},
	}
	var out bytes.Buffer
	printRows(&out, rows)
	golden(t, "list.golden", out.String())
}
