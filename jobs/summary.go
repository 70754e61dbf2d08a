package jobs

import (
	"fmt"
	"strings"

	"refuel/pkg/estimate"
	"refuel/pkg/spec"
)

// The Web UI shows a workflow's static summary in its list of runs and
// its static details on the run's page: what was asked for, fixed for
// the run's life. (What it is doing now is the workflow's own current
// details.)

// jobSummary is a run's one line: what it is and what it may use.
func jobSummary(js spec.JobSpec) string {
	s := fmt.Sprintf("%s: %s, %s of work, team %s, priority %d", js.ID, js.Tier, js.Work, orNone(js.Team), js.Priority)
	if js.Deadline != nil {
		s += ", due " + js.Deadline.UTC().Format("2006-01-02 15:04 UTC")
	}
	return s
}

// jobDetails is a run's spec as a markdown list.
func jobDetails(js spec.JobSpec) string {
	r := js.Resources
	lines := []string{
		"- **tier** " + string(js.Tier) + tierMeaning[js.Tier],
		fmt.Sprintf("- **work** %s; **priority** %d; **team** %s", js.Work, js.Priority, orNone(js.Team)),
		fmt.Sprintf("- **resources** %d GPU(s) × %d node(s); types %s; zones %s; providers %s; max price %s",
			max(1, r.GPUs), r.NodeCount(), list(r.InstanceTypes), list(r.Zones), list(r.Providers), price(r.MaxPricePerHour)),
		"- **checkpoints** " + orDefault(js.Checkpoint.URL, "the worker's store") + ", interval " + orDefault(js.Checkpoint.Interval, "auto"),
	}
	if js.Deadline != nil {
		lines = append(lines, "- **deadline** "+js.Deadline.UTC().Format("2006-01-02 15:04 UTC"))
	}
	if js.BudgetUSD > 0 {
		lines = append(lines, fmt.Sprintf("- **budget** %.2f USD", js.BudgetUSD))
	}
	cmd := "the built-in demo trainer"
	if len(js.Command) > 0 {
		cmd = "`" + strings.Join(js.Command, " ") + "`"
	}
	return strings.Join(append(lines, "- **command** "+cmd), "\n")
}

// estimateDetails is what was estimated for a run at submit, as a line
// of its static details.
func estimateDetails(e estimate.Submitted) string {
	return "- **estimated at submit** " + e.Line() + "; " + e.Basis
}

// serviceSummary is a service's one line.
func serviceSummary(ss spec.ServiceSpec) string {
	return fmt.Sprintf("%s: service, %d..%d replicas, %s, team %s, priority %d",
		ss.ID, ss.MinReplicas, ss.MaxReplicas, orDefault(string(ss.Placement), "on-demand"), orNone(ss.Team), ss.Priority)
}

var tierMeaning = map[spec.Tier]string{
	spec.TierCritical: " (stable capacity only: base or on-demand)",
	spec.TierDeadline: " (spot while the deadline allows, on-demand when it does not)",
	spec.TierFlexible: " (spot only; waits, spending nothing, while none is in stock)",
}

func list(xs []string) string {
	if len(xs) == 0 {
		return "any"
	}
	return strings.Join(xs, ", ")
}

func price(p float64) string {
	if p <= 0 {
		return "none"
	}
	return fmt.Sprintf("%.2f USD/h", p)
}

func orNone(s string) string { return orDefault(s, "none") }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
