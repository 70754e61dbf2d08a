package main

import (
	"fmt"
	"time"

	"refuel/pkg/cloud/sim"
	"refuel/pkg/replay"
	"refuel/pkg/trace"
)

// embeddedPrices names the prices refuel embeds, for --prices.
const embeddedPrices = "embedded"

// loadPrices reads --prices: a price file, or the embedded prices.
func loadPrices(name string) (*trace.Prices, error) {
	if name == embeddedPrices {
		return sim.DefaultPrices(), nil
	}
	return trace.LoadPrices(name)
}

// pricedJob is job with each zone of the traces priced from prices as
// they stood when the window starting at tick start opened (the traces'
// tick 0 being the prices' start), on-demand by the zone's region. A zone
// the prices do not know keeps the job's --spot-price and
// --ondemand-price.
func pricedJob(job replay.Job, traces []*trace.Trace, gap time.Duration, start int, prices *trace.Prices) replay.Job {
	at := prices.Start().Add(time.Duration(start) * gap)
	job.Zones = make([]replay.ZonePrice, len(traces))
	for i, t := range traces {
		z := replay.ZonePrice{Region: trace.Region(t.Zone), Spot: job.SpotPrice, OnDemand: job.OnDemandPrice}
		if it, ok := sim.InstanceTypeOf(t); ok {
			if usd, ok := prices.SpotAt(t.Zone, it, at); ok {
				z.Spot = usd
			}
			if usd, ok := prices.OnDemandIn(z.Region, it); ok {
				z.OnDemand = usd
			}
		}
		job.Zones[i] = z
	}
	return job
}

// transferTime is how long moving a checkpoint of gb gigabytes takes at
// gbps gigabits a second.
func transferTime(gb, gbps float64) time.Duration {
	if gb <= 0 || gbps <= 0 {
		return 0
	}
	return time.Duration(gb * 8 / gbps * float64(time.Second))
}

// describePrices says in a line how the zones are priced.
func describePrices(job replay.Job) string {
	if len(job.Zones) == 0 {
		return fmt.Sprintf("spot $%.4f/h, on-demand $%.2f/h everywhere", job.SpotPrice, job.OnDemandPrice)
	}
	return fmt.Sprintf("each zone at its own prices; a move between regions moves a %g GB checkpoint for $%.2f and %s",
		job.CheckpointGB, job.CheckpointGB*job.EgressUSDPerGB, job.TransferTime.Round(time.Second))
}
