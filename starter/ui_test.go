package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestUIPrintsEachViewWithItsLink(t *testing.T) {
	var out bytes.Buffer
	printViews(&out, "https://temporal.example.com", "team-b")
	for _, want := range []string{
		"runs waiting for capacity\n  WorkflowType=\"TrainingRun\" AND (RefuelState STARTS_WITH \"waiting-for-capacity\"",
		"https://temporal.example.com/namespaces/team-b/workflows?query=WorkflowType%3D%22TrainingRun%22+AND+RefuelState%3D%22running%22+AND+ExecutionStatus%21%3D%22ContinuedAsNew%22\n",
		"the capacity pool\n  https://temporal.example.com/namespaces/team-b/workflows/refuel-capacity-pool\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
