package policy

import (
	"math"
	"testing"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

// skyMarket is a market worked by hand. Zone a (region r1, where the
// checkpoint is) sells spot at 0.90 and has shown four lifetimes of an
// hour each, its current one 30 minutes old; zone b (region r2) sells
// spot at bSpot and has shown none. On-demand is 3.00 in both; a move to
// r2 costs 1.00 and 6 minutes.
//
// Zone a's hazard, by age bucket: nothing ended before 40 minutes, and
// all four lifetimes ended between 40 and 80 minutes, where they spent
// 80 minutes in all: 3 an hour, kept for the older buckets no lifetime
// reached. At 30 minutes old its lifetime is expected to last 10 more
// minutes at no risk, then 1/3 h at 3 an hour: 30 minutes. Zone b, with
// no lifetime seen to end, is expected to last the 30 h left.
func skyMarket(aIn, bIn bool, bSpot float64) Market {
	var a Availability
	for range 4 {
		a.Observe(true, time.Hour)
		a.Observe(false, time.Hour)
	}
	a.Observe(true, 30*time.Minute)
	return Market{Step: 10 * time.Minute, OnDemandPrice: 3, Move: Move{Region: "r1", USD: 1, Time: 6 * time.Minute}, Zones: []Zone{
		{Name: "a", Region: "r1", SpotAvailable: aIn, SpotPrice: 0.9, OnDemandPrice: 3, History: a},
		{Name: "b", Region: "r2", SpotAvailable: bIn, SpotPrice: bSpot, OnDemandPrice: 3},
	}}
}

// skyState is a 24 h job 10 h in with done hours of work done and 30 h
// to its deadline, restarts costing 12 minutes. With 8 h done the
// schedule ratio is (16/30)/(8/10) = 2/3 and V = 2 USD/h.
func skyState(done float64, cur Choice) State {
	h := func(x float64) time.Duration { return time.Duration(x * float64(time.Hour)) }
	return State{Elapsed: h(10), TimeLeft: h(30), Done: h(done), Remaining: h(24 - done), RestartOverhead: 12 * time.Minute, Current: cur}
}

func TestSkyNomadUtilitiesByHand(t *testing.T) {
	s := skyState(8, None)
	m := skyMarket(true, true, 0.5)
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-3 }
	values := map[string]struct {
		s         State
		got, want float64
	}{
		"V":                                  {s, progressValue(s, 3, 0.5), 2},                                 // 3 × (16/30)/(8/10)
		"V before progress rises as T/(T−t)": {skyState(0, None), progressValue(skyState(0, None), 3, 0.5), 4}, // 3 × 40/30
		"V far ahead is floored at the cheapest spot": {skyState(20, None), progressValue(skyState(20, None), 3, 0.5), 0.5},
	}
	for name, tc := range values {
		if !near(tc.got, tc.want) {
			t.Errorf("%s = %.4f, want %.4f", name, tc.got, tc.want)
		}
	}
	if l := skyNomadLifetime(m.Zones[0].History, true, s.TimeLeft); (l - 30*time.Minute).Abs() > time.Second {
		t.Errorf("zone a's lifetime %s, want 30m (10 minutes safe, then 1/3 h at 3 an hour)", l)
	}
	if l := skyNomadLifetime(m.Zones[1].History, true, s.TimeLeft); l != s.TimeLeft {
		t.Errorf("zone b's lifetime %s, want the 30h left", l)
	}
	cases := map[string]struct {
		s    State
		zone int
		want float64
	}{
		// (0.5 − 0.2)/0.5 of its lifetime works: the 12-minute start
		// spends 40% of it.
		"a new start in a": {s, 0, 2*0.6 - 0.9},
		// Held with its start paid, all of its lifetime works.
		"a held": {skyState(8, spotA), 0, 2 - 0.9},
		// b's 30 h are capped at 2 h; the move's 6 minutes at V and its
		// 1.00 are amortised over them.
		"b, moving the checkpoint": {s, 1, 2*1.8/2 - 0.5 - (2*0.1+1)/2},
	}
	for name, tc := range cases {
		if got := skyNomadSpot(tc.s, m, tc.zone, 2, m.Zones[tc.zone].SpotPrice); !near(got, tc.want) {
			t.Errorf("%s: U = %.4f, want %.4f", name, got, tc.want)
		}
	}
}

