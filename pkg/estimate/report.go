package estimate

import (
	"fmt"
	"time"

	"refuel/pkg/spec"
)

// Report is an estimate: the spec as written first, then the cases beside
// it, and what the ask should change.
type Report struct {
	Cases    []Case    `json:"cases"`
	Problems []Problem `json:"problems,omitempty"`
}

// Case is one way to run the job (the spec as written, another tier,
// another deadline) and how its replays went. Its JSON names are those
// of docs/contracts.md.
type Case struct {
	// Name says what the case changes: "as written", "tier critical",
	// "deadline 1.5x work".
	Name string    `json:"name"`
	Tier spec.Tier `json:"tier"`
	// DeadlineHours is the case's deadline from submission, 0 for none.
	DeadlineHours float64 `json:"deadline_hours,omitempty"`
	// CostUSD is the spread of what the replays cost; OnDemandCostUSD is
	// the same work on on-demand from start to end, in the cheapest zone.
	CostUSD         Spread  `json:"cost_usd"`
	OnDemandCostUSD float64 `json:"ondemand_cost_usd"`
	// ProbeUSD is what the replays spent, on average and within CostUSD,
	// trying spot in pools they did not hold to learn their stock.
	ProbeUSD float64 `json:"probe_usd,omitempty"`
	// FinishHours is when the replays finished, from submission.
	FinishHours Finish `json:"finish_hours"`
	// DeadlineMetShare is the share of replays that finished by the
	// deadline; nil for a case without one.
	DeadlineMetShare *float64 `json:"deadline_met_share,omitempty"`
	// FinishedShare is the share of replays that finished at all within
	// HorizonHours (a flexible run may wait for spot past it).
	FinishedShare float64 `json:"finished_share"`
	HorizonHours  float64 `json:"horizon_hours"`
	// Offerings are those the replays held, with their share of the
	// hours held, most used first.
	Offerings []Use `json:"offerings"`
	Windows   int   `json:"windows"`
	// Basis says what market the case was replayed on.
	Basis string `json:"basis"`
}

// Spread is a distribution by its 10th, 50th and 90th percentiles.
type Spread struct {
	P10 float64 `json:"p10"`
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
}

// Finish is when the replays finished; a percentile whose replay did not
// finish within the horizon is nil.
type Finish struct {
	P50 *float64 `json:"p50"`
	P90 *float64 `json:"p90"`
}

// Use is an offering (capacity.Offering.Key) and its share of the hours
// the replays held.
type Use struct {
	Offering string  `json:"offering"`
	Share    float64 `json:"share"`
}

// Problem is what an ask should change: the field, what is wrong with it
// and the fix.
type Problem struct {
	Field   string `json:"field"`
	Problem string `json:"problem"`
	Fix     string `json:"fix"`
}

// Line is the problem as one line a person acts on.
func (p Problem) Line() string { return p.Field + ": " + p.Problem + "; " + p.Fix }

// Submitted is what was estimated for a run when it was submitted, kept
// with the run (its status's `estimate`): the case of its spec as
// written.
type Submitted struct {
	EstimatedAt time.Time `json:"estimated_at"`
	Case
	// Outcome is, once the run has ended, what it cost and when it
	// finished beside what was estimated.
	Outcome *Outcome `json:"outcome,omitempty"`
}

// Outcome is how a run turned out against its estimate.
type Outcome struct {
	CostUSD float64 `json:"cost_usd"`
	// FinishHours is from submission to the run's end.
	FinishHours float64 `json:"finish_hours"`
	// CostWithin reports whether the cost fell within the estimate's p10
	// to p90.
	CostWithin bool `json:"cost_within_p10_p90"`
}

// Against is how a run that cost costUSD and ended at ended turned out
// against s.
func (s Submitted) Against(costUSD float64, ended time.Time) Outcome {
	return Outcome{
		CostUSD: costUSD, FinishHours: ended.Sub(s.EstimatedAt).Hours(),
		CostWithin: costUSD >= s.CostUSD.P10-0.005 && costUSD <= s.CostUSD.P90+0.005,
	}
}

// Line is the estimate in one line: its cost spread and finish.
func (c Case) Line() string {
	s := fmt.Sprintf("$%.2f (p10 $%.2f, p90 $%.2f; on-demand $%.2f), finish %s", c.CostUSD.P50, c.CostUSD.P10, c.CostUSD.P90, c.OnDemandCostUSD, c.FinishHours)
	if c.DeadlineMetShare != nil {
		s += fmt.Sprintf(", deadline met in %.0f%%", 100**c.DeadlineMetShare)
	}
	return s
}

func (f Finish) String() string {
	return "p50 " + hoursOrNever(f.P50) + ", p90 " + hoursOrNever(f.P90)
}

func hoursOrNever(h *float64) string {
	if h == nil {
		return "not within the horizon"
	}
	return fmt.Sprintf("%.1fh", *h)
}
