package workflows

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
	StateFailedClass       = "failed:" // prefix for RefuelState when a class explains the failure
)

// StateStopped is a service stopped as services end (stop-service), every
// replica given back; its workflow is cancelled.
const StateStopped State = "stopped"
