package replay

import (
	"fmt"
	"math"
	"testing"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/policy"
	"refuel/pkg/spec"
)

// cheapestSpot takes spot in the first zone shown in stock, else holds
// nothing, and keeps a copy of every view it was shown.
type cheapestSpot struct {
	ticks []int
	seen  []policy.Market
}

func (c *cheapestSpot) Decide(t int, _ policy.State, m policy.Market, _ policy.Gang) (policy.Choice, error) {
	m.Zones = append([]policy.Zone(nil), m.Zones...)
	c.ticks, c.seen = append(c.ticks, t), append(c.seen, m)
	for _, z := range m.Zones {
		if z.SpotAvailable {
			return policy.Choice{Market: capacity.Spot, Zone: z.Name}, nil
		}
	}
	return policy.None, nil
}

func available(m policy.Market) []bool {
	var out []bool
	for _, z := range m.Zones {
		out = append(out, z.SpotAvailable)
	}
	return out
}

func TestARunThatLearnsByTryingIsRefusedForNothingAndDecidesAgain(t *testing.T) {
	// z0 is out of stock from the window's start (tick 2) on; z1 in.
	mk := market(t, 10*time.Minute, []int{1, 1, 0, 0, 0, 0}, []int{1, 1, 1, 1, 1, 1})
	job := Job{Tier: spec.TierFlexible, Work: 20 * time.Minute, Deadline: time.Hour, SpotPrice: 1, OnDemandPrice: 3}
	for _, learns := range []bool{false, true} {
		job.LearnsByTrying = learns
		d := &cheapestSpot{}
		res, err := Run(mk, job, 2, d)
		if err != nil {
			t.Fatal(err)
		}
		if res.Cost != 20.0/60 || res.Steps[0].Choice.Zone != "z1" || res.ProbeUSD != 0 {
			t.Errorf("learns %v: cost %v, first held %s, probes %v; want z1 from the first tick for 20 spot-minutes and nothing else",
				learns, res.Cost, res.Steps[0].Choice, res.ProbeUSD)
		}
		first := available(d.seen[0])
		if !learns {
			if len(d.seen) != 2 || first[0] || !first[1] {
				t.Errorf("seeing every zone: asked %d times, first shown %v; want 2 decisions, z0 out from the first", len(d.seen), first)
			}
			continue
		}
		// Learning by trying: each tick's first decision is shown z0 as a
		// try may find it, the refusal is free, and the tick is decided
		// again on z0 out.
		if fmt.Sprint(d.ticks) != "[0 0 1 1]" || !first[0] {
			t.Fatalf("asked at ticks %v, first shown %v; want ticks [0 0 1 1] and z0 shown as a try may find it", d.ticks, first)
		}
		if again := available(d.seen[1]); again[0] || !again[1] {
			t.Errorf("after the refusal shown %v, want z0 out and z1 as a try may find it", again)
		}
		// The next tick the run holds z1 and tries z0 again.
		if next := available(d.seen[2]); !next[0] || !next[1] {
			t.Errorf("the tick after shown %v, want z0 tried afresh and z1 held in stock", next)
		}
	}
}

func TestAZoneNotTriedKeepsWhatWasLastSeenOfIt(t *testing.T) {
	// z1 runs out at tick 3, after the run started on z0 at tick 2.
	mk := market(t, 10*time.Minute, []int{1, 1, 1, 1, 1, 1, 1}, []int{1, 1, 1, 0, 0, 0, 0})
	job := Job{Tier: spec.TierFlexible, Work: 50 * time.Minute, Deadline: 2 * time.Hour, SpotPrice: 1, OnDemandPrice: 3}
	for _, learns := range []bool{false, true} {
		job.LearnsByTrying = learns
		d := &cheapestSpot{}
		if _, err := Run(mk, job, 2, d); err != nil {
			t.Fatal(err)
		}
		last := d.seen[len(d.seen)-1]
		h := last.Zones[1].History
		if learns && (!h.Last || h.Since < 4*10*time.Minute) {
			t.Errorf("learning by trying, z1's history ends %v for %s; want in stock as last seen, since before the window", h.Last, h.Since)
		}
		if !learns && h.Last {
			t.Errorf("seeing every zone, z1's history ends in stock; want out, as it went at tick 3")
		}
		if learns && last.Roaming.Last != true {
			t.Errorf("learning by trying, the stock across zones ends out; want in, z0 held")
		}
		// What the run watched of z1 stops where it last looked: the
		// market's past, before the run, and nothing after.
		w := last.Zones[1].Watched
		if learns && (!w.Last || w.Since != 2*10*time.Minute) {
			t.Errorf("learning by trying, z1 watched ends %v for %s; want in stock for the two ticks before the window", w.Last, w.Since)
		}
		if !learns && w != h {
			t.Errorf("seeing every zone, z1 watched %+v, history %+v; want them alike", w, h)
		}
		if w0 := last.Zones[0].Watched; w0.Since != last.Zones[0].History.Since {
			t.Errorf("z0, held throughout, watched for %s and known for %s; want alike", w0.Since, last.Zones[0].History.Since)
		}
	}
}

