package workflows

import (
	"time"

	"refuel/activities"
	"refuel/pkg/cost"
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
// are only ever added.
type Status struct {
	ID             string                    `json:"id"`
	Team           string                    `json:"team"`
	Tier           string                    `json:"tier"`
	State          State                     `json:"state"`
	Priority       int                       `json:"priority"`
	Paused         bool                      `json:"paused"`
	Step           int64                     `json:"step"`
	TotalSteps     int64                     `json:"total_steps"`
	LastCheckpoint *activities.CheckpointRef `json:"last_checkpoint"`
	Instance       *InstanceRef              `json:"instance"`
	Preemptions    int                       `json:"preemptions"`
	Recoveries     int                       `json:"recoveries"`
	CostUSD        float64                   `json:"cost_usd"`
	LostWorkSecs   float64                   `json:"lost_work_seconds"`
	Failures       []Failure                 `json:"failures"`

	Attempt int `json:"attempt"`
	// Restarts counts, by cause, the restarts after faults that the spec's
	// max_restarts caps (trainer, agent, instance lost).
	Restarts Restarts `json:"restarts"`
	// Nodes are a gang's nodes (resources.nodes above 1), by rank, and
	// NodeReplacements the nodes replaced while the others waited at
	// their checkpoint.
	Nodes            []NodeStatus `json:"nodes,omitempty"`
	NodeReplacements int          `json:"node_replacements"`
	// NodesAsked is a gang's resources.nodes and NodesTraining how many
	// it holds now: fewer while an elastic gang is short of nodes (the
	// ledger's resizes say when it shrank and grew).
	NodesAsked    int `json:"nodes_asked,omitempty"`
	NodesTraining int `json:"nodes_training,omitempty"`
	// BudgetUSD is what the run may spend (the spec's budget_usd, as
	// set-budget last changed it); 0 for no budget.
	BudgetUSD float64 `json:"budget_usd,omitempty"`
	// Changeovers counts moves from on-demand back to spot made while
	// training (the market clock's own are in Market).
	Changeovers int `json:"changeovers"`
	// CheckpointIntervalSecs is the interval the current or last attempt
	// checkpoints at: the spec's, or the one "auto" chose.
	CheckpointIntervalSecs float64         `json:"checkpoint_interval_seconds"`
	StartedAt              time.Time       `json:"started_at"`
	LastPreemption         *PreemptionInfo `json:"last_preemption,omitempty"`
	LastRecovery           *RecoveryInfo   `json:"last_recovery,omitempty"`
	ModelDigest            string          `json:"model_digest,omitempty"`
	// Cost breaks cost_usd down by market and pool, lost work included;
	// Ledger is every paid stretch of instance time behind it.
	Cost   cost.Breakdown `json:"cost"`
	Ledger cost.Ledger    `json:"ledger"`
	// Market is the run's account in market time, when it follows a
	// market with a clock of its own (the simulated cloud).
	Market *MarketStatus `json:"market,omitempty"`
	// Admission is the run's place with the capacity pool, when one runs.
	Admission *AdmissionStatus `json:"admission,omitempty"`
	// StoreURL is the store the run's checkpoints and trainer output go
	// to: its spec's checkpoint.url, or the worker's; "" for a run
	// recorded before runs said.
	StoreURL string `json:"store_url,omitempty"`
	// StockOuts counts the failures of class no-capacity, every one,
	// however few of them failures still lists.
	StockOuts *StockOuts `json:"stock_outs,omitempty"`
	// WaitingUntil is when a run waiting for capacity on its own tries
	// the offerings again, and WaitingOn the class of failure it waits
	// out; unset while it does not wait so.
	WaitingUntil *time.Time `json:"waiting_until,omitempty"`
	WaitingOn    string     `json:"waiting_on,omitempty"`
}

// status is the record's part of a run's status.
func (rec RunRecord) status() Status {
	return Status{
		ID: rec.ID, Team: rec.Team, Tier: rec.Tier, State: rec.State, Priority: rec.Priority,
		Step: rec.Step, TotalSteps: rec.TotalSteps, LastCheckpoint: rec.LastCheckpoint,
		Preemptions: rec.Preemptions, Recoveries: rec.Recoveries, LostWorkSecs: rec.LostWorkSecs,
		Failures: rec.Failures, Restarts: rec.Restarts, NodeReplacements: rec.NodeReplacements,
		BudgetUSD: rec.BudgetUSD, Changeovers: rec.Changeovers, CheckpointIntervalSecs: rec.CheckpointIntervalSecs,
		StartedAt: rec.StartedAt, LastPreemption: rec.LastPreemption, LastRecovery: rec.LastRecovery,
		ModelDigest: rec.ModelDigest, Admission: rec.Admission, StoreURL: rec.StoreURL,
		StockOuts: rec.StockOuts, WaitingUntil: rec.WaitingUntil, WaitingOn: rec.WaitingOn,
	}
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
