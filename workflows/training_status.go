package workflows

import (
	"time"

	"refuel/pkg/cost"
	"refuel/pkg/estimate"
	"refuel/pkg/replay"
)

// State is where a run is; it is also the RefuelState search attribute.
type State string

const (
	StatePending   State = "pending"
	StateAcquiring State = "acquiring"
	StateQueued    State = "queued" // waiting for the capacity pool to admit the run
	StateWaiting   State = "waiting-for-capacity"
	StateRunning   State = "running"
	StatePreempted State = "preempted"
	StatePaused    State = "paused"
	StateCompleted State = "completed"
	StateFailed    State = "failed"
	StateCancelled State = "cancelled"
	// StateOverBudget: the run spent its budget; it checkpointed, gave its
	// instance back and waits for set-budget to raise it.
	StateOverBudget  State = "over-budget"
	stateFailedClass       = "failed:" // prefix for RefuelState when a class explains the failure
)

// StateStopped is a service stopped as services end (stop-service), every
// replica given back; its workflow is cancelled.
const StateStopped State = "stopped"

// Status is the answer to the "status" query (docs/contracts.md); fields
// are only ever added. It is the run's record (RunRecord, what the run
// decides with and counts) and what is derived from the rest of its
// state when it is asked for (run.snapshot).
type Status struct {
	RunRecord

	Paused   bool         `json:"paused"`
	Instance *InstanceRef `json:"instance"`
	CostUSD  float64      `json:"cost_usd"`
	Attempt  int          `json:"attempt"`
	// Nodes are a gang's nodes (resources.nodes above 1), by rank.
	Nodes []NodeStatus `json:"nodes,omitempty"`
	// NodesAsked is a gang's resources.nodes and NodesTraining how many
	// it holds now: fewer while an elastic gang is short of nodes (the
	// ledger's resizes say when it shrank and grew).
	NodesAsked    int `json:"nodes_asked,omitempty"`
	NodesTraining int `json:"nodes_training,omitempty"`
	// Cost breaks cost_usd down by market and pool, lost work included;
	// Ledger is every paid stretch of instance time behind it.
	Cost   cost.Breakdown `json:"cost"`
	Ledger cost.Ledger    `json:"ledger"`
	// Market is the run's account in market time, when it follows a
	// market with a clock of its own (the simulated cloud), or its latest
	// decision between spot and on-demand in wall time.
	Market *MarketStatus `json:"market,omitempty"`
	// Admission is the run's place with the capacity pool, when one runs:
	// the yields the record counts, and what it holds from its grant. It
	// stands in for the record's PoolYields under the same name.
	Admission *AdmissionStatus `json:"admission,omitempty"`
	// Estimate is what was estimated for the run when it was submitted
	// (`starter estimate`), and once it has ended how it turned out.
	Estimate *estimate.Submitted `json:"estimate,omitempty"`
}

// InstanceRef is the instance a run holds now.
type InstanceRef struct {
	ID           string    `json:"id"`
	Offering     string    `json:"offering"`
	Market       string    `json:"market"`
	Zone         string    `json:"zone"`
	PricePerHour float64   `json:"price_per_hour"`
	Since        time.Time `json:"since"`
}

// PreemptionInfo describes the latest preemption.
type PreemptionInfo struct {
	Time           time.Time `json:"time"`
	InstanceID     string    `json:"instance_id"`
	Zone           string    `json:"zone"`
	AtStep         int64     `json:"at_step"`
	CheckpointStep int64     `json:"checkpoint_step"`
	WithNotice     bool      `json:"with_notice"`
}

// RecoveryInfo describes the latest resume on a replacement instance.
type RecoveryInfo struct {
	ReplacementAt   time.Time `json:"replacement_at"`
	ResumedAt       time.Time `json:"resumed_at"`
	ResumedFromStep int64     `json:"resumed_from_step"`
	InstanceID      string    `json:"instance_id"`
}

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
	Job           replay.Job       `json:"job"`
	StartTick     int              `json:"start_tick"`
	TickSeconds   float64          `json:"tick_seconds"`
	CostUSD       float64          `json:"cost_usd"`
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
