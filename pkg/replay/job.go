package replay

import (
	"fmt"
	"time"

	"refuel/pkg/spec"
)

// Job is the run being replayed.
// Durations are in nanoseconds in JSON, so a job read back is exact.
type Job struct {
	Tier            spec.Tier     `json:"tier"`
	Work            time.Duration `json:"work"`     // compute time on one instance, or on the gang
	Deadline        time.Duration `json:"deadline"` // from the start
	RestartOverhead time.Duration `json:"restart_overhead"`
	SpotPrice       float64       `json:"spot_price"`     // USD per instance-hour
	OnDemandPrice   float64       `json:"ondemand_price"` // USD per instance-hour
	// Zones, when set, price each zone of the market on its own, in the
	// market's order, and place it in a region; otherwise every zone
	// charges SpotPrice and OnDemandPrice, and all are one region.
	Zones []ZonePrice `json:"zones,omitempty"`
	// A start in another region than the one the run's checkpoint is in
	// (the region of the last instance it held, once it has done any
	// work) moves the checkpoint there: CheckpointGB at EgressUSDPerGB,
	// and TransferTime more before the new instance works, added to its
	// restart overhead and counted in whole ticks of the market.
	CheckpointGB   float64       `json:"checkpoint_gb,omitempty"`
	EgressUSDPerGB float64       `json:"egress_usd_per_gb,omitempty"`
	TransferTime   time.Duration `json:"transfer_time,omitempty"`
	// Nodes is how many instances the job holds at once, a gang in one
	// zone and market (0 means 1): spot is in stock for it only when a
	// tick's point holds them all, losing one loses the gang, and each is
	// billed. The checkpoint is the gang's, moved once.
	Nodes int `json:"nodes,omitempty"`
	// MinNodes makes the gang elastic (0 means Nodes: rigid): on spot it
	// may hold any width from MinNodes to Nodes nodes that a tick's point
	// has in stock, and its work then progresses at width/Nodes of the
	// gang's rate; every change of width is a start, paying the restart
	// overhead. On-demand always holds the whole gang. See
	// docs/simulation.md.
	MinNodes int `json:"min_nodes,omitempty"`
	// Rules is the version of refuel's rules its policies decide by
	// (policy.Market.Rules): 0 for what live runs decide by, the
	// simulator's commands policy.RulesLatest.
	Rules int `json:"rules,omitempty"`
	// LearnsByTrying makes the run learn the stock of a zone it does not
	// hold only as the product does (see Meter.Try): by trying to acquire
	// spot there, refused for nothing or taken and held, from the market's
	// past before its start, and from the probes it pays for. False, every
	// zone's stock is seen at every tick, as runs on a market clock decide.
	LearnsByTrying bool `json:"learns_by_trying,omitempty"`
}

// ZonePrice is one zone's prices, region and cloud.
type ZonePrice struct {
	Region string `json:"region"`
	// Cloud is the cloud that sells the zone (aws, gce), when known. The
	// clouds name their regions apart, so a move between clouds is a move
	// between regions; Result.CloudMoves counts it also as one.
	Cloud    string  `json:"cloud,omitempty"`
	Spot     float64 `json:"spot"`     // USD per instance-hour
	OnDemand float64 `json:"ondemand"` // USD per instance-hour
}

// JobError names the field of a Job that is wrong and how to fix it.
type JobError struct {
	Field, Problem, Fix string
}

func (e *JobError) Error() string { return fmt.Sprintf("%s %s; %s", e.Field, e.Problem, e.Fix) }

