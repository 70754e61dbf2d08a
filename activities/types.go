package activities

import (
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/policy"
	"refuel/pkg/spec"
)

// Activity names, as registered on the workers.
const (
	ListOfferingsName     = "ListOfferings"
	AcquireName           = "Acquire"
	ReleaseName           = "Release"
	ReplaceName           = "Replace"
	InterruptName         = "Interrupt"
	RunTrainingName       = "RunTraining"
	StopTrainingName      = "StopTraining"
	ListManagedName       = "ListManagedInstances"
	RunOwnsInstanceName   = "RunOwnsInstance"
	OpenMarketName        = "OpenMarket"
	MarketAtName          = "MarketAt"
	EndedWorkflowsName    = "EndedWorkflows"
	PoolCheckpointLogName = "PoolCheckpointLog"
	LostInstancesName     = "LostInstances"
	StockHistoryName      = "StockHistory"
)

// OfferingsInput asks every allowed provider what it sells for a job.
type OfferingsInput struct {
	Resources spec.Resources `json:"resources"`
	// CheckpointURL is the job's checkpoint store, checked against where
	// its instances run (a mem:// store lives in one process).
	CheckpointURL string `json:"checkpoint_url,omitempty"`
}

// ReleaseReason says why an instance is given back; it labels metrics.
// An instance given back for a fault that teaches nothing of the market
// (capacity.Teaches: control-plane, node-lost, as the reason) feeds
// neither the stock logs nor the checkpoint logs.
type ReleaseReason string

const (
	ReleaseCompleted  ReleaseReason = "completed"
	ReleasePreempted  ReleaseReason = "preempted"
	ReleasePaused     ReleaseReason = "paused"
	ReleaseYielded    ReleaseReason = "yielded"     // given back to the capacity pool for a higher priority, or to move to base
	ReleaseScaledIn   ReleaseReason = "scaled-in"   // a service replica no longer needed
	ReleaseChangeover ReleaseReason = "changeover"  // a deadline run moved from on-demand back to spot
	ReleaseOverBudget ReleaseReason = "over-budget" // a run spent its budget
	ReleaseFailed     ReleaseReason = "failed"
	ReleaseCleanup    ReleaseReason = "cleanup"
	ReleaseOrphaned   ReleaseReason = "orphaned"
)

// ReleaseInput names an instance to give back.
type ReleaseInput struct {
	Instance capacity.Instance `json:"instance"`
	Reason   ReleaseReason     `json:"reason"`
	// Log is what the instance's time taught about its pool (time held,
	// a preemption, checkpoint writes), added to the pool's checkpoint
	// log for the `interval: auto` of later runs.
	Log *policy.CheckpointLog `json:"log,omitempty"`
}

// ReplaceInput gives back an instance the market took and acquires its
// replacement, in one activity (Capacity.Replace).
type ReplaceInput struct {
	Release ReleaseInput     `json:"release"`
	Request capacity.Request `json:"request"`
}

// ReleaseFailedType is the error type of a Replace whose release failed,
// before anything was acquired: the run then releases and acquires apart.
const ReleaseFailedType = "ReleaseFailed"

// InterruptInput asks a cloud to reclaim an instance the way a spot market
// does: an interruption notice now, the instance gone after Grace.
type InterruptInput struct {
	InstanceID string        `json:"instance_id"`
	Grace      time.Duration `json:"grace"`
	// Hold takes the stock of the instance's market in its zone away for
	// that long from the notice: no replacement can be had there
	// meanwhile (clouds that are StockHolders: the local and simulated
	// ones).
	Hold time.Duration `json:"hold,omitempty"`
	// Still stops the market's clock for that long from the notice
	// (clouds that are ClockHolders: the in-process simulated one, whose
	// market otherwise moves a tick a second), so a drill measures
	// refuel's recovery and not the market's next move. With no
	// InstanceID the input only sets the clock's hold: Still from now,
	// 0 to let it go.
	Still time.Duration `json:"still,omitempty"`
}

