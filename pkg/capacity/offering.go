// Package capacity is the contract between refuel and the clouds it rents
// from: the Provider interface, the Offerings it sells, the Instances it
// launches and the classified errors it returns when it cannot.
package capacity

import (
	"fmt"
	"time"
)

// Market is how an offering is sold.
type Market string

const (
	// Spot is interruptible capacity: cheap, preempted with a short notice.
	Spot Market = "spot"
	// OnDemand is stable capacity paid by the hour.
	OnDemand Market = "on-demand"
	// Base is the dedicated resource group refuel owns or has reserved.
	Base Market = "base"
)

// Offering is one thing a provider can sell: an instance type in a zone on
// a market, at a price.
type Offering struct {
	Provider     string  `json:"provider"`
	InstanceType string  `json:"instance_type"`
	Zone         string  `json:"zone"`
	Market       Market  `json:"market"`
	GPUs         int     `json:"gpus"`
	PricePerHour float64 `json:"price_per_hour"`
}

// Key identifies an offering independent of its price, for caches and
// metric labels.
func (o Offering) Key() string {
	return fmt.Sprintf("%s/%s/%s/%s", o.Provider, o.InstanceType, o.Zone, o.Market)
}

func (o Offering) String() string {
	return fmt.Sprintf("%s $%.4f/h", o.Key(), o.PricePerHour)
}

// Instance is one machine a provider launched for a run.
type Instance struct {
	ID       string   `json:"id"`
	Offering Offering `json:"offering"`
	// TaskQueue is the Temporal task queue the instance's node agent serves;
	// activities sent there run on exactly this machine.
	TaskQueue string `json:"task_queue"`
	// Address is where the instance's peers reach it: its private IP on
	// EC2, loopback for the local and simulated clouds' instances.
	Address    string            `json:"address,omitempty"`
	LaunchedAt time.Time         `json:"launched_at"`
	Tags       map[string]string `json:"tags,omitempty"`
}

// State is where an instance is in its life.
type State string

const (
	StatePending     State = "pending"
	StateRunning     State = "running"
	StateInterrupted State = "interrupted" // an interruption notice was served
	StateTerminated  State = "terminated"
)

// Request asks a provider for one instance.
type Request struct {
	// RunID is the workflow the instance is for: its tag names it, and
	// the janitor asks whether that workflow still runs.
	RunID string `json:"run_id"`
	// Identity (the workflow's first run ID, never reused by a later run
	// with the same RunID) and Attempt make the request idempotent: a
	// provider asked twice with the same pair returns the instance it
	// already launched instead of launching a second one. A request
	// without one is keyed on RunID, as before identities were.
	Identity string `json:"identity,omitempty"`
	Attempt  int    `json:"attempt"`
	// Offerings are acceptable in order of preference; the provider takes
	// the first it can fill.
	Offerings []Offering        `json:"offerings"`
	Tags      map[string]string `json:"tags,omitempty"`
	// MaxPricePerHour caps what a spot instance may cost (0: no cap beyond
	// the on-demand price); a market above it fails with class Price.
	MaxPricePerHour float64 `json:"max_price_per_hour,omitempty"`
	// Probe, when set, makes the request a probe: spot tried only to learn
	// whether the pool has stock, the instance let go as soon as it is
	// had. It names the probe apart from the run's acquisitions and other
	// probes in the idempotency token; a provider need not wait for the
	// instance to boot (the sim starts no agent on it).
	Probe string `json:"probe,omitempty"`
}

// IdempotencyToken is the client token derived from the run's identity
// and the attempt. A first run ID is 36 characters, so the token stays
// well inside EC2's 64 whatever the job id's length.
func (r Request) IdempotencyToken() string {
	id := r.RunID
	if r.Identity != "" {
		id = r.Identity
	}
	if r.Probe != "" {
		return fmt.Sprintf("%s-%s-%d", id, r.Probe, r.Attempt)
	}
	return fmt.Sprintf("%s-%d", id, r.Attempt)
}

// Tag keys that refuel puts on every instance it launches, so a janitor
// can find instances whose run no longer owns them.
const (
	TagManagedBy = "refuel:managed-by"
	TagRun       = "refuel:run"
	TagAttempt   = "refuel:attempt"
	// TagIdentity is the run's first run ID, which its idempotency tokens
	// derive from.
	TagIdentity = "refuel:identity"
	TagPool     = "refuel:pool"
	TagTeam     = "refuel:team"
	// TagNode names the base machine an instance of the base group runs on.
	TagNode = "refuel:node"
	// TagJoined marks an instance on a machine that joined the base group
	// (`worker join`): its loss is cause node-lost, not a fault of a cloud.
	TagJoined = "refuel:joined"
	// TagProbe marks an instance acquired only to learn a pool's stock
	// (Request.Probe), let go at once.
	TagProbe  = "refuel:probe"
	ManagedBy = "refuel"
)

// TagDeployment names the refuel deployment (worker --deployment) that
// launched an instance: a janitor releases only its own deployment's.
const TagDeployment = "refuel:deployment"
