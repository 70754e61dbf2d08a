package replay

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"refuel/pkg/capacity"
	"refuel/pkg/policy"
	"refuel/pkg/spec"
	"refuel/pkg/trace"
)

var (
	spot = policy.Choice{Market: capacity.Spot, Zone: "z0"}
	od   = policy.Choice{Market: capacity.OnDemand}
	none = policy.None
)

func TestRunFollowsTheModel(t *testing.T) {
	m := time.Minute
	cases := map[string]struct {
		points []int
		ovh    time.Duration
		work   time.Duration
		plan   Plan
		want   Result
	}{
		"overhead spans ticks; the last tick counts until done": {
			points: []int{1, 1, 1, 1, 1, 1}, ovh: 12 * m, work: 30 * m, plan: Plan{spot, spot, spot, spot, spot},
			want: Result{Finish: 42 * m, Finished: true, DeadlineMet: true, Spot: 42 * m, Starts: 1},
		},
		"preempted at the start of a tick without stock; progress kept": {
			points: []int{1, 0, 1, 1, 1, 1}, ovh: 12 * m, work: 20 * m, plan: Plan{spot, od, od, od, od},
			want: Result{Finish: 42 * m, Finished: true, DeadlineMet: true, Spot: 10 * m, OnDemand: 32 * m, Preemptions: 1, Starts: 2},
		},
		"a changeover is a start": {
			points: []int{1, 1, 1, 1}, ovh: 0, work: 25 * m, plan: Plan{od, spot, spot},
			want: Result{Finish: 25 * m, Finished: true, DeadlineMet: true, Spot: 15 * m, OnDemand: 10 * m, Changeovers: 1, Starts: 2},
		},
		"a pause costs nothing, the start after it costs the overhead": {
			points: []int{1, 1, 1, 1, 1}, ovh: 5 * m, work: 20 * m, plan: Plan{spot, none, spot, spot},
			want: Result{Finish: 40 * m, Finished: true, DeadlineMet: true, Spot: 30 * m, Starts: 2},
		},
		"late": {
			points: []int{0, 0, 0, 0, 0, 0, 0, 0}, ovh: 0, work: 20 * m, plan: Plan{none, none, none, none, od, od},
			want: Result{Finish: 60 * m, Finished: true, DeadlineMet: false, OnDemand: 20 * m, Starts: 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mk := market(t, 10*m, tc.points)
			job := Job{Tier: spec.TierDeadline, Work: tc.work, Deadline: 50 * m, RestartOverhead: tc.ovh, SpotPrice: 1, OnDemandPrice: 3}
			got, err := Run(mk, job, 0, tc.plan)
			if err != nil {
				t.Fatal(err)
			}
			tc.want.Cost = tc.want.Spot.Hours() + 3*tc.want.OnDemand.Hours()
			if d := cmp.Diff(got, tc.want, cmpopts.IgnoreFields(Result{}, "Steps"), cmpopts.EquateApprox(0, 1e-12)); d != "" {
				t.Errorf("got(-), want(+):\n%s", d)
			}
		})
	}
}

func TestRunRejectsSpotOutOfStock(t *testing.T) {
	mk := market(t, time.Minute, []int{1, 0, 1})
	_, err := Run(mk, Job{Tier: spec.TierDeadline, Work: 2 * time.Minute, Deadline: 3 * time.Minute}, 0, Plan{spot, spot, spot})
	var ce *ChoiceError
	if !errors.As(err, &ce) || ce.Tick != 1 {
		t.Fatalf("got %v, want a ChoiceError at tick 1", err)
	}
}

func TestStartsSpreadEvenly(t *testing.T) {
	mk := market(t, time.Hour, make([]int, 100))
	cases := map[string]struct {
		n        int
		deadline time.Duration
		want     []int
		fails    bool
	}{
		"one":                  {1, 10 * time.Hour, []int{0}, false},
		"ends at the last fit": {4, 10 * time.Hour, []int{0, 30, 60, 90}, false},
		"deadline mid-tick":    {2, 9*time.Hour + time.Minute, []int{0, 90}, false},
		"too long a deadline":  {3, 101 * time.Hour, nil, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := mk.Starts(tc.n, tc.deadline)
			if (err != nil) != tc.fails {
				t.Fatalf("error %v", err)
			}
			if d := cmp.Diff(got, tc.want); d != "" {
				t.Errorf("got(-), want(+):\n%s", d)
			}
		})
	}
}

