package workload

import (
	"time"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/capacity"
	"refuel/workflows"
)

// Holding is what a workload (a training run, a development environment)
// holds and where it stands with the capacity it works on, carried whole
// when it continues as new. Its fields sit in the carried state's JSON
// as they did before it was a struct of its own.
type Holding struct {
	// Leases number the workload's attempts and book its instances' time.
	Leases
	// Lease is the instance the workload holds, if any: a gang's rank 0,
	// its Peers the ranks after it (see training/gang.go).
	Lease *Lease   `json:"lease,omitempty"`
	Peers []*Lease `json:"peers,omitempty"`
	// Width is how many nodes an elastic gang trains on while it is
	// short of nodes; 0 means all it asks for (training/elastic.go).
	Width int `json:"width,omitempty"`
	// Training is the attempt under way on Lease when the workload
	// continued as new while it ran: the agent's command goes on, and
	// the next run of the workflow attaches to it.
	Training *CarriedAttempt `json:"training,omitempty"`
	// Offerings are what the workload may acquire, listed once at its
	// start.
	Offerings []capacity.Offering `json:"offerings"`
	// AvoidZone is the zone that just preempted the workload: tried last.
	AvoidZone string `json:"avoid_zone,omitempty"`
	// Pool is the workload's place with the capacity pool; nil when no
	// pool runs and it acquires on its own.
	Pool *PoolPlace `json:"pool,omitempty"`
	// Recovery is under way from when the workload loses its instance
	// (preempted, lost, yielded) until it runs again on the next.
	Recovery *Recovery `json:"recovery,omitempty"`
	// UnclassifiedWaits counts the waits for capacity in a row whose every
	// failure was unclassified (unknown): past RunOptions.MaxUnknownWaits
	// the workload fails rather than wait for what may never come.
	UnclassifiedWaits int `json:"unclassified_waits,omitempty"`
}

// Record is what a workload's attempts, losses and recoveries count, as
// its status shows it: the progress its agent reported, the instances
// the market took, the work lost, the recoveries and restarts, the
// failures met.
type Record struct {
	Step           int64                     `json:"step"`
	TotalSteps     int64                     `json:"total_steps"`
	LastCheckpoint *activities.CheckpointRef `json:"last_checkpoint"`
	Preemptions    int                       `json:"preemptions"`
	Recoveries     int                       `json:"recoveries"`
	LostWorkSecs   float64                   `json:"lost_work_seconds"`
	Failures       []Failure                 `json:"failures"`
	// Restarts counts, by fault, the restarts after faults (the spec's
	// max_restarts caps some of them: Restarts.Total).
	Restarts Restarts `json:"restarts"`
	// NodeReplacements counts a gang's nodes replaced while the others
	// waited at their checkpoint.
	NodeReplacements int             `json:"node_replacements"`
	LastPreemption   *PreemptionInfo `json:"last_preemption,omitempty"`
	LastRecovery     *RecoveryInfo   `json:"last_recovery,omitempty"`
	// PoolYields counts the workload's yields to the capacity pool, once
	// it goes through one; status shows it within Status.Admission, under
	// the same name.
	PoolYields *PoolYields `json:"admission,omitempty"`
	// StockOuts counts the failures of class no-capacity, every one,
	// however few of them failures still lists.
	StockOuts *StockOuts `json:"stock_outs,omitempty"`
	// WaitingUntil is when a workload waiting for capacity on its own
	// tries the offerings again, and WaitingOn the class of failure it
	// waits out; unset while it does not wait so.
	WaitingUntil *time.Time `json:"waiting_until,omitempty"`
	WaitingOn    string     `json:"waiting_on,omitempty"`
}

// PoolYields are the times a run gave its capacity back to the pool.
// (Runs recorded before carried the whole AdmissionStatus here; its
// other fields are derived.)
type PoolYields struct {
	Yields    int        `json:"yields"`
	LastYield *YieldInfo `json:"last_yield,omitempty"`
}

// CarriedAttempt is a training attempt a run handed on to its next run.
type CarriedAttempt struct {
	Started  time.Time     `json:"started"`
	Interval time.Duration `json:"interval"` // how often it checkpoints
	// Attempt is a gang's attempt number, which its ranks' trainers run
	// under; a run of one node trains under its lease's.
	Attempt int `json:"attempt,omitempty"`
}

// Recovery is a run getting back to training after losing its
// instance; status.last_recovery says how far it got.
type Recovery struct {
	// Since is when the run lost its instance.
	Since time.Time `json:"since,omitzero"`
}

// PoolPlace is a run's place with the capacity pool.
type PoolPlace struct {
	Place Place `json:"place"`
	// Grant is what the pool granted, while granted or yielding.
	Grant *admission.Allocation `json:"grant,omitempty"`
	// Yield is the pool's request to give the grant back, while yielding.
	Yield *workflows.YieldRequest `json:"yield,omitempty"`
	// Why says why a gang waits on a burst grant it could not fill yet.
	Why string `json:"why,omitempty"`
}

// Place is where a run's request stands with the capacity pool.
type Place string

const (
	// PlaceLeft: the run holds no request (it paused, or ended).
	PlaceLeft Place = "left"
	// PlaceQueued: the pool has the request and has not granted it.
	PlaceQueued Place = "queued"
	// PlaceHeld: queued, but held by the run's pause.
	PlaceHeld Place = "held"
	// PlaceGranted: the pool granted capacity; the run acquires on it.
	PlaceGranted Place = "granted"
	// PlaceYielding: the pool asked for the grant back; the trainer is
	// stopping at a checkpoint.
	PlaceYielding Place = "yielding"
)
