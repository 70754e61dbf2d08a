package main

import (
	"slices"
	"strings"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/cloud/sim/gceapi"
	"refuel/pkg/policy"
	"refuel/pkg/replay"
	"refuel/pkg/trace"
)

// cloudSim names the cloud of a zone whose name is of no public cloud's
// form (za, dc-1): the simulated cloud's.
const cloudSim = "sim"

// zoneOffering is what one zone of a replayed market sells, named as the
// control plane names offerings: cloud, instance type, zone.
type zoneOffering struct {
	Cloud, InstanceType, Zone string
	// known is whether InstanceType is one the cloud sells (else it is the
	// trace's own word for the machine, such as h100).
	known bool
}

// key is the offering's key on market m (gce/a3-highgpu-1g/us-central1-a/spot).
func (o zoneOffering) key(m capacity.Market) string {
	return capacity.Offering{Provider: o.Cloud, InstanceType: o.InstanceType, Zone: o.Zone, Market: m}.Key()
}

// zoneOfferings names the offering of each trace's zone, in the market's
// order. The cloud is the one the zone's name is of (trace.CloudOf); the
// instance type is instanceType where given, else the one the trace's
// name maps to in that cloud's catalogue. In a market of several clouds,
// instanceType names only the zones of the cloud that sells it.
func zoneOfferings(traces []*trace.Trace, instanceType string) []zoneOffering {
	out := make([]zoneOffering, len(traces))
	for i, t := range traces {
		out[i] = zoneOffering{Cloud: trace.CloudOf(t.Zone), Zone: t.Zone}
		if out[i].Cloud == "" {
			out[i].Cloud = cloudSim
		}
	}
	several := slices.ContainsFunc(out, func(o zoneOffering) bool { return o.Cloud != out[0].Cloud })
	sells := cloudOfType(instanceType)
	for i, t := range traces {
		o := &out[i]
		switch {
		case instanceType != "" && (!several || sells == o.Cloud):
			o.InstanceType, o.known = instanceType, true
		case o.Cloud == "gce":
			o.InstanceType, o.known = gceapi.MachineTypeOf(t)
		default:
			o.InstanceType, o.known = sim.InstanceTypeOf(t)
		}
		if !o.known {
			o.InstanceType = t.Instance
			if o.InstanceType == "" {
				o.InstanceType = "unknown"
			}
		}
	}
	return out
}

// cloudOfType is the cloud whose catalogue sells an instance type: aws
// for EC2's (p3.2xlarge), gce for Compute Engine's (a3-highgpu-8g), ""
// for a type neither catalogue has.
func cloudOfType(name string) string {
	has := func(c []sim.InstanceType) bool {
		return slices.ContainsFunc(c, func(t sim.InstanceType) bool { return t.Name == name })
	}
	switch {
	case name == "":
		return ""
	case has(gceapi.Catalogue()):
		return "gce"
	case has(sim.DefaultCatalogue()):
		return "aws"
	}
	return ""
}

// clouds lists the clouds of offerings, each once, in their order.
func clouds(offerings []zoneOffering) []string {
	var out []string
	for _, o := range offerings {
		if !slices.Contains(out, o.Cloud) {
			out = append(out, o.Cloud)
		}
	}
	return out
}

// simPlacement is one stretch of a replayed run on one offering: the
// timeline names each cloud, instance type and zone as offering keys.
type simPlacement struct {
	Offering  string  `json:"offering"`
	FromHours float64 `json:"from_hours"`
	Hours     float64 `json:"hours"`
	// Preempted is whether spot ended the stretch by taking it back.
	Preempted bool `json:"preempted,omitempty"`
}

// placements is a replayed run's timeline: each stretch it held one
// offering, from the start, consecutive ticks on the same one merged.
func placements(m *replay.Market, offerings []zoneOffering, r replay.Result) []simPlacement {
	var out []simPlacement
	var prev policy.Choice
	for i, s := range r.Steps {
		if s.Preempted && len(out) > 0 && prev.Holds() {
			out[len(out)-1].Preempted = true
		}
		c := s.Choice
		if !c.Holds() {
			prev = c
			continue
		}
		from := (time.Duration(i) * m.Gap).Hours()
		if len(out) > 0 && c == prev && !s.Preempted {
			out[len(out)-1].Hours = from + m.Gap.Hours() - out[len(out)-1].FromHours
		} else {
			key := string(c.Market) + "/" + c.Zone
			if z := slices.Index(m.Zones, c.Zone); z >= 0 {
				key = offerings[z].key(c.Market)
			}
			out = append(out, simPlacement{Offering: key, FromHours: from, Hours: m.Gap.Hours()})
		}
		prev = c
	}
	if len(out) > 0 {
		last := &out[len(out)-1]
		last.Hours = min(last.Hours, r.Finish.Hours()-last.FromHours)
	}
	return out
}

// placedJob is job with each zone placed in its region and cloud, at the
// job's one pair of prices, where the market spans several clouds: so a
// move between clouds is priced and counted as one between regions even
// without --prices.
func placedJob(job replay.Job, traces []*trace.Trace, offerings []zoneOffering) replay.Job {
	if len(job.Zones) > 0 || len(clouds(offerings)) < 2 {
		return job
	}
	job.Zones = make([]replay.ZonePrice, len(traces))
	for i, t := range traces {
		job.Zones[i] = replay.ZonePrice{Region: trace.Region(t.Zone), Cloud: offerings[i].Cloud, Spot: job.SpotPrice, OnDemand: job.OnDemandPrice}
	}
	return job
}

// cloudHeader is the table's columns for a market of several clouds.
func cloudHeader(several bool) string {
	if !several {
		return ""
	}
	return "cloud moves\tclouds\t"
}

// cloudPath is the clouds a timeline held, in order, each stay once
// (aws→gce→aws).
func cloudPath(ps []simPlacement) string {
	var path []string
	for _, p := range ps {
		c, _, _ := strings.Cut(p.Offering, "/")
		if len(path) == 0 || path[len(path)-1] != c {
			path = append(path, c)
		}
	}
	return strings.Join(path, "→")
}