// InterruptResult tells when the notice was served.
type InterruptResult struct {
	NoticeAt time.Time `json:"notice_at"`
}

// CheckpointRef is a verified checkpoint, as status reports it.
type CheckpointRef struct {
	Step int64     `json:"step"`
	Time time.Time `json:"time"`
	URL  string    `json:"url"`
	// WriteSeconds is how long its upload took, when the agent measured it.
	WriteSeconds float64 `json:"write_seconds,omitempty"`
	// Bytes is the size of its files, what moving it to another region
	// transfers; 0 when not known (a checkpoint reported before sizes
	// were).
	Bytes int64 `json:"bytes,omitempty"`
}

// FailureDetail is one classified acquisition failure, carried in the
// details of the Acquire activity's application error.
type FailureDetail struct {
	Class    capacity.Class `json:"class"`
	Offering string         `json:"offering"`
	Code     string         `json:"code,omitempty"`
	Message  string         `json:"message"`
}

// TrainingInput is what the node agent needs to run one attempt of a job.
type TrainingInput struct {
	Spec          spec.JobSpec `json:"spec"`
	Attempt       int          `json:"attempt"`
	InstanceID    string       `json:"instance_id"`
	CheckpointURL string       `json:"checkpoint_url"`
	// CheckpointInterval is how often the trainer should checkpoint; the
	// demo trainer turns it into steps, other trainers read it from
	// $REFUEL_CHECKPOINT_INTERVAL_SECONDS.
	CheckpointInterval time.Duration `json:"checkpoint_interval"`
	// StopGrace bounds how long a stop (pause, cancel) waits for the
	// trainer's final checkpoint.
	StopGrace time.Duration `json:"stop_grace"`
	// Control is how the run stops the attempt. Empty (runs recorded
	// before push control): by cancelling this activity, which reaches
	// the agent with a heartbeat. ControlPush: by StopTraining on the
	// instance's own queue; a RunTraining cancelled then only lets go of
	// the attempt (its run continued as new, or ended), and a later
	// RunTraining of the same attempt attaches to the trainer still
	// running.
	Control string `json:"control,omitempty"`
	// HeartbeatEvery is how often the agent heartbeats: liveness, and the
	// progress a run reads between signals; 0 is every second.
	HeartbeatEvery time.Duration `json:"heartbeat_every,omitempty"`
	// SignalEvery is the least time between two checkpoint progress
	// signals: checkpoints in between are reported together. 0 reports
	// each one.
	SignalEvery time.Duration `json:"signal_every,omitempty"`
	// Gang is the attempt's place in a gang of several nodes training
	// together; zero for a run of one node.
	Gang Gang `json:"gang,omitzero"`
	// ControlPlaneTolerance is how long the trainer trains on while no
	// run is attached to it (the cluster is away or slow, or the run
	// continued as new and has not attached yet) before the agent stops
	// it at a checkpoint; 0 is DefaultControlPlaneTolerance.
	ControlPlaneTolerance time.Duration `json:"control_plane_tolerance,omitempty"`
	// RunIdentity is the run's first run ID: its checkpoints' manifests
	// carry it, and the agent resumes from none another run wrote. ""
	// (runs recorded before) checks nothing.
	RunIdentity string `json:"run_identity,omitempty"`
	// Dev, when set, makes the attempt a development environment's
	// (see DevInput).
	Dev *DevInput `json:"dev,omitempty"`
}

// Gang is one node's place in a gang: its rank, how many nodes train
// together, and where rank 0 listens for the others (the trainer
// contract's REFUEL_NODE_RANK, REFUEL_NUM_NODES, REFUEL_MASTER_ADDR and
// REFUEL_MASTER_PORT).
type Gang struct {
	Rank       int    `json:"rank"`
	Nodes      int    `json:"nodes"`
	MasterAddr string `json:"master_addr"`
	MasterPort int    `json:"master_port"`
}

// ControlPush marks a TrainingInput stopped by StopTraining.
const ControlPush = "push"

