package workload

import (
	"time"

	"refuel/pkg/replay"
)

// MarketStatus is how a run chooses its market. A run on a market with a
// clock (Clock "market") keeps its account in market time: what it
// decided at each tick and what that cost, as `starter sim` reports a
// window. A deadline run in wall time that weighs spot against on-demand
// (Clock "wall") shows only its policy and its latest decision.
type MarketStatus struct {
	// Clock is ClockMarket or ClockWall.
	Clock string `json:"clock"`
	// Why is the latest decision in a line a person reads, such as
	// "on-demand: 3.1 h slack left, spot in us-west-2b expected back in 4 h".
	Why string `json:"why,omitempty"`
	// DecidedAt is when, for a run in wall time.
	DecidedAt time.Time `json:"decided_at,omitzero"`

	Policy string   `json:"policy"`
	Zones  []string `json:"zones"`
	// Job is the run as the account sees it: work, the deadline as a
	// budget of market time from the start, and prices.
	Job         replay.Job `json:"job"`
	StartTick   int        `json:"start_tick"`
	TickSeconds float64    `json:"tick_seconds"`
	CostUSD     float64    `json:"cost_usd"`
	// ProbeUSD is what the run's probes cost, in CostUSD: tries of spot
	// taken only to learn a zone's stock (replay.Result.ProbeUSD).
	ProbeUSD      float64          `json:"probe_usd,omitempty"`
	SpotHours     float64          `json:"spot_hours"`
	OnDemandHours float64          `json:"ondemand_hours"`
	Preemptions   int              `json:"preemptions"`
	Changeovers   int              `json:"changeovers"`
	DoneHours     float64          `json:"done_hours"`
	Finished      bool             `json:"finished"`
	FinishHours   float64          `json:"finish_hours"`
	DeadlineMet   bool             `json:"deadline_met"`
	Decisions     []MarketDecision `json:"decisions"`
}

// How a run keeps time with its market (MarketStatus.Clock).
const (
	ClockMarket = "market" // the sim's market clock: a decision at every tick
	ClockWall   = "wall"   // wall time: decisions when the run acquires, and while on on-demand
)

// MarketDecision is what a run held during one tick of the market.
type MarketDecision struct {
	Tick      int    `json:"tick"`
	Choice    string `json:"choice"`
	Preempted bool   `json:"preempted,omitempty"`
}
