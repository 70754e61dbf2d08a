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
		for w := job.minNodes(); w < job.nodes(); w++ {
			options = append(options, policy.Choice{Market: capacity.Spot, Zone: z, Nodes: w})
		}
		options = append(options, policy.Choice{Market: capacity.Spot, Zone: z})
		if len(job.Zones) > 0 {
			options = append(options, policy.Choice{Market: capacity.OnDemand, Zone: z})
		}
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
			width := job.nodes()
			if c.Nodes > 0 {
				width = c.Nodes
			}
			if c.Market == capacity.Spot && m.Count(m.zoneIndex(c.Zone), i, job.nodes()) < width {
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

func TestOptimalMatchesBruteForceAcrossPricedRegions(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 2026))
	for n := range 120 {
		gap := time.Duration(2+rng.IntN(3)) * time.Second
		ovh := time.Duration(rng.IntN(6)) * time.Second
		zones := 2 + rng.IntN(2)
		ticks := 7 - zones
		transfer := time.Duration(rng.IntN(5)) * time.Second
		work := time.Duration(1+rng.IntN(int(ticks)*int(gap/time.Second)-1)) * time.Second
		// Deadlines with little slack to wait in, so that plans move.
		deadline := min(work+2*ovh+transfer+time.Duration(rng.IntN(4))*time.Second, time.Duration(ticks)*gap)
		if deadline < work {
			continue
		}
		job := Job{Tier: spec.TierDeadline, Work: work, Deadline: deadline, RestartOverhead: ovh,
			CheckpointGB: 10, EgressUSDPerGB: 0.002 * float64(rng.IntN(3)), TransferTime: transfer}
		// Region r1 is much cheaper than r0 but mostly in stock only
		// later, so that plans move.
		points := make([][]int, zones)
		for z := range points {
			r := z % 2
			for i := range ticks {
				in := rng.IntN(2)
				if r == 1 && i < ticks/2 && rng.IntN(4) > 0 {
					in = 0
				}
				points[z] = append(points[z], in)
			}
			job.Zones = append(job.Zones, ZonePrice{Region: fmt.Sprint("r", r), Spot: 0.1 + 0.2*rng.Float64() + float64(1-r), OnDemand: 4 - rng.Float64()})
		}
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			checkOptimal(t, market(t, gap, points...), job)
		})
	}
}

func TestOptimalMovesWhenTheMovePays(t *testing.T) {
	s := time.Second
	// Spot in r1 is a tenth of r0's but comes two ticks late, too late
	// to wait for: the cheapest plan starts in r0 and moves.
	m := market(t, 2*s, []int{1, 1, 1, 1, 1}, []int{0, 0, 1, 1, 1})
	job := Job{Tier: spec.TierDeadline, Work: 6 * s, Deadline: 10 * s, RestartOverhead: s,
		Zones:        []ZonePrice{{Region: "r0", Spot: 1, OnDemand: 4}, {Region: "r1", Spot: 0.1, OnDemand: 4}},
		CheckpointGB: 1, EgressUSDPerGB: 0.0001, TransferTime: 2 * s}
	if r := checkOptimal(t, m, job); r.Transfers != 1 || r.EgressUSD != 0.0001 {
		t.Errorf("%d transfers costing $%v; want the one move", r.Transfers, r.EgressUSD)
	}
	job.EgressUSDPerGB = 0.01
	if r := checkOptimal(t, m, job); r.Transfers != 0 {
		t.Errorf("%d transfers when the egress costs more than the move saves; want none", r.Transfers)
	}
}

func checkOptimal(t *testing.T, m *Market, job Job) Result {
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
		return r
	}
	if !r.DeadlineMet || math.Abs(r.Cost-want) > 1e-9*want {
		t.Fatalf("replayed plan %v: cost %v, deadline met %v; want %v and met", plan, r.Cost, r.DeadlineMet, want)
	}
	return r
}
