// Package spec holds what pipelines submit: the JobSpec of a training run,
// its parsing from YAML or JSON, and validation with field-level errors.
package spec

import (
	"fmt"
	"strings"
	"time"
)

// Tier says how much interruption a job tolerates.
type Tier string

const (
	// TierCritical runs on stable capacity only: base or on-demand.
	TierCritical Tier = "critical"
	// TierDeadline uses spot while the deadline allows and on-demand when it does not.
	TierDeadline Tier = "deadline"
	// TierFlexible uses spot only and waits, spending nothing, while none is in stock.
	TierFlexible Tier = "flexible"
)

// Tiers lists every valid tier, in the order the docs present them.
var Tiers = []Tier{TierCritical, TierDeadline, TierFlexible}

// Defaults applied by Normalize to fields a JobSpec leaves out.
const (
	DefaultPriority           = 50
	DefaultTier               = TierFlexible
	DefaultGPUs               = 1
	DefaultCheckpointKeep     = 3
	DefaultCheckpointInterval = "auto"
	MaxPriority               = 100
	DefaultMaxRestarts        = 3
	// DefaultShrinkAfter is how long an elastic gang waits for a lost
	// node's replacement: about what one launch takes when stock is there.
	DefaultShrinkAfter = 2 * time.Minute
)

// JobSpec is one training run as a pipeline submits it (docs/contracts.md).
// The same struct is the TrainingRun workflow's input, serialised as JSON.
type JobSpec struct {
	ID         string     `json:"id"`
	Team       string     `json:"team,omitempty"`
	Priority   int        `json:"priority"`
	Tier       Tier       `json:"tier"`
	Deadline   *time.Time `json:"deadline,omitempty"`
	Work       Duration   `json:"work"`
	Resources  Resources  `json:"resources"`
	Command    []string   `json:"command,omitempty"`
	Checkpoint Checkpoint `json:"checkpoint"`
	BudgetUSD  float64    `json:"budget_usd,omitempty"`
	// Env is added to the trainer's environment, beside the contract's
	// REFUEL_* variables (which it may not override).
	Env map[string]string `json:"env,omitempty"`
	// Workdir is where the command runs on the instance, and where a
	// relative command is found; default the attempt's scratch directory.
	Workdir string `json:"workdir,omitempty"`
	// MaxRestarts is how many instance losses, agent failures and trainer
	// failures the run tolerates before it fails; nil means
	// DefaultMaxRestarts, 0 tolerates none.
	MaxRestarts *int `json:"max_restarts,omitempty"`
	// Policy is the market policy a deadline or flexible run follows on a
	// market with a clock of its own (the simulated cloud), by the names
	// of `starter sim`; default refuel.
	Policy string `json:"policy,omitempty"`
}

// MarketPolicies are the policies a run may name: those of `starter sim`
// that decide from the past alone.
var MarketPolicies = []string{"ondemand", "greedy", "uniform-progress", "refuel"}

// DefaultPolicy is the market policy of a run that names none.
const DefaultPolicy = "refuel"

// Resources says what an instance must have and what the job may pay.
// Empty lists mean "any that the provider offers".
type Resources struct {
	GPUs int `json:"gpus"`
	// Nodes is how many instances the job needs at once (a gang); 0
	// means 1. Services place each replica on one node.
	Nodes int `json:"nodes,omitempty"`
	// MinNodes makes a gang elastic: when a node is lost and no
	// replacement comes within ShrinkAfter, the gang trains on from its
	// latest checkpoint on the nodes it still holds, as long as they are
	// at least MinNodes, and grows back at a checkpoint when stock
	// returns. 0 means Nodes: a rigid gang.
	MinNodes int `json:"min_nodes,omitempty"`
	// ShrinkAfter is how long an elastic gang waits for a lost node's
	// replacement before it trains on without it, and how often, while
	// short of nodes, it tries for them again; 0 means
	// DefaultShrinkAfter.
	ShrinkAfter Duration `json:"shrink_after,omitempty"`
	// SameZone keeps a gang's nodes in one zone; nil means true.
	SameZone        *bool    `json:"same_zone,omitempty"`
	InstanceTypes   []string `json:"instance_types,omitempty"`
	Zones           []string `json:"zones,omitempty"`
	Providers       []string `json:"providers,omitempty"`
	MaxPricePerHour float64  `json:"max_price_per_hour,omitempty"`
}

