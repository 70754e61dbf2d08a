package training

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/pkg/capacity"
	"refuel/pkg/policy"
	"refuel/pkg/trace"
	"refuel/workflows/workload"
)

// pricesZones reports whether the run decides with priced zones.
func pricesZones(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, pricedZonesVersion, workflow.DefaultVersion, 1) >= 1
}

// rules is the version of refuel's rules the run decides by
// (policy.Market.Rules): the latest when the run first asks, kept for
// the rest of the run and on every replay; 0 for runs recorded before
// rulesVersion.
func rules(ctx workflow.Context) int {
	return max(0, int(workflow.GetVersion(ctx, rulesVersion, workflow.DefaultVersion, policy.RulesLatest)))
}

// movePrices are what moving a checkpoint between regions costs a run
// (RunOptions.EgressUSDPerGB, CheckpointGB and TransferGbps).
type movePrices struct {
	EgressUSDPerGB, CheckpointGB, TransferGbps float64
}

func movePricesOf(o workload.RunOptions) movePrices {
	return movePrices{EgressUSDPerGB: o.EgressUSDPerGB, CheckpointGB: o.CheckpointGB, TransferGbps: o.TransferGbps}
}

// of is the move of a checkpoint of gb gigabytes out of region: its
// egress, and its transfer time (none without a rate).
func (p movePrices) of(region string, gb float64) policy.Move {
	m := policy.Move{Region: region, USD: gb * p.EgressUSDPerGB}
	if gb > 0 && p.TransferGbps > 0 {
		m.Time = time.Duration(gb * 8 / p.TransferGbps * float64(time.Second))
	}
	return m
}

// regionOf is the region an offering's zone is in, as the clouds name
// zones (EC2's us-west-2a is in us-west-2; the sim names its zones after
// the traces', which are EC2's).
func regionOf(o capacity.Offering) string { return trace.Region(o.Zone) }

// move is what a start in another region costs the run now: its
// checkpoint is where the instance it holds is, or else where the last
// one it held was, once it has one; its size is the latest checkpoint's,
// or p's CheckpointGB while its checkpoints do not say.
func (c runClock) move(p movePrices) policy.Move {
	r := c.r
	gb := p.CheckpointGB
	if c := r.LastCheckpoint; c != nil && c.Bytes > 0 {
		gb = float64(c.Bytes) / 1e9
	}
	return p.of(c.checkpointRegion(), gb)
}

// checkpointRegion is the region of the instance the run holds, or of
// the last one it held once it has a checkpoint; "" before.
func (c runClock) checkpointRegion() string {
	r := c.r
	if r.Lease != nil {
		return regionOf(r.Lease.Offering())
	}
	if r.LastCheckpoint == nil {
		return ""
	}
	segs := r.Ledger.Segments
	for i := len(segs) - 1; i >= 0; i-- {
		for _, o := range r.Offerings {
			if o.Key() == segs[i].Offering {
				return regionOf(o)
			}
		}
	}
	return ""
}

// onDemandBeside is the on-demand price of o's instance type in o's zone,
// or 0 where the run may not take on-demand there.
func (c runClock) onDemandBeside(o capacity.Offering) float64 {
	r := c.r
	for _, od := range r.Offerings {
		if od.Market == capacity.OnDemand && od.Provider == o.Provider && od.InstanceType == o.InstanceType && od.Zone == o.Zone {
			return od.PricePerHour
		}
	}
	return 0
}

// spotPlace is the name refuel's market gives the place of offering o:
// the key of the spot offering of its type in its zone, which is how
// spotMarket names its zones; o's own key where none is sold.
func (c runClock) spotPlace(o capacity.Offering) string {
	for _, s := range c.spotOfferings() {
		if s.Provider == o.Provider && s.InstanceType == o.InstanceType && s.Zone == o.Zone {
			return s.Key()
		}
	}
	return o.Key()
}