// StopInput asks the agent to stop one attempt's trainer at a checkpoint.
type StopInput struct {
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
}

// TrainingOutcome is how an attempt ended.
type TrainingOutcome string

const (
	OutcomeCompleted TrainingOutcome = "completed"
	OutcomePreempted TrainingOutcome = "preempted"
	OutcomeStopped   TrainingOutcome = "stopped"
	OutcomeFailed    TrainingOutcome = "failed"
)

// TrainingResult reports one attempt.
type TrainingResult struct {
	Outcome        TrainingOutcome `json:"outcome"`
	RestoredStep   int64           `json:"restored_step"`
	LastStep       int64           `json:"last_step"`
	TotalSteps     int64           `json:"total_steps"`
	LastCheckpoint *CheckpointRef  `json:"last_checkpoint,omitempty"`
	NoticeAt       time.Time       `json:"notice_at,omitempty"`
	ExitCode       int             `json:"exit_code,omitempty"`
	Message        string          `json:"message,omitempty"`
	ModelDigest    string          `json:"model_digest,omitempty"`
	// LogsURL is where the job's trainer output is kept, every attempt's
	// (read it with `starter logs`).
	LogsURL string `json:"logs_url,omitempty"`
	// Outage is what the agent saw of the control plane during the
	// attempt, if anything went wrong with it.
	Outage *Outage `json:"outage,omitempty"`
	// Dev is how a development environment's attempt ended.
	Dev *DevResult `json:"dev,omitempty"`
}

// Outage is what a node agent saw of the control plane while an attempt
// trained: heartbeats the cluster did not take, and trainers it stopped
// because no run attached within the tolerance and started again, from
// their checkpoint, when one did.
type Outage struct {
	FailedHeartbeats int `json:"failed_heartbeats"`
	// LongestSeconds is the longest time the cluster took no heartbeat.
	LongestSeconds float64 `json:"longest_seconds"`
	// TrainerRestarts counts the trainers stopped so and started again.
	TrainerRestarts int `json:"trainer_restarts,omitempty"`
}

// ProgressKind says what a progress report is about.
type ProgressKind string

const (
	ProgressRestored   ProgressKind = "restored"   // trainer started, from RestoredStep
	ProgressCheckpoint ProgressKind = "checkpoint" // a checkpoint was uploaded and verified
	ProgressNotice     ProgressKind = "notice"     // an interruption notice arrived
	ProgressRebalance  ProgressKind = "rebalance"  // the provider recommends moving
)

// Progress is what the node agent tells the run while it trains: sent as
// the run's "progress" signal on the few events that matter, and as the
// activity's heartbeat details all the time.
type Progress struct {
	Kind       ProgressKind   `json:"kind,omitempty"`
	Attempt    int            `json:"attempt"`
	InstanceID string         `json:"instance_id"`
	Step       int64          `json:"step"`
	TotalSteps int64          `json:"total_steps"`
	Checkpoint *CheckpointRef `json:"checkpoint,omitempty"`
	// Checkpoints is how many checkpoints a checkpoint report covers (0
	// means 1); its Checkpoint is the latest and its WriteSeconds their
	// total.
	Checkpoints int       `json:"checkpoints,omitempty"`
	Time        time.Time `json:"time"`
	// Dev is a development environment's report: its endpoint and use.
	Dev *DevProgress `json:"dev,omitempty"`
}

// ManagedInstance is an instance refuel launched, as the janitor sees it.
type ManagedInstance struct {
	Instance capacity.Instance `json:"instance"`
	RunID    string            `json:"run_id"`
}

// LostInstance is an instance its cloud took back (terminated or gone)
// or is taking back (interrupted: a notice was served).
type LostInstance struct {
	ID    string         `json:"id"`
	State capacity.State `json:"state"`
}

// OwnershipInput asks whether a run still owns an instance.
type OwnershipInput struct {
	RunID      string `json:"run_id"`
	InstanceID string `json:"instance_id"`
}
