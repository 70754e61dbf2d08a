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
