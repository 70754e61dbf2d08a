package replay

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/policy"
	"refuel/pkg/spec"
	"refuel/pkg/trace"
)

// market builds a market from points per zone, one tick = gap.
func market(t *testing.T, gap time.Duration, zones ...[]int) *Market {
	t.Helper()
	var ts []*trace.Trace
	for i, pts := range zones {
		ts = append(ts, &trace.Trace{Name: fmt.Sprintf("z%d", i), Zone: fmt.Sprintf("z%d", i), Gap: gap, Points: pts})
	}
	m, err := NewMarket(ts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// bruteForce tries every sequence of choices over the deadline's ticks and
// returns the cheapest cost that meets the deadline, +Inf if none does.
func bruteForce(t *testing.T, m *Market, job Job) float64 {
	t.Helper()
	options := []policy.Choice{policy.None, {Market: capacity.OnDemand}}
	for _, z := range m.Zones {
		options = append(options, policy.Choice{Market: capacity.Spot, Zone: z})
	}
	n := m.ticksIn(job.Deadline)
	best := math.Inf(1)
	plan := make(Plan, n)
	var walk func(i int)
	walk = func(i int) {
		if i == n {
			r, err := Run(m, job, 0, plan)
			var ce *ChoiceError
			if err != nil && !asChoiceError(err, &ce) {
				t.Fatal(err)
			}
			if err == nil && r.DeadlineMet && r.Cost < best {
				best = r.Cost
			}
			return
		}
		for _, c := range options {
			if c.Market == capacity.Spot && !m.Available(m.zoneIndex(c.Zone), i) {
				continue
			}
			plan[i] = c
			walk(i + 1)
		}
	}
	walk(0)
	return best
}

func asChoiceError(err error, target **ChoiceError) bool {
	ce, ok := err.(*ChoiceError)
	*target = ce
	return ok
}

func TestOptimalMatchesBruteForce(t *testing.T) {
	s := time.Second
	cases := map[string]struct {
		gap, ovh, work, deadline time.Duration
		zones                    [][]int
	}{
		"overhead within a tick":          {3 * s, 2 * s, 8 * s, 14 * s, [][]int{{1, 1, 0, 1, 1, 0, 1}}},
		"overhead longer than a tick":     {3 * s, 5 * s, 7 * s, 17 * s, [][]int{{1, 0, 1, 1, 1, 0, 1}}},
		"no overhead":                     {4 * s, 0, 9 * s, 20 * s, [][]int{{0, 1, 1, 0, 1, 1}}},
		"deadline mid-tick":               {4 * s, 3 * s, 10 * s, 19 * s, [][]int{{1, 1, 0, 0, 1, 1}}},
		"too tight for anything":          {4 * s, 3 * s, 10 * s, 12 * s, [][]int{{1, 1, 1, 1}}},
		"two zones":                       {3 * s, 4 * s, 6 * s, 16 * s, [][]int{{1, 0, 0, 1, 1, 0}, {0, 1, 1, 0, 1, 1}}},
		"spot never in stock":             {5 * s, 2 * s, 9 * s, 25 * s, [][]int{{0, 0, 0, 0, 0}}},
		"overhead a whole number of gaps": {2 * s, 4 * s, 5 * s, 13 * s, [][]int{{1, 1, 1, 0, 1, 1, 1}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			checkOptimal(t, market(t, tc.gap, tc.zones...), Job{Tier: spec.TierDeadline, Work: tc.work, Deadline: tc.deadline, RestartOverhead: tc.ovh, SpotPrice: 1, OnDemandPrice: 3.1})
		})
	}
}

func TestOptimalMatchesBruteForceOnRandomMarkets(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 2026))
	for n := range 150 {
		gap := time.Duration(2+rng.IntN(4)) * time.Second
		ovh := time.Duration(rng.IntN(9)) * time.Second
		zones := 1 + rng.IntN(2)
		ticks := 6 - zones
		work := time.Duration(1+rng.IntN(int(ticks)*int(gap/time.Second)-1)) * time.Second
		deadline := min(work+ovh+time.Duration(rng.IntN(10))*time.Second, time.Duration(ticks)*gap)
		if deadline < work {
			continue
		}
		points := make([][]int, zones)
		for z := range points {
			for range ticks {
				points[z] = append(points[z], rng.IntN(2))
			}
		}
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			checkOptimal(t, market(t, gap, points...), Job{Tier: spec.TierDeadline, Work: work, Deadline: deadline, RestartOverhead: ovh, SpotPrice: 0.97, OnDemandPrice: 3.06})
		})
	}
}

func checkOptimal(t *testing.T, m *Market, job Job) {
	t.Helper()
	want := bruteForce(t, m, job)
	plan, got, err := optimize(m, job, 0)
	if err != nil {
		t.Fatal(err)
	}
	if math.IsInf(want, 1) != math.IsInf(got, 1) || (!math.IsInf(want, 1) && math.Abs(got-want) > 1e-9*want) {
		t.Fatalf("optimal cost %v, brute force %v", got, want)
	}
	r, err := Run(m, job, 0, plan)
	if err != nil {
		t.Fatal(err)
	}
	if math.IsInf(want, 1) {
		if r.DeadlineMet {
			t.Fatalf("brute force found no plan meeting the deadline, but the fallback plan met it")
		}
		return
	}
	if !r.DeadlineMet || math.Abs(r.Cost-want) > 1e-9*want {
		t.Fatalf("replayed plan %v: cost %v, deadline met %v; want %v and met", plan, r.Cost, r.DeadlineMet, want)
	}
}