func TestAProbeShowsTheZoneToARunThatLearnsByTrying(t *testing.T) {
	mk := market(t, 10*time.Minute, []int{1, 1, 1, 1}, []int{1, 1, 0, 0})
	job := Job{Tier: spec.TierFlexible, Work: 30 * time.Minute, Deadline: time.Hour, SpotPrice: 1, OnDemandPrice: 3, LearnsByTrying: true}
	meter, err := NewMeter(job, mk.Zones, mk.Gap)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := meter.WitnessCounts(mk.CountsAt(i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, _, err := meter.BeginCounts(mk.CountsAt(2, 1)); err != nil {
		t.Fatal(err)
	}
	if meter.Probe(1, time.Minute) {
		t.Fatal("a probe of z1 out of stock was taken")
	}
	if _, err := meter.Hold(policy.Choice{Market: capacity.Spot, Zone: "z0"}); err != nil {
		t.Fatal(err)
	}
	_, view, _, err := meter.BeginCounts(mk.CountsAt(3, 1))
	if err != nil {
		t.Fatal(err)
	}
	if h := view.Zones[1].History; h.Last || h.Since != 10*time.Minute {
		t.Errorf("z1's history ends %v for %s after the refused probe; want out for one tick", h.Last, h.Since)
	}
}

func TestRefuelPaysForItsProbesOnlyWhereItLearnsByTrying(t *testing.T) {
	// z1 is out before the start (tick 3) and back from tick 4 on; the
	// run holds z0 throughout.
	z0 := make([]int, 24)
	z1 := make([]int, 24)
	for i := range z0 {
		z0[i] = 1
		if i >= 4 {
			z1[i] = 1
		}
	}
	mk := market(t, 10*time.Minute, z0, z1)
	job := Job{Tier: spec.TierDeadline, Work: 2 * time.Hour, Deadline: 3 * time.Hour, SpotPrice: 1, OnDemandPrice: 3}
	for _, learns := range []bool{false, true} {
		job.LearnsByTrying = learns
		res, err := Run(mk, job, 3, NewOnline(job.Tier, policy.Refuel))
		if err != nil {
			t.Fatal(err)
		}
		// Learning, z1 is tried at the start (refused, free) and an hour
		// later (taken: a minute billed); then it is believed in stock.
		want := 0.0
		if learns {
			want = 1.0 / 60
		}
		if math.Abs(res.ProbeUSD-want) > 1e-9 || !res.DeadlineMet {
			t.Errorf("learns %v: probes $%.4f, deadline met %v; want $%.4f and met", learns, res.ProbeUSD, res.DeadlineMet, want)
		}
	}
}

func TestACriticalRunMakesNoProbes(t *testing.T) {
	// A critical run holds on-demand whatever spot does: learning the
	// stock of z1, out before the start and back later, is worth nothing
	// to it.
	z0 := make([]int, 24)
	z1 := make([]int, 24)
	for i := range z0 {
		if i >= 4 {
			z1[i] = 1
		}
	}
	mk := market(t, 10*time.Minute, z0, z1)
	job := Job{Tier: spec.TierCritical, Work: 2 * time.Hour, Deadline: 3 * time.Hour, SpotPrice: 1, OnDemandPrice: 3, LearnsByTrying: true}
	res, err := Run(mk, job, 3, NewOnline(job.Tier, policy.Refuel))
	if err != nil {
		t.Fatal(err)
	}
	if res.ProbeUSD != 0 || res.Spot != 0 {
		t.Errorf("a critical run paid $%.4f for probes and held spot %s; want neither", res.ProbeUSD, res.Spot)
	}
}

// waiter takes on-demand, and lets go of it to wait while it is shown
// spot in stock somewhere.
type waiter struct{}

func (waiter) Decide(t int, _ policy.State, m policy.Market, _ policy.Gang) (policy.Choice, error) {
	for _, z := range m.Zones {
		if z.SpotAvailable && t > 0 {
			return policy.None, nil
		}
	}
	return policy.Choice{Market: capacity.OnDemand, Zone: "z0"}, nil
}

func TestARunLetsGoOfItsInstanceOnlyAfterTryingTheZonesShownInStock(t *testing.T) {
	job := Job{Tier: spec.TierDeadline, Work: 30 * time.Minute, Deadline: time.Hour, SpotPrice: 1, OnDemandPrice: 3, LearnsByTrying: true}
	for name, tc := range map[string]struct {
		z1     []int
		probes float64
		second policy.Choice
	}{
		"out of stock: the tries are refused, and it keeps on-demand": {z1: []int{0, 0, 0, 0, 0}, second: policy.Choice{Market: capacity.OnDemand, Zone: "z0"}},
		"in stock: a probe is taken, billed, and it waits":            {z1: []int{0, 1, 1, 1, 1}, probes: 1.0 / 60, second: policy.None},
	} {
		t.Run(name, func(t *testing.T) {
			mk := market(t, 10*time.Minute, []int{0, 0, 0, 0, 0}, tc.z1)
			res, err := Run(mk, job, 1, waiter{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Steps[1].Choice != tc.second || math.Abs(res.ProbeUSD-tc.probes) > 1e-9 {
				t.Errorf("held %s at the second tick, probes $%.4f; want %s and $%.4f", res.Steps[1].Choice, res.ProbeUSD, tc.second, tc.probes)
			}
		})
	}
}
