package policy

import (
	"testing"
	"time"

	"refuel/pkg/capacity"
)

func TestBackToSpot(t *testing.T) {
	h := func(x float64) time.Duration { return time.Duration(x * float64(time.Hour)) }
	onDemand := func(remaining, left float64) State {
		return State{Elapsed: h(1), TimeLeft: h(left), Done: h(1), Remaining: h(remaining), RestartOverhead: 12 * time.Minute, Current: odA}
	}
	cases := map[string]struct {
		s    State
		m    Market
		want Choice
		ok   bool
	}{
		"ample slack: try spot":                      {onDemand(40, 60), market(false, false), spotA, true},
		"weeks of slack decide as a day would":       {onDemand(10, 24*30), market(false, false), spotA, true},
		"no slack for a changeover: stay":            {onDemand(40, 40.2), market(false, false), None, false},
		"less work left than a changeover pays for":  {onDemand(0.05, 30), market(false, false), None, false},
		"on spot already: nothing to answer":         {State{TimeLeft: h(60), Remaining: h(40), RestartOverhead: 12 * time.Minute, Current: spotA}, market(true, true), None, false},
		"no spot offering: stay":                     {onDemand(40, 60), Market{Step: 10 * time.Minute, OnDemandPrice: 3.06}, None, false},
		"a zone whose stock rarely lasts is skipped": {onDemand(40, 60), flaky(), spotB, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := BackToSpot(tc.s, tc.m)
			if ok != tc.ok || (ok && got != tc.want) {
				t.Errorf("got %s %v, want %s %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestWaitForSpot(t *testing.T) {
	h := func(x float64) time.Duration { return time.Duration(x * float64(time.Hour)) }
	waiting := func(remaining, left float64) State {
		return State{Elapsed: h(1), TimeLeft: h(left), Done: h(1), Remaining: h(remaining), RestartOverhead: 12 * time.Minute}
	}
	cases := map[string]struct {
		s    State
		m    Market
		want bool
	}{
		"days of slack: wait":                     {waiting(10, 10+72), market(false, false), true},
		"minutes of slack: on-demand now":         {waiting(10, 10.3), market(false, false), false},
		"no spot offering: on-demand":             {waiting(10, 80), Market{Step: 10 * time.Minute, OnDemandPrice: 3.06}, false},
		"nothing left to do: nothing to wait for": {waiting(0, 5), market(false, false), false},
		// Waiting costs no money: on-demand later costs what it costs
		// now. Even outages that last days leave it worth waiting while
		// the slack allows, in case spot returns.
		"outages that last days: wait while slack allows":  {waiting(10, 16), longOutages(), true},
		"outages of minutes: wait":                         {waiting(10, 16), shortOutages(), true},
		"slack for no more than the changeover: on-demand": {waiting(10, 10.25), shortOutages(), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := WaitForSpot(tc.s, tc.m); got != tc.want {
				t.Errorf("wait %v, want %v", got, tc.want)
			}
		})
	}
}

// longOutages is market(false, false) where both zones were out of stock
// for days at a time, and have been for an hour now.
func longOutages() Market {
	m := market(false, false)
	for i := range m.Zones {
		for range 20 {
			m.Zones[i].History.Observe(true, time.Hour)
			m.Zones[i].History.Observe(false, 48*time.Hour)
		}
		m.Zones[i].History.Observe(true, time.Hour)
		m.Zones[i].History.Observe(false, time.Hour)
	}
	return m
}

// shortOutages is market(false, false) where both zones were out of
// stock ten minutes at a time, and have been for five now.
func shortOutages() Market {
	m := market(false, false)
	for i := range m.Zones {
		for range 40 {
			m.Zones[i].History.Observe(true, 3*time.Hour)
			m.Zones[i].History.Observe(false, 10*time.Minute)
		}
		m.Zones[i].History.Observe(true, 3*time.Hour)
		m.Zones[i].History.Observe(false, 5*time.Minute)
	}
	return m
}

// flaky is market(false, false) where zone a was seen in stock forty
// times, never for more than ten minutes, and zone b ten times for hours.
func flaky() Market {
	m := market(false, false)
	for range 40 {
		m.Zones[0].History.Observe(true, 10*time.Minute)
		m.Zones[0].History.Observe(false, 30*time.Minute)
	}
	for range 10 {
		m.Zones[1].History.Observe(true, 6*time.Hour)
		m.Zones[1].History.Observe(false, 30*time.Minute)
	}
	return m
}

// A run waiting for spot tries first the zone refuel would start in:
// the cheaper far region while the move is cheap, its own region's zone
// once the move costs more than the far one saves.
func TestSpotToTryFirst(t *testing.T) {
	h := func(x float64) time.Duration { return time.Duration(x * float64(time.Hour)) }
	waiting := State{Elapsed: h(10), TimeLeft: h(41), Done: h(10), Remaining: h(38), RestartOverhead: 12 * time.Minute}
	cases := map[string]struct {
		move Move
		want Choice
	}{
		"a cheap move: the far region's cheapest spot": {Move{USD: 0.5, Time: 5 * time.Minute}, Choice{Market: capacity.Spot, Zone: "c"}},
		"a dear move: the checkpoint's region":         {Move{USD: 200, Time: 5 * time.Minute}, spotA},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := new(Decider).SpotToTryFirst(waiting, regions(false, false, false, tc.move))
			if !ok || got != tc.want {
				t.Errorf("got %s %v, want %s", got, ok, tc.want)
			}
		})
	}
	if _, ok := new(Decider).SpotToTryFirst(State{TimeLeft: h(5)}, market(false, false)); ok {
		t.Error("nothing left to do, yet a zone to try")
	}
}

// TrySpot weighs staying on on-demand against spot in each zone alone:
// with ample slack, waiting ties with spot now in the plan, and
// BackToSpot reads the tie as staying.
func TestTrySpot(t *testing.T) {
	h := func(x float64) time.Duration { return time.Duration(x * float64(time.Hour)) }
	onDemand := State{Elapsed: h(1), TimeLeft: h(2400), Done: h(1), Remaining: h(1), RestartOverhead: 12 * time.Minute, Current: odA}
	single := Market{Step: 10 * time.Minute, OnDemandPrice: 3, Zones: []Zone{{Name: "a", SpotPrice: 0.9}}}
	if got, ok := new(Decider).TrySpot(onDemand, single); !ok || got != spotA {
		t.Errorf("spot at less than a third of on-demand: got %s %v, want %s", got, ok, spotA)
	}
	inEast := onDemand
	inEast.Current = Choice{Market: capacity.OnDemand, Zone: "a"}
	cases := map[string]struct {
		move Move
		want Choice
	}{
		"a cheap move: the far region's cheapest spot": {Move{USD: 0.01, Time: time.Minute}, Choice{Market: capacity.Spot, Zone: "c"}},
		"a dear move: spot beside the checkpoint":      {Move{USD: 5, Time: time.Minute}, spotA},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got, ok := new(Decider).TrySpot(inEast, regions(false, false, false, tc.move)); !ok || got != tc.want {
				t.Errorf("got %s %v, want %s", got, ok, tc.want)
			}
		})
	}
	if _, ok := new(Decider).TrySpot(State{TimeLeft: h(5), Remaining: h(1), Current: spotA}, single); ok {
		t.Error("on spot already, yet a zone to try")
	}
}