// Validate checks that the job can be replayed at all.
func (j Job) Validate() error {
	switch {
	case j.Tier != spec.TierCritical && j.Tier != spec.TierDeadline && j.Tier != spec.TierFlexible:
		return &JobError{"tier", fmt.Sprintf("%q is not a tier", j.Tier), "use critical, deadline or flexible"}
	case j.Work <= 0:
		return &JobError{"work", "must be positive", "give the compute time, e.g. 48h"}
	case j.Deadline <= 0:
		return &JobError{"deadline", "must be positive", "give the time from start to deadline, e.g. 52h"}
	case j.RestartOverhead < 0:
		return &JobError{"restart overhead", "is negative", "give 0 or more, e.g. 12m"}
	case j.SpotPrice < 0 || j.OnDemandPrice < 0:
		return &JobError{"price", "is negative", "give USD per instance-hour, e.g. 0.9701 and 3.06"}
	case j.CheckpointGB < 0 || j.EgressUSDPerGB < 0:
		return &JobError{"checkpoint transfer", "is negative", "give the checkpoint's size in GB and the egress price in USD per GB, e.g. 50 and 0.02"}
	case j.TransferTime < 0:
		return &JobError{"transfer time", "is negative", "give 0 or more, e.g. 5m"}
	case j.Nodes < 0 || j.Nodes > spec.MaxNodes:
		return &JobError{"nodes", fmt.Sprintf("%d is outside 1..%d", j.Nodes, spec.MaxNodes), fmt.Sprintf("give the instances the job needs at once, 1 to %d", spec.MaxNodes)}
	case j.MinNodes < 0 || j.MinNodes > j.nodes():
		return &JobError{"min nodes", fmt.Sprintf("%d is outside 1..%d (the gang's nodes)", j.MinNodes, j.nodes()), "give the fewest nodes the gang may train on, at most its nodes"}
	}
	for i, z := range j.Zones {
		if z.Spot < 0 || z.OnDemand < 0 {
			return &JobError{fmt.Sprintf("zone %d's price", i), "is negative", "give USD per instance-hour, e.g. 0.9701 and 3.06"}
		}
	}
	return nil
}

// fits checks that the job prices a market of n zones.
func (j Job) fits(n int) error {
	if len(j.Zones) > 0 && len(j.Zones) != n {
		return &JobError{"zones", fmt.Sprintf("price %d zones, the market has %d", len(j.Zones), n), "give one price per zone of the market, in its order"}
	}
	return nil
}

// spotPrice, onDemandPrice and region are zone z's.
func (j Job) spotPrice(z int) float64 {
	if len(j.Zones) == 0 {
		return j.SpotPrice
	}
	return j.Zones[z].Spot
}

func (j Job) onDemandPrice(z int) float64 {
	if len(j.Zones) == 0 {
		return j.OnDemandPrice
	}
	return j.Zones[z].OnDemand
}

func (j Job) region(z int) string {
	if len(j.Zones) == 0 {
		return ""
	}
	return j.Zones[z].Region
}

func (j Job) cloud(z int) string {
	if len(j.Zones) == 0 {
		return ""
	}
	return j.Zones[z].Cloud
}

// moveUSD is what moving the checkpoint to another region costs.
func (j Job) moveUSD() float64 { return j.CheckpointGB * j.EgressUSDPerGB }

// nodes is the size of the gang, at least 1.
func (j Job) nodes() int { return max(1, j.Nodes) }

// minNodes is the fewest nodes the gang trains on: its nodes when rigid.
func (j Job) minNodes() int {
	if j.MinNodes == 0 {
		return j.nodes()
	}
	return j.MinNodes
}

// elastic reports whether the gang may train on fewer than its nodes.
func (j Job) elastic() bool { return j.minNodes() < j.nodes() }

// nodeMoveUSD is a node's share of a move. Policies plan a gang in one
// node's prices, every cost but the move being the gang's divided by its
// nodes: so a gang decides as one node would on the same stock, its
// shared move counted for what it is to the gang.
func (j Job) nodeMoveUSD() float64 { return j.moveUSD() / float64(j.nodes()) }

// moveTime is the transfer time in whole ticks of gap.
func (j Job) moveTime(gap time.Duration) time.Duration {
	return (j.TransferTime + gap - 1) / gap * gap
}

// cheapestOnDemand is the lowest on-demand price of any zone.
func (j Job) cheapestOnDemand() float64 {
	if len(j.Zones) == 0 {
		return j.OnDemandPrice
	}
	p := j.Zones[0].OnDemand
	for _, z := range j.Zones {
		p = min(p, z.OnDemand)
	}
	return p
}

// OnDemandCost is what the job costs on on-demand from start to end, in
// the zone where it is cheapest: one restart overhead and the work, on
// every node. Costs are reported as a share of it.
func (j Job) OnDemandCost() float64 {
	return (j.Work + j.RestartOverhead).Hours() * j.cheapestOnDemand() * float64(j.nodes())
}
