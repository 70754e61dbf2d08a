package policy

import (
	"testing"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

// regions is a market of zone a in east and zones b and c in west, with
// the checkpoint in east; b's spot is dearer than c's.
func regions(a, b, c bool, move Move) Market {
	move.Region = "east"
	return Market{Step: 10 * time.Minute, OnDemandPrice: 3.06, Move: move, Zones: []Zone{
		{Name: "a", Region: "east", SpotAvailable: a, SpotPrice: 0.9, OnDemandPrice: 3.06},
		{Name: "b", Region: "west", SpotAvailable: b, SpotPrice: 0.8, OnDemandPrice: 3.06},
		{Name: "c", Region: "west", SpotAvailable: c, SpotPrice: 0.4, OnDemandPrice: 3.06},
	}}
}

func TestBaselinesFailOverToTheCheapestZone(t *testing.T) {
	s := state(10, 60, None)
	cheap, dear := Move{USD: 0.5, Time: 10 * time.Minute}, Move{USD: 80, Time: 10 * time.Minute}
	cases := map[string]struct {
		m    Market
		want Choice
	}{
		"the cheapest zone in stock, moving":            {regions(true, true, true, cheap), Choice{Market: capacity.Spot, Zone: "c"}},
		"a move dearer than the saving: stay in region": {regions(true, true, true, dear), spotA},
		"only the far region in stock":                  {regions(false, true, false, dear), Choice{Market: capacity.Spot, Zone: "b"}},
		// Zones without regions are one market taken in order, as ever.
		"no regions: the first zone in stock": {market(true, true), spotA},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got, _ := Decide(spec.TierDeadline, Greedy, s, tc.m); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestRefuelWeighsTheMove(t *testing.T) {
	s := state(10, 41, None)
	got, err := Decide(spec.TierDeadline, Refuel, s, regions(true, false, true, Move{USD: 0.5, Time: 5 * time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Choice{Market: capacity.Spot, Zone: "c"}); got != want {
		t.Errorf("a cheap move to spot at less than half the price: got %s, want %s", got, want)
	}
	got, err = Decide(spec.TierDeadline, Refuel, s, regions(true, false, true, Move{USD: 200, Time: 5 * time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	if got != spotA {
		t.Errorf("a move costing more than the whole run saves: got %s, want %s", got, spotA)
	}
}

func TestOnDemandChoicesOnePerRegion(t *testing.T) {
	m := regions(false, false, false, Move{})
	m.Zones[2].OnDemandPrice = 2.9
	got := m.onDemandChoices(state(10, 60, Choice{Market: capacity.Spot, Zone: "b"}))
	want := []Choice{{Market: capacity.OnDemand, Zone: "a"}, {Market: capacity.OnDemand, Zone: "b"}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %v, want %v: one per region, in the zone held there", got, want)
	}
	got = m.onDemandChoices(state(10, 60, None))
	if len(got) != 2 || got[1].Zone != "c" {
		t.Errorf("got %v; want west's on-demand where it is cheapest, c", got)
	}
}

// TestRefuelAcrossRegions checks refuel's choices with the stock across
// the zones known: it stays on spot in its zone while that lasts, moves
// to spot in another region when its own has none and the move repays,
// and does not when the move costs more than the spot saves.
func TestRefuelAcrossRegions(t *testing.T) {
	var roam Roaming
	for range 30 {
		roam.Availability.Observe(true, 3*time.Hour)
		roam.Availability.Observe(false, 20*time.Minute)
	}
	roam.Availability.Observe(true, time.Hour)
	with := func(m Market) Market {
		m.Roaming = roam
		for i := range m.Zones {
			m.Zones[i].History = roam.Availability
		}
		return m
	}
	cheap, dear := Move{USD: 0.5, Time: 5 * time.Minute}, Move{USD: 200, Time: 5 * time.Minute}
	spotC := Choice{Market: capacity.Spot, Zone: "c"}
	cases := map[string]struct {
		s    State
		m    Market
		want Choice
		// wantRegion, when set, is all that is asked: the run stays there.
		wantRegion string
	}{
		"spot held stays though a cheaper zone has stock": {s: state(10, 41, spotA), m: with(regions(true, true, true, cheap)), want: spotA},
		"its region out, a cheap move to the far spot":    {s: state(10, 41, None), m: with(regions(false, false, true, cheap)), want: spotC},
		"its region out, a move dearer than spot saves":   {s: state(10, 41, None), m: with(regions(false, false, true, dear)), wantRegion: "east"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Decide(spec.TierDeadline, Refuel, tc.s, tc.m)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantRegion != "" {
				if got.Holds() && tc.m.Zones[tc.m.zone(got.Zone)].Region != tc.wantRegion {
					t.Errorf("got %s, want nothing or an instance in %s", got, tc.wantRegion)
				}
				return
			}
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// A run on spot in a moves to c, in stock at less than half the price,
// once c has shown stretches that last and the slack affords the start:
// the move and the start paid within c's predicted lifetime.
func TestRefuelLeavesHeldSpotForCheaperSpotThatLasts(t *testing.T) {
	spotC := Choice{Market: capacity.Spot, Zone: "c"}
	lasting := func(m Market, stretches int) Market {
		for range stretches {
			m.Zones[2].History.Observe(true, 10*time.Hour)
			m.Zones[2].History.Observe(false, time.Hour)
		}
		m.Zones[2].History.Observe(true, time.Hour)
		m.Roaming.Observe(m.Zones, time.Hour) // something seen across the zones: refuel roams
		return m
	}
	move := Move{USD: 1, Time: 7 * time.Minute}
	cases := map[string]struct {
		s    State
		m    Market
		want Choice
	}{
		"c has lasted: move":               {state(10, 60, spotA), lasting(regions(true, false, true, move), 4), spotC},
		"c unseen: stay":                   {state(10, 60, spotA), lasting(regions(true, false, true, move), 0), spotA},
		"too little slack to spend: stay":  {state(10, 42, spotA), lasting(regions(true, false, true, move), 4), spotA},
		"c no cheaper by the margin: stay": {state(10, 60, spotA), func() Market { m := lasting(regions(true, false, true, move), 4); m.Zones[2].SpotPrice = 0.8; return m }(), spotA},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Decide(spec.TierDeadline, Refuel, tc.s, tc.m)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
			if got == spotC {
				why := Explain(spec.TierDeadline, Refuel, tc.s, tc.m, got)
				if want := "spot in c: 22 h slack left, cheaper per hour of work than spot held in a, its lifetime predicted at 5.5 h (8 stretches seen over 45 h)"; why != want {
					t.Errorf("explained %q; want %q", why, want)
				}
			}
		})
	}
}

// Under rules version 1 the slack a move spends is priced, not refused
// below a quarter of the work left: with 4 h of slack for 38 h of work, c
// at 0.30 repays its start, its move and the 19 minutes of slack priced
// at on-demand's gap over c's spot; at 0.40 it does not; with no slack
// for another restart it stays whatever c costs.
func TestRefuelPricesTheSlackAMoveSpends(t *testing.T) {
	spotC := Choice{Market: capacity.Spot, Zone: "c"}
	market := func(c float64, rules int) Market {
		m := regions(true, false, true, Move{USD: 1, Time: 7 * time.Minute})
		for range 4 {
			m.Zones[2].History.Observe(true, 10*time.Hour)
			m.Zones[2].History.Observe(false, time.Hour)
		}
		m.Zones[2].History.Observe(true, time.Hour)
		m.Roaming.Observe(m.Zones, time.Hour)
		m.Zones[2].SpotPrice, m.Rules = c, rules
		return m
	}
	cases := map[string]struct {
		s    State
		m    Market
		want Choice
	}{
		"version 0 refuses the move":        {state(10, 42, spotA), market(0.3, 0), spotA},
		"version 1 moves":                   {state(10, 42, spotA), market(0.3, RulesMoveByMoney), spotC},
		"version 1: the slack costs more":   {state(10, 42, spotA), market(0.4, RulesMoveByMoney), spotA},
		"version 1: no slack for a restart": {state(10, 38.5, spotA), market(0.3, RulesMoveByMoney), spotA},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Decide(spec.TierDeadline, Refuel, tc.s, tc.m)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// Spot in a at 2.50 is dear beside c's at 0.40, out of stock for now but
// with outages of 20 minutes: under rules version 1 it is weighed against
// waiting while the slack affords the wait, and taken on sight otherwise.
func TestRefuelWeighsDearSpotAgainstWaiting(t *testing.T) {
	market := func(rules int) Market { return outagesOfC(2.5, 0.4, rules) }
	if h := market(RulesMoveByMoney).dearFor(state(10, 60, None), 0); h <= 0 {
		t.Errorf("version 1, 22 h of slack: dear for %s, want a wait to weigh", h)
	}
	if h := market(0).dearFor(state(10, 60, None), 0); h != 0 {
		t.Errorf("version 0: dear for %s, want 0 (taken on sight)", h)
	}
	if h := market(RulesMoveByMoney).dearFor(state(10, 38.5, None), 0); h != 0 {
		t.Errorf("version 1, 30 minutes of slack: dear for %s, want 0 (no wait affordable)", h)
	}
}

// A run on spot in a cloud whose on-demand is dear, where the cheap
// on-demand is in another region: the fallback moves the checkpoint
// there, which takes time, so the deadline's margin counts the move, and
// on-demand goes there only while the slack still pays for the move.
func TestOnDemandFallbackPaysForTheMove(t *testing.T) {
	m := Market{Step: 10 * time.Minute, Move: Move{Region: "gce", USD: 1, Time: 30 * time.Minute}, Zones: []Zone{
		{Name: "g", Region: "gce", SpotAvailable: true, SpotPrice: 3, OnDemandPrice: 10},
		{Name: "a", Region: "aws", OnDemandPrice: 3},
	}}
	spotG, odG, odA := Choice{Market: capacity.Spot, Zone: "g"}, Choice{Market: capacity.OnDemand, Zone: "g"}, Choice{Market: capacity.OnDemand, Zone: "a"}
	at := func(slack time.Duration, cur Choice) State {
		return State{TimeLeft: 10*time.Hour + slack, Remaining: 10 * time.Hour, RestartOverhead: 12 * time.Minute, Current: cur}
	}
	cases := map[string]struct {
		s        State
		safe     bool
		onDemand Choice
	}{
		"slack for a restart and the move":  {at(time.Hour, spotG), true, odA},
		"slack for a restart, not the move": {at(20*time.Minute, spotG), false, odG},
		"on on-demand already: it stays":    {at(time.Hour, odG), true, odG},
		"holding nothing, slack to move":    {at(time.Hour, None), true, odA},
		"holding nothing, no slack to move": {at(20*time.Minute, None), false, odG},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := tc.s.Current
			if c == None {
				c = spotG
			}
			if got := safe(tc.s, m, c); got != tc.safe {
				t.Errorf("safe(%s) = %v, want %v", c, got, tc.safe)
			}
			if got := m.onDemand(tc.s); got != tc.onDemand {
				t.Errorf("onDemand = %s, want %s", got, tc.onDemand)
			}
		})
	}
}

// Spot in a at 0.50 is 16% dearer than c's at 0.42, out of stock for now
// with outages of 20 minutes. Under rules version 2, with 42 h of slack
// for 38 h of work, that premium makes a dear: refuel weighs waiting for
// c. With 22 h of slack, or under version 1, it is within the margin.
func TestRefuelWithSlackToSpareCountsASmallPremiumDear(t *testing.T) {
	market := func(rules int) Market { return outagesOfC(0.5, 0.42, rules) }
	cases := map[string]struct {
		s     State
		rules int
		dear  bool
	}{
		"version 2, slack to spare":  {state(10, 80, None), RulesDearBySlack, true},
		"version 2, 22 h of slack":   {state(10, 60, None), RulesDearBySlack, false},
		"version 1, slack to spare":  {state(10, 80, None), RulesMoveByMoney, false},
		"version 2, 3 h left to run": {state(45, 80, None), RulesDearBySlack, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if h := market(tc.rules).dearFor(tc.s, 0); (h > 0) != tc.dear {
				t.Errorf("a dear for %s; want dear %v", h, tc.dear)
			}
		})
	}
}

// Spot in a at 2.50 is dear beside c's at 0.40. Where c's stock has
// lasted 5 hours at a time, refuel weighs waiting for it; where it has
// flickered back for 5 minutes at a time, under rules version 3 there is
// no cheaper stock to wait for and a is taken on sight, as version 2
// would not.
func TestRefuelWaitsOnlyForCheaperStockThatLasts(t *testing.T) {
	flickers := func(rules int) Market {
		m := outagesOfC(2.5, 0.4, rules)
		m.Zones[1].SpotPrice = 3 // b, unseen, is no cheaper stock
		m.Zones[2].History = Availability{}
		for range 10 {
			m.Zones[2].History.Observe(true, 5*time.Minute)
			m.Zones[2].History.Observe(false, 20*time.Minute)
		}
		m.Zones[2].History.Observe(false, 10*time.Minute)
		return m
	}
	cases := map[string]struct {
		m    Market
		dear bool
	}{
		"version 3, stock that lasts":    {outagesOfC(2.5, 0.4, RulesLastingStock), true},
		"version 3, stock that flickers": {flickers(RulesLastingStock), false},
		"version 2, stock that flickers": {flickers(RulesDearBySlack), true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if h := tc.m.dearFor(state(10, 60, None), 0); (h > 0) != tc.dear {
				t.Errorf("dear for %s; want dear %v", h, tc.dear)
			}
		})
	}
}

// outagesOfC is a market with spot in a at a, and c at c out of stock for
// 10 minutes, its stock having lasted 5 hours between outages of 20
// minutes, under rules.
func outagesOfC(a, c float64, rules int) Market {
	m := regions(true, false, false, Move{USD: 1, Time: 7 * time.Minute})
	m.Zones[0].SpotPrice, m.Zones[2].SpotPrice = a, c
	for range 10 {
		m.Zones[2].History.Observe(true, 5*time.Hour)
		m.Zones[2].History.Observe(false, 20*time.Minute)
	}
	m.Zones[2].History.Observe(false, 10*time.Minute)
	m.Rules = rules
	return m
}

// TestRefuelFirstDecisionTakesTheCheapestSpot checks a run's first
// decision on a market with no past: with nothing known of any zone,
// nothing but price tells them apart, so refuel takes the cheapest spot,
// not spot in the region whose on-demand is cheapest. Once a zone's stock
// has been seen, each zone is still planned by its own model until a
// roaming run's record exists.
func TestRefuelFirstDecisionTakesTheCheapestSpot(t *testing.T) {
	fresh := func() Market {
		return Market{Step: 10 * time.Minute, OnDemandPrice: 82.53, Rules: RulesFirstRoams, Zones: []Zone{
			{Name: "us", Region: "us-central1", SpotAvailable: true, SpotPrice: 18.98, OnDemandPrice: 82.53},
			{Name: "eu", Region: "europe-west1", SpotAvailable: true, SpotPrice: 16.36, OnDemandPrice: 90.87},
			{Name: "asia", Region: "asia-south2", SpotAvailable: true, SpotPrice: 69.91, OnDemandPrice: 99.12},
		}}
	}
	s := State{TimeLeft: 51*time.Hour + 50*time.Minute, Remaining: 47 * time.Hour, RestartOverhead: 12 * time.Minute}
	got, err := Decide(spec.TierDeadline, Refuel, s, fresh())
	if err != nil {
		t.Fatal(err)
	}
	if want := (Choice{Market: capacity.Spot, Zone: "eu"}); got != want {
		t.Errorf("nothing known of any zone: got %s, want %s, the cheapest spot", got, want)
	}
	if m := fresh(); !roams(m) {
		t.Error("nothing known of any zone: want it planned as a run roaming between them")
	}
	seen := fresh()
	seen.Zones[0].History.Observe(true, time.Hour)
	if roams(seen) {
		t.Error("a zone's stock seen, no roaming record: want each zone planned by its own model")
	}
	before := fresh()
	before.Rules = RulesLastingStock
	if roams(before) {
		t.Error("rules before RulesFirstRoams: want each zone planned by its own model, as runs recorded then decided")
	}
}

// Spot in a at 1.20 is dear beside c's at 0.40, out of stock for now with
// outages of 20 minutes, and a's stock, like the run's roaming between
// the zones, has lasted an hour at a time. With 5 to 8 h of slack for 38
// h of work, the restarts ahead need more slack than the run has: under
// rules version 5 the slack a wait would spend is priced as the on-demand
// it forces later, dearer than a's premium, and a is taken on sight.
// With 22 h of slack, or under version 4, refuel still weighs waiting for
// c, and version 4 waits.
func TestRefuelKeepsTheSlackTheRestartsAheadNeed(t *testing.T) {
	market := func(rules int) Market {
		m := outagesOfC(1.2, 0.4, rules)
		for range 10 {
			m.Zones[0].History.Observe(true, time.Hour)
			m.Zones[0].History.Observe(false, 10*time.Minute)
		}
		m.Zones[0].History.Observe(true, 10*time.Minute)
		// Roaming between the zones, the run has had spot an hour at a
		// time too.
		for range 10 {
			m.Roaming.Availability.Observe(true, time.Hour)
			m.Roaming.Availability.Observe(false, 10*time.Minute)
		}
		m.Roaming.Availability.Observe(true, 10*time.Minute)
		return m
	}
	cases := map[string]struct {
		s     State
		rules int
		dear  bool
	}{
		"version 5, slack short of the restarts": {state(10, 43, None), RulesSpareSlack, false},
		"version 4, slack short of the restarts": {state(10, 43, None), RulesFirstRoams, true},
		"version 5, slack to spare":              {state(10, 60, None), RulesSpareSlack, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := market(tc.rules)
			if h := m.dearFor(tc.s, 0); (h > 0) != tc.dear {
				t.Errorf("dear for %s (restarts ahead %s); want dear %v", h, m.restartsAhead(tc.s, m.Zones[0]), tc.dear)
			}
		})
	}
	for rules, want := range map[int]Choice{RulesSpareSlack: spotA, RulesFirstRoams: None} {
		got, err := Decide(spec.TierDeadline, Refuel, state(10, 46, None), market(rules))
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("version %d, slack short of the restarts: refuel chose %s, want %s", rules, got, want)
		}
	}
}

// A run on on-demand in east, 5 h of slack for 38 h of work, on V100's
// prices. Spot in c (west, at 0.52, a move away) is the cheapest per hour
// of work, though its stock has come back for an hour at a time; spot in
// a (0.92) beside the run's checkpoint has lasted ten hours at a time.
// Weighed with the move, spot in c loses to on-demand; under rules
// version 6 refuel then weighs spot in a and takes it, where version 5
// stayed on on-demand.
func TestRefuelWeighsSpotElsewhereWhereTheCheapestLoses(t *testing.T) {
	market := func(rules int) Market {
		m := regions(true, false, true, Move{USD: 1, Time: 7 * time.Minute})
		m.Zones[0].SpotPrice, m.Zones[2].SpotPrice = 0.92, 0.52
		m.Rules = rules
		for range 10 {
			m.Zones[0].History.Observe(true, 10*time.Hour)
			m.Zones[0].History.Observe(false, time.Hour)
			m.Zones[2].History.Observe(false, 2*time.Hour)
			m.Zones[2].History.Observe(true, time.Hour)
			m.Roaming.Availability.Observe(true, 10*time.Hour)
			m.Roaming.Availability.Observe(false, 30*time.Minute)
		}
		m.Zones[0].History.Observe(true, 3*time.Hour)
		m.Zones[2].History.Observe(false, time.Hour)
		m.Zones[2].History.Observe(true, 10*time.Minute)
		m.Roaming.Availability.Observe(true, 3*time.Hour)
		return m
	}
	s := state(10, 43, odA)
	if i := roamingSpotZone(s, market(RulesSpotElsewhere)); i != 2 {
		t.Fatalf("the zone spot would be taken in first is %d; want c (2), the cheapest per hour of work", i)
	}
	for rules, want := range map[int]Choice{RulesSpotElsewhere: spotA, RulesSpareSlack: odA} {
		m := market(rules)
		got, err := Decide(spec.TierDeadline, Refuel, s, m)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("version %d: refuel chose %s (%s), want %s", rules, got, Explain(spec.TierDeadline, Refuel, s, m, got), want)
		}
	}
	// Nothing elsewhere in stock: on-demand stays.
	m := market(RulesSpotElsewhere)
	m.Zones[0].SpotAvailable = false
	if got, err := Decide(spec.TierDeadline, Refuel, s, m); err != nil || got != odA {
		t.Errorf("only c in stock: refuel chose %s (err %v), want %s", got, err, odA)
	}
}
