package estimate

import (
	"fmt"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/policy"
	"refuel/pkg/spec"
	"refuel/pkg/trace"
)

// Ask is what to estimate: a run as its JobSpec asks, and the pools it
// may use.
type Ask struct {
	Tier spec.Tier
	// Policy is the market policy the run follows (spec.JobSpec.Policy);
	// default refuel.
	Policy policy.Name
	Work   time.Duration
	// Deadline is the time from submission to the spec's deadline; 0
	// when it has none.
	Deadline time.Duration
	// Nodes and MinNodes are the gang's (resources.nodes, min_nodes); 0
	// means 1 and rigid.
	Nodes, MinNodes int
	// RestartOverhead is what each start of an instance costs the run.
	RestartOverhead time.Duration
	// BudgetUSD is the spec's budget_usd; 0 for none.
	BudgetUSD float64
	// Pools are the pools the run may use: its offerings, a pool per
	// instance type and zone.
	Pools []Pool
	// Alternatives adds the other tiers and the deadlines of 1.1, 1.5
	// and 2 times the work to the spec as written.
	Alternatives bool
	// Windows is how many windows of the market each case is replayed
	// over; 0 means DefaultWindows.
	Windows int
	// MinMemory is how long the memory must have watched a pool's stock
	// for the estimate to draw from it rather than from the built-in
	// market; 0 means DefaultMinMemory.
	MinMemory time.Duration
	// Tick is the step of the markets drawn from the memory: how soon a
	// run meets a change of stock; 0 means DefaultTick. A market read
	// from built-in traces steps at the coarsest of their gaps.
	Tick time.Duration
	// Seed makes the windows drawn from the memory; the same seed and
	// ask give the same report.
	Seed uint64
	// SeesEveryZone replays policies that see every pool's spot stock at
	// every tick, for free. By default they learn a pool's stock only by
	// trying it, as a run does (replay.Job.LearnsByTrying), and refuel
	// pays for its probes.
	SeesEveryZone bool
	// Progress, when set, hears of each replay done.
	Progress func(done, total int)
}

// Pool is one instance type in one zone that the run may use.
type Pool struct {
	Provider, InstanceType, Zone string
	// Spot reports whether the pool sells spot; SpotPrice and
	// OnDemandPrice are USD per instance-hour.
	Spot          bool
	SpotPrice     float64
	OnDemandPrice float64
	// Memory is what the deployment's market memory saw of the pool's
	// spot stock, nil when it has no log of it; Current is the stretch
	// it knows the stock to be in now, nil when it knows none (its tries
	// finding none: out of stock since the first).
	Memory  *policy.Availability
	Current *Stretch
	// Builtin is the built-in market's trace of the pool, used where the
	// memory watched it too little; BuiltinMarket names that market, and
	// StandIn the pool whose trace stands in when the built-in market has
	// none of this one.
	Builtin       *trace.Trace
	BuiltinMarket string
	StandIn       string
	// OnDemandOffering is the on-demand offering (its key) the run takes
	// for this pool, when not the pool's own: the cheapest the run's
	// resources allow, where they leave the pool's own out.
	OnDemandOffering string
	// PlacementScore is the provider's spot placement score of the pool
	// (1 to 10), 0 where it gives none.
	PlacementScore int
}

// Stretch is a stretch of spot stock: in stock or out of it, so far For
// long.
type Stretch struct {
	In  bool
	For time.Duration
}

// Key is the pool's spot offering's key (capacity.Offering.Key).
func (p Pool) Key() string { return p.key("spot") }

// offering is the key of the offering the pool's market m stands for.
func (p Pool) offering(m capacity.Market) string {
	if m == capacity.OnDemand && p.OnDemandOffering != "" {
		return p.OnDemandOffering
	}
	return p.key(string(m))
}

func (p Pool) key(market string) string {
	return p.Provider + "/" + p.InstanceType + "/" + p.Zone + "/" + market
}

// Defaults of an Ask.
const (
	DefaultWindows   = 40
	DefaultMinMemory = 24 * time.Hour
	DefaultTick      = 5 * time.Minute
)

// AskError names what of an ask cannot be estimated and what to change.
type AskError struct {
	Field, Problem, Fix string
}

func (e *AskError) Error() string { return fmt.Sprintf("%s %s; %s", e.Field, e.Problem, e.Fix) }

// check rejects an ask that cannot be estimated, naming the field.
func (a Ask) check() error {
	switch {
	case len(a.Pools) == 0:
		return &AskError{"resources", "match no offering", "allow more instance types, zones or providers, or raise max_price_per_hour"}
	case a.Work <= 0:
		return &AskError{"work", "must be positive", "give the compute time, e.g. work: 48h"}
	case a.Deadline < 0:
		return &AskError{"deadline", "is in the past", "give a time after now"}
	case a.Deadline > 0 && a.Deadline < a.Work:
		return &AskError{"deadline", fmt.Sprintf("leaves %s, less than the %s of work", a.Deadline.Round(time.Minute), a.Work),
			fmt.Sprintf("move the deadline to at least %s from now, or reduce work", (a.Work + a.RestartOverhead).Round(time.Minute))}
	case a.Tier == spec.TierDeadline && a.Deadline == 0:
		return &AskError{"deadline", "is required for tier deadline", "give an RFC 3339 time, or use tier flexible"}
	case a.Tier != spec.TierCritical && a.Tier != spec.TierDeadline && a.Tier != spec.TierFlexible:
		return &AskError{"tier", fmt.Sprintf("%q is not a tier", a.Tier), "use critical, deadline or flexible"}
	case a.RestartOverhead < 0:
		return &AskError{"restart overhead", "is negative", "give 0 or more, e.g. 12m"}
	}
	for _, p := range a.Pools {
		if p.Spot && memorySpan(p.Memory) < a.MinMemory && p.Builtin == nil {
			return &AskError{"pool " + p.Key(), fmt.Sprintf("has %s of memory and no built-in trace of its stock", memorySpan(p.Memory)), "give a trace to stand in"}
		}
	}
	return nil
}