func TestNewMarketRefusesMismatchedTraces(t *testing.T) {
	a := &trace.Trace{Name: "a_v100_1", Zone: "a", Gap: time.Minute, Points: []int{1}}
	b := &trace.Trace{Name: "b_v100_1", Zone: "b", Gap: time.Hour, Points: []int{1}}
	if _, err := NewMarket([]*trace.Trace{a, b}); err == nil {
		t.Error("different gaps were accepted")
	}
	if _, err := NewMarket([]*trace.Trace{a, a}); err == nil {
		t.Error("the same zone twice was accepted")
	}
	c := &trace.Trace{Name: "a_k80_1", Zone: "a", Gap: time.Minute, Points: []int{1, 1}}
	m, err := NewMarket([]*trace.Trace{a, c})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]any{m.Zones, m.Ticks()}, []any{[]string{"a_v100_1", "a_k80_1"}, 1}); d != "" {
		t.Errorf("got(-), want(+):\n%s", d)
	}
}

// randomMarket has stretches of stock and outages of random lengths.
func randomMarket(t *testing.T, rng *rand.Rand, zones, ticks int) *Market {
	var points [][]int
	for range zones {
		var p []int
		in := rng.IntN(2)
		for len(p) < ticks {
			for range 1 + rng.IntN(30) {
				p = append(p, in)
			}
			in = 1 - in
		}
		points = append(points, p[:ticks])
	}
	return market(t, 10*time.Minute, points...)
}

// TestPolicyInvariants replays every online policy on random markets:
// none takes spot out of stock (Run would fail), the deadline policies
// meet every deadline on-demand alone could meet, flexible runs never pay
// on-demand and critical runs never take spot, nothing costs less than
// the optimum, and a replay repeated gives the same result.
func TestPolicyInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for n := range 12 {
		mk := randomMarket(t, rng, 1+n%2, 150)
		work := time.Duration(6+rng.IntN(6)) * time.Hour
		job := Job{Tier: spec.TierDeadline, Work: work, Deadline: work + 12*time.Minute + time.Duration(rng.IntN(240))*time.Minute,
			RestartOverhead: 12 * time.Minute, SpotPrice: 0.97, OnDemandPrice: 3.06}
		start := rng.IntN(40)
		plan, err := Optimal(mk, job, start)
		if err != nil {
			t.Fatal(err)
		}
		best, err := Run(mk, job, start, plan)
		if err != nil || !best.DeadlineMet {
			t.Fatalf("optimal: %v, deadline met %v", err, best.DeadlineMet)
		}
		for _, name := range []policy.Name{policy.OnDemandOnly, policy.Greedy, policy.UniformProgress, policy.Refuel} {
			t.Run(fmt.Sprintf("%d/%s", n, name), func(t *testing.T) {
				r, err := Run(mk, job, start, NewOnline(spec.TierDeadline, name))
				if err != nil {
					t.Fatal(err)
				}
				if !r.DeadlineMet {
					t.Errorf("missed the deadline: finished at %s of %s", r.Finish, job.Deadline)
				}
				if r.Cost < best.Cost-1e-9 {
					t.Errorf("cost %.4f below the optimum %.4f", r.Cost, best.Cost)
				}
				again, _ := Run(mk, job, start, NewOnline(spec.TierDeadline, name))
				if d := cmp.Diff(r, again); d != "" {
					t.Errorf("a second replay differs:\n%s", d)
				}
			})
		}
		for _, tier := range []spec.Tier{spec.TierFlexible, spec.TierCritical} {
			j := job
			j.Tier = tier
			r, err := Run(mk, j, start, NewOnline(tier, policy.Refuel))
			if err != nil {
				t.Fatal(err)
			}
			if (tier == spec.TierFlexible && r.OnDemand > 0) || (tier == spec.TierCritical && r.Spot > 0) {
				t.Errorf("%s run held spot %s and on-demand %s", tier, r.Spot, r.OnDemand)
			}
		}
	}
}

// roamingSeen records the Roaming each decision was given.
type roamingSeen []policy.Roaming

func (r *roamingSeen) Decide(_ int, _ policy.State, m policy.Market, _ policy.Gang) (policy.Choice, error) {
	*r = append(*r, m.Roaming)
	return policy.None, nil
}

// TestRunShowsTheRoamingStock checks that each decision sees the stock
// across zones as a roaming run would have, from before the start on:
// a preemption in the zone held followed at once by stock in the other
// is a stretch out of stock of no length.
func TestRunShowsTheRoamingStock(t *testing.T) {
	mk := market(t, 10*time.Minute, []int{1, 1, 0, 0, 1, 1}, []int{0, 1, 1, 0, 0, 0})
	job := Job{Tier: spec.TierFlexible, Work: time.Hour, Deadline: time.Hour, RestartOverhead: 0, SpotPrice: 0.97, OnDemandPrice: 3.06}
	var seen roamingSeen
	if _, err := Run(mk, job, 1, &seen); err != nil {
		t.Fatal(err)
	}
	type view struct {
		Zone     string
		Last     bool
		Since    time.Duration
		In, Outs int
	}
	var got []view
	for _, r := range seen[:4] {
		got = append(got, view{r.Zone, r.Last, r.Since, r.In.Count, r.Out.Count})
	}
	m := 10 * time.Minute
	want := []view{
		{"z0", true, m, 0, 0},     // before tick 1: z0 in stock at tick 0
		{"z0", true, 2 * m, 0, 0}, // z0 still in stock at tick 1
		{"z1", true, m, 1, 1},     // tick 2: z0 lost, moved to z1 at once
		{"", false, m, 2, 1},      // tick 3: no zone in stock
	}
	if d := cmp.Diff(got, want); d != "" {
		t.Errorf("got(-), want(+):\n%s", d)
	}
}

