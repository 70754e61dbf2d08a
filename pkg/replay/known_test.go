package replay

import (
	"testing"
	"time"

	"refuel/pkg/policy"
	"refuel/pkg/spec"
)

// recorder decides nothing, and keeps a copy of the views it was shown
// (the meter reuses its view's zones).
type recorder struct{ seen []policy.Market }

func (r *recorder) Decide(_ int, _ policy.State, m policy.Market, _ policy.Gang) (policy.Choice, error) {
	m.Zones = append([]policy.Zone(nil), m.Zones...)
	r.seen = append(r.seen, m)
	return policy.None, nil
}

// runKnown replays job from start with d planning with the window's
// statistics.
func runKnown(t *testing.T, mk *Market, job Job, start int, d Decider) {
	t.Helper()
	known, err := NewKnownStatistics(mk, job, start, d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(mk, job, start, known); err != nil {
		t.Fatal(err)
	}
}

func TestKnownStatisticsPlansWithTheWindow(t *testing.T) {
	m := time.Minute
	// The past (ticks 0-3) is one long stretch in stock; the window (ticks
	// 4-9) is two stretches out of stock and two in.
	mk := market(t, 10*m, []int{1, 1, 1, 1, 0, 1, 1, 0, 0, 1, 1, 1})
	job := Job{Tier: spec.TierDeadline, Work: 10 * m, Deadline: 60 * m, SpotPrice: 1, OnDemandPrice: 3}
	inner := &recorder{}
	runKnown(t, mk, job, 4, inner)
	if len(inner.seen) == 0 {
		t.Fatal("the wrapped decider was never asked")
	}
	for i, v := range inner.seen {
		h := v.Zones[0].History
		for _, st := range []struct {
			name    string
			in, out policy.Stretches
		}{{"fitted", h.FitIn, h.FitOut}, {"counted", h.In, h.Out}} {
			if st.in.Count != 2 || st.out.Count != 2 || st.in.Total != 30*m || st.out.Total != 30*m {
				t.Fatalf("decision %d planned with %s in %d stretches (%s), out %d (%s); want the window's 2 (30m) and 2 (30m)",
					i, st.name, st.in.Count, st.in.Total, st.out.Count, st.out.Total)
			}
		}
	}
	// The stretch under way stays the run's own: at the window's first
	// decision, stock that has lasted its past's 40 minutes.
	if h := inner.seen[0].Zones[0].History; !h.Last || h.Since != 40*m {
		t.Fatalf("the wrapped run's stretch under way: in stock %v for %s; want in stock for 40m", h.Last, h.Since)
	}
	// Without it the run plans with its past: one stretch in stock of
	// 40 minutes closed at tick 4.
	plain := &recorder{}
	if _, err := Run(mk, job, 4, plain); err != nil {
		t.Fatal(err)
	}
	if h := plain.seen[1].Zones[0].History; h.In.Count != 1 || h.In.Total != 40*m {
		t.Fatalf("the run's own history: %d stretches in stock (%s); want 1 (40m)", h.In.Count, h.In.Total)
	}
}

// Across zones the stock a roaming run would have seen is the window's
// too, and the wrapped decider probes as it would unwrapped.
func TestKnownStatisticsAcrossZones(t *testing.T) {
	m := time.Minute
	// In the window (ticks 4-9) z0 has stock at 4-5 and z1 at 7-8: the
	// roaming run sees stock, then an outage of a tick, then stock again,
	// then an outage. Before it, both had stock throughout.
	mk := market(t, 10*m,
		[]int{1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1},
		[]int{1, 1, 1, 1, 0, 0, 0, 1, 1, 0, 1, 1})
	job := Job{Tier: spec.TierDeadline, Work: 10 * m, Deadline: 60 * m, SpotPrice: 1, OnDemandPrice: 3}
	inner := &probing{}
	runKnown(t, mk, job, 4, inner)
	if len(inner.seen) == 0 || inner.probes == 0 {
		t.Fatalf("the wrapped decider was asked %d times and probed %d times; want both", len(inner.seen), inner.probes)
	}
	r := inner.seen[0].Roaming.Availability
	if r.In.Count != 2 || r.In.Total != 40*m || r.Out.Count != 2 || r.Out.Total != 20*m {
		t.Fatalf("the stock across zones: in %d stretches (%s), out %d (%s); want the window's 2 (40m) and 2 (20m)",
			r.In.Count, r.In.Total, r.Out.Count, r.Out.Total)
	}
	if r.FitIn != r.In || r.FitOut != r.Out {
		t.Fatalf("the stock across zones is fitted with %+v and %+v, counted as %+v and %+v", r.FitIn, r.FitOut, r.In, r.Out)
	}
}

// probing is a recorder that is asked to probe.
type probing struct {
	recorder
	probes int
}

func (p *probing) Probe(int, policy.State, policy.Choice, policy.Market, bool, func(int) bool) {
	p.probes++
}
