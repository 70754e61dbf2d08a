package main

import (
	"fmt"
	"strings"
	"time"

	"refuel/pkg/cloud/gce"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/replay"
	"refuel/pkg/trace"
)

// embeddedPrices names the prices refuel embeds, for --prices.
const embeddedPrices = "embedded"

// isPriceTable reports whether --prices names a table of each zone's
// prices (.csv, as readZonePrices reads) rather than a price file.
func isPriceTable(name string) bool { return strings.HasSuffix(strings.ToLower(name), ".csv") }

// tabledJob is job with each zone of the traces at its row of table
// (read from file), placed in its cloud: the row's prices hold for every
// window. A zone the table has no row for is an error naming it.
func tabledJob(job replay.Job, traces []*trace.Trace, offerings []zoneOffering, table map[string]replay.ZonePrice, file string) (replay.Job, error) {
	job.Zones = make([]replay.ZonePrice, len(traces))
	for i, t := range traces {
		z, ok := table[t.Zone]
		if !ok {
			return job, &UnpricedZoneError{Zone: t.Zone, File: file, Problem: "has no row for it"}
		}
		if z.Region == "" {
			z.Region = trace.Region(t.Zone)
		}
		z.Cloud = offerings[i].Cloud
		job.Zones[i] = z
	}
	return job, nil
}

// loadPrices reads --prices: a price file, or the embedded prices.
func loadPrices(name string) (*trace.Prices, error) {
	if name == embeddedPrices {
		return sim.DefaultPrices(), nil
	}
	return trace.LoadPrices(name)
}

// pricedJob is job with each zone of the traces priced from prices (read
// from the file named file) as they stood when the window starting at
// tick start opened (the traces' tick 0 being the prices' start),
// on-demand by the zone's region, and placed in its cloud. A zone's
// instance type is instanceType when given (any cloud's: an EC2 type, a
// GCE machine type; in a market of several clouds, for the zones of the
// cloud that sells it), else the one its trace's name maps to in its
// cloud's catalogue. With the embedded prices and gceTable, a Compute
// Engine zone is priced from refuel's Compute Engine price table (its
// region's row). A
// zone the prices do not price is an error naming it and the file: no
// zone is silently charged another's price.
func pricedJob(job replay.Job, traces []*trace.Trace, gap time.Duration, start int, prices *trace.Prices, file, instanceType string, gceTable bool) (replay.Job, error) {
	at := prices.Start().Add(time.Duration(start) * gap)
	offerings := zoneOfferings(traces, instanceType)
	job.Zones = make([]replay.ZonePrice, len(traces))
	for i, t := range traces {
		o := offerings[i]
		if !o.known {
			return job, &UnpricedZoneError{Zone: t.Zone, File: file, Problem: fmt.Sprintf("its trace %s names no instance type refuel knows (%s × %d)", t.File, t.Instance, t.Count)}
		}
		it := o.InstanceType
		z := replay.ZonePrice{Region: trace.Region(t.Zone), Cloud: o.Cloud}
		if o.Cloud == "gce" && file == embeddedPrices && gceTable {
			p, ok := gceRegionPrice(it, z.Region)
			if !ok {
				return job, &UnpricedZoneError{Zone: t.Zone, File: file, Problem: fmt.Sprintf("has no Compute Engine price for %s in region %s", it, z.Region)}
			}
			z.Spot, z.OnDemand = p.Spot, p.OnDemand
			job.Zones[i] = z
			continue
		}
		var ok bool
		if z.Spot, ok = prices.SpotAt(t.Zone, it, at); !ok {
			return job, &UnpricedZoneError{Zone: t.Zone, File: file, Problem: fmt.Sprintf("has no spot price for %s there", it)}
		}
		if z.OnDemand, ok = prices.OnDemandIn(z.Region, it); !ok {
			return job, &UnpricedZoneError{Zone: t.Zone, File: file, Problem: fmt.Sprintf("has no on-demand price for %s in region %s", it, z.Region)}
		}
		job.Zones[i] = z
	}
	return job, nil
}

// gceRegionPrice is a machine type's row of refuel's Compute Engine price
// table in region itself: not the table's stand-in region, which would
// charge one region another's price.
func gceRegionPrice(machineType, region string) (gce.Price, bool) {
	for _, p := range gce.DefaultPrices().Prices {
		if p.MachineType == machineType && p.Region == region {
			return p, true
		}
	}
	return gce.Price{}, false
}

// UnpricedZoneError is a zone the prices given cannot price.
type UnpricedZoneError struct {
	Zone, File, Problem string
}

func (e *UnpricedZoneError) Error() string {
	if strings.Contains(e.Problem, "trace") {
		return fmt.Sprintf("zone %s cannot be priced from %s: %s; give its instance type with --instance-type (e.g. p3.2xlarge, a3-highgpu-8g)", e.Zone, e.File, e.Problem)
	}
	return fmt.Sprintf("zone %s cannot be priced from %s: the file %s; add the zone's prices to the file or drop its trace", e.Zone, e.File, e.Problem)
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