func TestRunPricesZonesAndMovesBetweenRegions(t *testing.T) {
	m := time.Minute
	mk := market(t, 10*m, []int{1, 0, 0, 0, 0, 0}, []int{1, 1, 1, 1, 1, 1})
	job := Job{Tier: spec.TierDeadline, Work: 30 * m, Deadline: 60 * m, RestartOverhead: 5 * m,
		Zones:        []ZonePrice{{Region: "east", Spot: 0.6, OnDemand: 3}, {Region: "west", Spot: 1.2, OnDemand: 3.6}},
		CheckpointGB: 40, EgressUSDPerGB: 0.02, TransferTime: 7 * m}
	spotWest := policy.Choice{Market: capacity.Spot, Zone: "z1"}
	odWest := policy.Choice{Market: capacity.OnDemand, Zone: "z1"}
	// 5 min in east (5 of overhead, 5 of work), preempted; west pays its
	// overhead and the transfer rounded to a whole tick (15 min), works
	// 5 more, changes over to on-demand there (no move: same region) and
	// works the last 20.
	got, err := Run(mk, job, 0, Plan{spot, spotWest, spotWest, odWest, odWest, odWest})
	if err != nil {
		t.Fatal(err)
	}
	want := 10*m.Hours()*0.6 + 20*m.Hours()*1.2 + 25*m.Hours()*3.6 + 40*0.02
	if got.Transfers != 1 || got.EgressUSD != 0.8 || math.Abs(got.Cost-want) > 1e-9 || got.Finish != 55*m || !got.DeadlineMet {
		t.Errorf("got %d transfers, egress $%v, cost $%.4f, finish %s; want 1, $0.8, $%.4f, 55m", got.Transfers, got.EgressUSD, got.Cost, got.Finish, want)
	}
	// Before any work there is no checkpoint to move.
	got, err = Run(mk, job, 0, Plan{none, spotWest, spotWest, spotWest, spotWest})
	if err != nil {
		t.Fatal(err)
	}
	if got.Transfers != 0 {
		t.Errorf("%d transfers of a run that started in the west; want none", got.Transfers)
	}
}

// A move between clouds is a move between regions (egress and transfer
// time), and counted apart as one between clouds.
func TestRunCountsMovesBetweenClouds(t *testing.T) {
	m := time.Minute
	all := []int{1, 1, 1, 1, 1, 1, 1, 1}
	mk := market(t, 10*m, all, all, all)
	job := Job{Tier: spec.TierDeadline, Work: 40 * m, Deadline: 80 * m, RestartOverhead: 5 * m,
		Zones: []ZonePrice{
			{Region: "us-west-2", Cloud: "aws", Spot: 1, OnDemand: 3},
			{Region: "us-east-1", Cloud: "aws", Spot: 1, OnDemand: 3},
			{Region: "us-central1", Cloud: "gce", Spot: 1, OnDemand: 3},
		},
		CheckpointGB: 40, EgressUSDPerGB: 0.02, TransferTime: 7 * m}
	west, east := spot, policy.Choice{Market: capacity.Spot, Zone: "z1"}
	gce := policy.Choice{Market: capacity.Spot, Zone: "z2"}
	for name, tc := range map[string]struct {
		plan                  Plan
		transfers, cloudMoves int
	}{
		"one cloud, one region":      {Plan{west, west, west, west, west, west}, 0, 0},
		"one cloud, two regions":     {Plan{west, east, east, east, east, east, east}, 1, 0},
		"aws to gce":                 {Plan{west, gce, gce, gce, gce, gce, gce}, 1, 1},
		"aws to gce and back":        {Plan{west, gce, gce, west, west, west, west, west}, 2, 2},
		"gce first, before any work": {Plan{none, gce, gce, gce, gce, gce}, 0, 0},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Run(mk, job, 0, tc.plan)
			if err != nil {
				t.Fatal(err)
			}
			if got.Transfers != tc.transfers || got.CloudMoves != tc.cloudMoves {
				t.Errorf("%d transfers, %d between clouds; want %d and %d", got.Transfers, got.CloudMoves, tc.transfers, tc.cloudMoves)
			}
			if egress := float64(tc.transfers) * 40 * 0.02; math.Abs(got.EgressUSD-egress) > 1e-9 {
				t.Errorf("egress $%v; want $%v", got.EgressUSD, egress)
			}
		})
	}
}
