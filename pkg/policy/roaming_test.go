package policy

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

// zonesWith is zones a, b and c with the given stock now, each in stock
// (or not) for as long as ages says.
func zonesWith(stock [3]bool, ages [3]time.Duration) []Zone {
	zs := make([]Zone, 3)
	for i, name := range []string{"a", "b", "c"} {
		zs[i] = Zone{Name: name, SpotAvailable: stock[i], SpotPrice: 0.97}
		zs[i].History.Observe(stock[i], ages[i])
	}
	return zs
}

func TestLongestInStock(t *testing.T) {
	h := time.Hour
	cases := map[string]struct {
		stock [3]bool
		ages  [3]time.Duration
		want  int
	}{
		"none in stock":                      {[3]bool{}, [3]time.Duration{h, h, h}, -1},
		"the only one in stock":              {[3]bool{false, true, false}, [3]time.Duration{5 * h, h, 5 * h}, 1},
		"the oldest stretch":                 {[3]bool{true, true, true}, [3]time.Duration{h, 3 * h, 2 * h}, 1},
		"the earlier on ties":                {[3]bool{true, true, true}, [3]time.Duration{h, 3 * h, 3 * h}, 1},
		"a long outage is no age in stock":   {[3]bool{false, true, true}, [3]time.Duration{9 * h, h, 2 * h}, 2},
		"just back in stock counts as young": {[3]bool{true, true, false}, [3]time.Duration{0, time.Minute, h}, 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := longestInStock(zonesWith(tc.stock, tc.ages)); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

// roamingAfter replays steps of ten minutes, each the stock of a, b and
// c, and returns what a run roaming between them would have seen.
func roamingAfter(steps [][3]bool) Roaming {
	var r Roaming
	hist := make([]Availability, 3)
	for _, st := range steps {
		zs := make([]Zone, 3)
		for i, name := range []string{"a", "b", "c"} {
			zs[i] = Zone{Name: name, SpotAvailable: st[i], History: hist[i]}
		}
		r.Observe(zs, 10*time.Minute)
		for i := range hist {
			hist[i].Observe(st[i], 10*time.Minute)
		}
	}
	return r
}

func TestRoamingObserve(t *testing.T) {
	m := time.Minute
	yes, no := true, false
	cases := map[string]struct {
		steps         [][3]bool
		zone          string
		last          bool
		since         time.Duration
		inCount       int
		inTotal       time.Duration
		outCount      int
		outTotal      time.Duration
		sameAsZoneOne bool
	}{
		"one zone in and out is that zone's availability": {
			steps: [][3]bool{{yes, no, no}, {yes, no, no}, {no, no, no}, {yes, no, no}},
			zone:  "a", last: true, since: 10 * m, inCount: 1, inTotal: 20 * m, outCount: 1, outTotal: 10 * m, sameAsZoneOne: true,
		},
		"stays in its zone while it lasts": {
			steps: [][3]bool{{no, yes, no}, {yes, yes, yes}, {yes, yes, yes}},
			zone:  "b", last: true, since: 30 * m,
		},
		"a move is a preemption without waiting": {
			steps: [][3]bool{{yes, yes, no}, {no, yes, no}, {no, yes, no}},
			zone:  "b", last: true, since: 20 * m, inCount: 1, inTotal: 10 * m, outCount: 1, outTotal: moveGap,
		},
		"moves to the zone in stock longest": {
			steps: [][3]bool{{yes, no, yes}, {yes, yes, yes}, {no, yes, yes}},
			zone:  "c", last: true, since: 10 * m, inCount: 1, inTotal: 20 * m, outCount: 1, outTotal: moveGap,
		},
		"no zone in stock is out of stock": {
			steps: [][3]bool{{yes, no, no}, {no, no, no}, {no, no, no}},
			zone:  "", last: false, since: 20 * m, inCount: 1, inTotal: 10 * m,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := roamingAfter(tc.steps)
			got := []any{r.Zone, r.Last, r.Since, r.In.Count, r.In.Total, r.Out.Count, r.Out.Total}
			want := []any{tc.zone, tc.last, tc.since, tc.inCount, tc.inTotal, tc.outCount, tc.outTotal}
			if d := cmp.Diff(got, want); d != "" {
				t.Errorf("got(-), want(+):\n%s", d)
			}
			if tc.sameAsZoneOne {
				var a Availability
				for _, st := range tc.steps {
					a.Observe(st[0], 10*time.Minute)
				}
				if d := cmp.Diff(r.Availability, a); d != "" {
					t.Errorf("differs from the zone's own availability, got(-), want(+):\n%s", d)
				}
			}
		})
	}
}

// TestRefuelRoams checks refuel's multi-zone choices: with a record of
// preemptions followed at once by stock elsewhere, a run that loses its
// zone moves to spot in the zone in stock longest; without that record
// it plans each zone alone and takes the zone its own model favours.
func TestRefuelRoams(t *testing.T) {
	// Each zone alone: short stretches in stock, long outages.
	var flaky Availability
	for range 20 {
		flaky.Observe(true, 40*time.Minute)
		flaky.Observe(false, 5*time.Hour)
	}
	// Across the zones: stock somewhere nearly always.
	var roam Roaming
	for range 40 {
		roam.Availability.Observe(true, 40*time.Minute)
		roam.Availability.Observe(false, moveGap)
	}
	roam.Availability.Observe(true, 40*time.Minute)
	roam.Zone = "a"
	zones := func(stock bool) []Zone {
		zs := zonesWith([3]bool{false, stock, stock}, [3]time.Duration{time.Minute, 10 * time.Minute, 30 * time.Minute})
		for i := range zs {
			age := zs[i].History.Since
			zs[i].History = flaky
			zs[i].History.Last, zs[i].History.Since = zs[i].SpotAvailable, age
		}
		return zs
	}
	spotC := Choice{Market: capacity.Spot, Zone: "c"}
	outEverywhere := roam
	outEverywhere.Availability.Observe(false, time.Minute)
	outEverywhere.Zone = ""
	// 20h of work left, 2h30m of slack, just preempted in a.
	s := state(28, 22.5, None)
	cases := map[string]struct {
		roaming Roaming
		stock   bool
		want    Choice
	}{
		"roaming waits out a short outage everywhere": {roaming: outEverywhere, want: None},
		"each zone alone sees a long outage ahead":    {roaming: Roaming{}, want: odA},
		"roaming moves to the zone in stock longest":  {roaming: roam, stock: true, want: spotC},
		"each zone alone by its own model":            {roaming: Roaming{}, stock: true, want: spotB},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := Market{Step: 195 * time.Second, OnDemandPrice: 3.06, Zones: zones(tc.stock), Roaming: tc.roaming}
			got, err := Decide(spec.TierDeadline, Refuel, s, m)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// BenchmarkRefuelDecide times one deadline decision of a 48h run with
// 22h of slack, the largest plan the bench meets: cold (the outlook
// solved anew, as for a workflow's first decision or after its model
// changed) and warm (a Decider that has solved it).
func BenchmarkRefuelDecide(b *testing.B) {
	var hist Availability
	for i := range 2000 {
		hist.Observe(i%7 != 0 && i%31 > 3, 195*time.Second)
	}
	var roam Roaming
	roam.Availability = hist
	zones := make([]Zone, 9)
	for i := range zones {
		zones[i] = Zone{Name: string(rune('a' + i)), SpotAvailable: i%2 == 0, SpotPrice: 0.97, History: hist}
	}
	s := state(0, 70, None)
	for _, n := range []int{1, 9} {
		m := Market{Step: 195 * time.Second, OnDemandPrice: 3.06, Zones: zones[:n], Roaming: roam}
		b.Run(fmt.Sprintf("zones=%d/cold", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Decide(spec.TierDeadline, Refuel, s, m); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("zones=%d/warm", n), func(b *testing.B) {
			var d Decider
			for b.Loop() {
				if _, err := d.Decide(spec.TierDeadline, Refuel, s, m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestRoamingAcrossRegionsMovesOnlyWhenItsRegionIsOut(t *testing.T) {
	zones := func(a, b, c bool) []Zone {
		return []Zone{{Name: "a", Region: "east", SpotAvailable: a}, {Name: "b", Region: "west", SpotAvailable: b}, {Name: "c", Region: "east", SpotAvailable: c}}
	}
	var r Roaming
	step, move := 10*time.Minute, 7*time.Minute
	r.ObserveMoves(zones(true, true, true), step, move)
	if r.Zone != "a" {
		t.Fatalf("roaming in %q; want the first zone in stock, a", r.Zone)
	}
	// a runs out: c in the same region, not b, though b has been in
	// stock as long.
	r.ObserveMoves(zones(false, true, true), step, move)
	if r.Zone != "c" || r.Out.Count != 1 || r.Out.Total != moveGap {
		t.Fatalf("roaming in %q after %d outages of %s; want c, after a move without a transfer", r.Zone, r.Out.Count, r.Out.Total)
	}
	// The east runs out: the move to b takes the transfer, an outage.
	r.ObserveMoves(zones(false, true, false), step, move)
	if r.Zone != "b" || r.Out.Count != 2 || r.Out.Total != moveGap+move {
		t.Errorf("roaming in %q after %d outages of %s; want b, after the transfer's %s", r.Zone, r.Out.Count, r.Out.Total, move)
	}
}

// Across zones a run fails over to the zone whose spot is expected to
// cost least per hour of work, the restart its start pays counted.
func TestRoamingSpotZone(t *testing.T) {
	// flicker is a zone whose stock lasted 10 minutes at a time, steady
	// one whose stock lasted 10 hours.
	flicker, steady := Availability{}, Availability{}
	for range 12 {
		flicker.Observe(true, 10*time.Minute)
		flicker.Observe(false, 10*time.Minute)
		steady.Observe(true, 10*time.Hour)
		steady.Observe(false, 10*time.Minute)
	}
	flicker.Observe(true, time.Minute)
	steady.Observe(true, time.Minute)
	zone := func(name string, price float64, h Availability) Zone {
		return Zone{Name: name, SpotAvailable: true, SpotPrice: price, Region: "r", OnDemandPrice: 3.06, History: h}
	}
	s := State{Remaining: 20 * time.Hour, TimeLeft: 24 * time.Hour, RestartOverhead: 12 * time.Minute}
	cases := map[string]struct {
		zones []Zone
		s     State
		want  string
	}{
		"the steady zone, though dearer": {[]Zone{zone("a", 0.8, flicker), zone("b", 0.9, steady)}, s, "b"},
		"the cheaper of two alike":       {[]Zone{zone("a", 0.9, steady), zone("b", 0.5, steady)}, s, "b"},
		"the zone held, while in stock": {[]Zone{zone("a", 0.9, flicker), zone("b", 0.5, steady)},
			State{Remaining: 20 * time.Hour, TimeLeft: 24 * time.Hour, RestartOverhead: 12 * time.Minute, Current: Choice{Market: capacity.Spot, Zone: "a"}}, "a"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := Market{Step: 10 * time.Minute, OnDemandPrice: 3.06, Zones: tc.zones}
			if got := roamingSpotZone(tc.s, m); got < 0 || m.Zones[got].Name != tc.want {
				t.Errorf("got zone %d; want %s", got, tc.want)
			}
		})
	}
}