// Checkpoint says where checkpoints go, how often and how many are kept.
type Checkpoint struct {
	// URL is a gocloud.dev/blob bucket URL: file:///…, s3://…, gs://…, mem://.
	URL string `json:"url,omitempty"`
	// Interval is a duration such as "10m", or "auto" for the Young/Daly optimum.
	Interval string `json:"interval,omitempty"`
	// Keep is how many verified checkpoints are kept; older ones are pruned.
	Keep int `json:"keep,omitempty"`
	// MinInterval and MaxInterval bound what "auto" chooses; defaults
	// DefaultMinCheckpointInterval and DefaultMaxCheckpointInterval.
	MinInterval Duration `json:"min_interval,omitempty"`
	MaxInterval Duration `json:"max_interval,omitempty"`
	// RestartFromScratch lets a run whose checkpoints all fail to verify
	// train again from step 0; without it the run fails with a
	// checkpoint failure, so no work is silently thrown away.
	RestartFromScratch bool `json:"restart_from_scratch,omitempty"`
}

// Bounds of an "auto" checkpoint interval left unset: checkpoints more
// often than every 10 s cost more in writes than they can save, and a run
// should never risk more than half an hour of work.
const (
	DefaultMinCheckpointInterval = 10 * time.Second
	DefaultMaxCheckpointInterval = 30 * time.Minute
)

// AutoInterval reports whether the checkpoint interval is chosen by refuel.
func (c Checkpoint) AutoInterval() bool { return c.Interval == "" || c.Interval == "auto" }

// FixedInterval returns the configured interval; ok is false for "auto".
func (c Checkpoint) FixedInterval() (d time.Duration, ok bool) {
	if c.AutoInterval() {
		return 0, false
	}
	d, err := time.ParseDuration(c.Interval)
	return d, err == nil
}

// Normalize fills defaults for fields left out. It never overrides a value
// that was given, so validation still sees what the user wrote.
func (s *JobSpec) Normalize() {
	if s.Tier == "" {
		s.Tier = DefaultTier
	}
	if s.Resources.GPUs == 0 {
		s.Resources.GPUs = DefaultGPUs
	}
	if s.Checkpoint.Interval == "" {
		s.Checkpoint.Interval = DefaultCheckpointInterval
	}
	if s.Checkpoint.Keep == 0 {
		s.Checkpoint.Keep = DefaultCheckpointKeep
	}
	c := &s.Checkpoint
	if c.MinInterval == 0 {
		c.MinInterval = Duration(DefaultMinCheckpointInterval)
		if c.MaxInterval > 0 && c.MaxInterval < c.MinInterval {
			c.MinInterval = c.MaxInterval
		}
	}
	if c.MaxInterval == 0 {
		c.MaxInterval = Duration(max(DefaultMaxCheckpointInterval, c.MinInterval.D()))
	}
	s.Tier = Tier(strings.ToLower(string(s.Tier)))
	if s.Policy == "" {
		s.Policy = DefaultPolicy
	}
}

// Restarts is how many restarts the run tolerates: MaxRestarts, or its
// default.
func (s JobSpec) Restarts() int {
	if s.MaxRestarts == nil {
		return DefaultMaxRestarts
	}
	return *s.MaxRestarts
}

// NodeCount is how many instances the job needs at once.
func (r Resources) NodeCount() int { return max(1, r.Nodes) }

// MinNodeCount is the fewest nodes the job trains on: MinNodes, or
// NodeCount for a rigid gang.
func (r Resources) MinNodeCount() int {
	if r.MinNodes < 1 {
		return r.NodeCount()
	}
	return min(r.MinNodes, r.NodeCount())
}

// Elastic reports whether the gang may train on fewer nodes than it asks.
func (r Resources) Elastic() bool { return r.MinNodeCount() < r.NodeCount() }

// ShrinkBound is how long an elastic gang waits for a lost node's
// replacement: ShrinkAfter, or DefaultShrinkAfter.
func (r Resources) ShrinkBound() time.Duration {
	if r.ShrinkAfter > 0 {
		return r.ShrinkAfter.D()
	}
	return DefaultShrinkAfter
}

// OneZone reports whether a gang's nodes must share a zone.
func (r Resources) OneZone() bool { return r.SameZone == nil || *r.SameZone }

// AllowsOnDemand reports whether the tier may ever pay on-demand prices.
func (t Tier) AllowsOnDemand() bool { return t == TierCritical || t == TierDeadline }

// AllowsSpot reports whether the tier may run on interruptible capacity.
func (t Tier) AllowsSpot() bool { return t == TierDeadline || t == TierFlexible }

func (t Tier) valid() bool {
	for _, v := range Tiers {
		if v == t {
			return true
		}
	}
	return false
}

func (t Tier) String() string { return string(t) }

// String shows a spec in logs without its command line.
func (s JobSpec) String() string {
	return fmt.Sprintf("%s (team %q, tier %s, priority %d, work %s)", s.ID, s.Team, s.Tier, s.Priority, s.Work)
}
