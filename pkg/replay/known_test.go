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

func TestKnownStatisticsPlansWithTheWindow(t *testing.T) {
	m := time.Minute
	// The past (ticks 0-3) is one long stretch in stock; the window (ticks
	// 4-9) is two stretches out of stock and two in.
	mk := market(t, 10*m, []int{1, 1, 1, 1, 0, 1, 1, 0, 0, 1, 1, 1})
	job := Job{Tier: spec.TierDeadline, Work: 10 * m, Deadline: 60 * m, SpotPrice: 1, OnDemandPrice: 3}
	inner := &recorder{}
	if _, err := Run(mk, job, 4, NewKnownStatistics(mk, 4, job.Deadline, 1, inner)); err != nil {
		t.Fatal(err)
	}
	if len(inner.seen) == 0 {
		t.Fatal("the wrapped decider was never asked")
	}
	for i, v := range inner.seen {
		h := v.Zones[0].History
		if h.FitIn.Count != 2 || h.FitOut.Count != 2 || h.FitIn.Total != 30*m || h.FitOut.Total != 30*m {
			t.Fatalf("decision %d planned with in %d stretches (%s), out %d (%s); want the window's 2 (30m) and 2 (30m)",
				i, h.FitIn.Count, h.FitIn.Total, h.FitOut.Count, h.FitOut.Total)
		}
	}
	// What the run itself saw stays its own: its past, one stretch in
	// stock of 40 minutes closed at tick 4.
	plain := &recorder{}
	if _, err := Run(mk, job, 4, plain); err != nil {
		t.Fatal(err)
	}
	if h := plain.seen[1].Zones[0].History; h.In.Count != 1 || h.In.Total != 40*m {
		t.Fatalf("the run's own history: %d stretches in stock (%s); want 1 (40m)", h.In.Count, h.In.Total)
	}
	if h := inner.seen[1].Zones[0].History; h.In.Count != 1 || h.In.Total != 40*m {
		t.Fatalf("the wrapped run's own counts changed: %d stretches in stock (%s); want 1 (40m)", h.In.Count, h.In.Total)
	}
}