func TestSkyNomadDecidesByHand(t *testing.T) {
	spotBr2 := Choice{Market: capacity.Spot, Zone: "b"}
	cases := map[string]struct {
		s    State
		m    Market
		want Choice
	}{
		// U: spot in b 0.7, in a 0.3, on-demand −1, nothing 0.
		"the long-lived zone repays its move": {skyState(8, None), skyMarket(true, true, 0.5), spotBr2},
		// b at 0.05 (U 1.15) beats a held (1.1) by less than the margin
		// 0.5 + 0.01 × 1.00 + 0.05 × 2 = 0.61.
		"a held stays within the margin": {skyState(8, spotA), skyMarket(true, true, 0.05), spotA},
		// On-demand held is worth −1: b's 0.7 clears the margin.
		"on-demand held moves past the margin": {skyState(8, odA), skyMarket(true, true, 0.5), spotBr2},
		// Nothing in stock, ahead of schedule (V 2 < 3): on-demand is
		// worth less than waiting, but an instance held is kept.
		"ahead of schedule it waits":           {skyState(8, None), skyMarket(false, false, 0.5), None},
		"ahead of schedule it keeps on-demand": {skyState(8, odA), skyMarket(false, false, 0.5), odA},
		// Behind (4 h done: V = 3 × (20/30)/(4/10) = 5): on-demand in a
		// is worth 5 − 3 − 0.2 × 5 for its start; in b its move costs
		// 0.1 × 5 + 1.00 more.
		"behind schedule it takes on-demand": {skyState(4, None), skyMarket(false, false, 0.5), odA},
		// Ahead of schedule (20 h done, V = 3 × (4/4.25)/(20/10) = 1.41)
		// but waiting a step more would miss the deadline: the safety net.
		"the safety net": {State{Elapsed: 10 * time.Hour, TimeLeft: 4*time.Hour + 15*time.Minute, Done: 20 * time.Hour, Remaining: 4 * time.Hour, RestartOverhead: 12 * time.Minute},
			skyMarket(false, false, 0.5), odA},
		"nothing once done": {State{Elapsed: 10 * time.Hour, TimeLeft: time.Hour, Done: 24 * time.Hour, RestartOverhead: 12 * time.Minute, Current: odA},
			skyMarket(true, true, 0.5), None},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Decide(spec.TierDeadline, SkyNomad, tc.s, tc.m)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// Lately more lifetimes ended than the zone's hazard predicts: the
// volatility ratio shortens the expected lifetime by that factor's hazard.
func TestSkyNomadVolatilityShortensLifetimes(t *testing.T) {
	var calm Availability
	for range 40 {
		calm.Observe(true, 3*time.Hour)
		calm.Observe(false, 10*time.Minute)
	}
	volatile := calm
	volatile.NextFit = 1 << 30 // keep the fit where it was: what follows is recent
	for range 6 {
		volatile.Observe(true, 50*time.Minute)
		volatile.Observe(false, 10*time.Minute)
	}
	calm.Observe(true, time.Hour)
	volatile.Observe(true, time.Hour)
	c := skyNomadLifetime(calm, true, 30*time.Hour)
	v := skyNomadLifetime(volatile, true, 30*time.Hour)
	if v >= c {
		t.Errorf("lifetime after a volatile spell %s, calm %s; want it shorter", v, c)
	}
}

func TestSkyNomadLearnsLifetimesFromWhatItWatched(t *testing.T) {
	// The market's past says the zone's stock lasts hours; what the run
	// watched of it says twenty minutes. SkyNomad's own code learns only
	// from what the job saw, so spot there is worth less to it.
	var calm, flickers Availability
	for range 40 {
		calm.Observe(true, 3*time.Hour)
		calm.Observe(false, 10*time.Minute)
		flickers.Observe(true, 20*time.Minute)
		flickers.Observe(false, 10*time.Minute)
	}
	calm.Observe(true, 10*time.Minute)
	flickers.Observe(true, 10*time.Minute)
	s := skyState(0, None)
	value := func(z Zone) float64 {
		m := Market{Step: 10 * time.Minute, OnDemandPrice: 3, Zones: []Zone{z}}
		return skyNomadSpot(s, m, 0, 3, 1)
	}
	known := Zone{Name: "a", SpotAvailable: true, SpotPrice: 1, History: calm}
	watched := known
	watched.Watched = flickers
	if known.watched() != calm || watched.watched() != flickers {
		t.Fatal("watched() does not fall back to History where Watched is unset, or ignores Watched where set")
	}
	if v, k := value(watched), value(known); v >= k {
		t.Errorf("spot worth %.3f/h watched flickering, %.3f/h on the market's past alone; want less", v, k)
	}
}
