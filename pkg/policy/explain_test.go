package policy

import (
	"strings"
	"testing"
	"time"

	"refuel/pkg/spec"
)

func TestExplain(t *testing.T) {
	cases := map[string]struct {
		tier spec.Tier
		name Name
		s    State
		m    Market
		c    Choice
		want string
	}{
		// With nothing seen of a zone, refuel's priors stand: spot lasting
		// about 2 h and outages about 1 h, whatever their age.
		"waiting with slack": {spec.TierDeadline, Refuel, state(10, 41.1, None), market(false, false), None,
			"waiting for spot: 3.1 h slack left, spot in a expected back in 1.0 h (refuel's prior: nothing seen of it yet)"},
		"on spot": {spec.TierDeadline, Refuel, state(10, 41.1, None), market(false, true), spotB,
			"spot in b: 3.1 h slack left, its stock expected to last 1.9 h (refuel's prior: nothing seen of it yet)"},
		"on-demand for the deadline": {spec.TierDeadline, Refuel, state(10, 38.1, None), market(false, false), odA,
			"on-demand: 6 min slack left, too little to risk spot; spot in a expected back in 1.0 h (refuel's prior: nothing seen of it yet)"},
		"on-demand through an outage": {spec.TierDeadline, Refuel, state(10, 41.1, odA), longOutagesAt(20 * time.Hour), odA,
			"on-demand: 3.1 h slack left, spot in a expected back in 9.0 h (41 stretches seen over 504 h)"},
		"staying on on-demand": {spec.TierDeadline, Refuel, state(10, 41.1, odA), market(true, false), odA,
			"on-demand: 3.1 h slack left, a move to spot in a (expected to last 1.9 h; refuel's prior: nothing seen of it yet) would not repay its start"},
		"on spot, scored by EC2": {spec.TierDeadline, Refuel, state(10, 41.1, None), scored(market(false, true), 10), spotB,
			"spot in b: 3.1 h slack left, its stock expected to last 2.9 h (EC2 placement score 10/10; nothing seen of it yet)"},
		"waiting, scored by EC2": {spec.TierDeadline, Refuel, state(10, 41.1, None), scored(market(false, false), 1), None,
			"waiting for spot: 3.1 h slack left, spot in a expected back in 2.6 h (EC2 placement score 1/10; nothing seen of it yet)"},
		"uniform progress behind": {spec.TierDeadline, UniformProgress, state(10, 41.1, None), market(true, false), odA,
			"on-demand: 3.1 h slack left, behind the pace the deadline sets"},
		"critical":       {spec.TierCritical, Refuel, state(10, 60, None), market(true, true), odA, "on-demand: critical runs use stable capacity only"},
		"flexible pause": {spec.TierFlexible, Refuel, state(10, 60, None), market(false, false), None, "paused: no spot in stock, spot in a expected back in 1.0 h (refuel's prior: nothing seen of it yet)"},
		"flexible spot":  {spec.TierFlexible, Refuel, state(10, 60, None), market(true, false), spotA, "spot in a: flexible runs use spot only, its stock expected to last 1.9 h (refuel's prior: nothing seen of it yet)"},
		"done":           {spec.TierDeadline, Refuel, state(48, 5, odA), market(true, true), None, "nothing: the work is done"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Explain(tc.tier, tc.name, tc.s, tc.m, tc.c); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// scored is m with every zone's EC2 placement score set.
func scored(m Market, score int) Market {
	for i := range m.Zones {
		m.Zones[i].History.PlacementScore = score
	}
	return m
}

// longOutagesAt is market(false, false) whose zones have been out of
// stock for age, after outages of a day and stretches of minutes.
func longOutagesAt(age time.Duration) Market {
	m := market(false, false)
	var a Availability
	for range 20 {
		a.Observe(true, 10*time.Minute)
		a.Observe(false, 24*time.Hour)
	}
	a.Observe(true, 10*time.Minute)
	a.Observe(false, age)
	m.Zones[0].History, m.Zones[1].History = a, a
	return m
}

func TestExplainSaysWhatDecideChose(t *testing.T) {
	var d Decider
	for _, name := range []Name{Greedy, UniformProgress, Refuel} {
		for _, left := range []float64{38.1, 38.5, 40, 44, 52} {
			for _, cur := range []Choice{None, spotA, odA} {
				for _, stock := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
					m := market(stock[0], stock[1])
					s := state(10, left, cur)
					if cur == spotA && !stock[0] {
						s.Current = None
					}
					c, err := d.Decide(spec.TierDeadline, name, s, m)
					if err != nil {
						t.Fatal(err)
					}
					line := Explain(spec.TierDeadline, name, s, m, c)
					want := map[string]string{"": "waiting for spot: ", "spot": "spot in " + c.Zone + ": ", "on-demand": "on-demand: "}[string(c.Market)]
					if !strings.HasPrefix(line, want) {
						t.Errorf("%s, %.1f h left, holding %s, stock %v: chose %s but explained %q", name, left, cur, stock, c, line)
					}
				}
			}
		}
	}
}

func TestExplainWaitAndBackToSpot(t *testing.T) {
	h := func(x float64) time.Duration { return time.Duration(x * float64(time.Hour)) }
	waiting := State{Elapsed: h(1), TimeLeft: h(13), Done: h(1), Remaining: h(10), RestartOverhead: 12 * time.Minute}
	onDemand := waiting
	onDemand.Current = odA
	cases := map[string]struct {
		got, want string
	}{
		"wait": {ExplainWaitForSpot(waiting, market(false, false), WaitForSpot(waiting, market(false, false))),
			"waiting for spot: 3.0 h slack left, spot in a expected back in 1.0 h (refuel's prior: nothing seen of it yet)"},
		"no slack to wait": {ExplainWaitForSpot(State{TimeLeft: h(10.1), Remaining: h(10), RestartOverhead: 12 * time.Minute}, market(false, false), false),
			"on-demand: 6 min slack left, too little to wait for spot; spot in a expected back in 1.0 h (refuel's prior: nothing seen of it yet)"},
		"back to spot": {func() string {
			c, ok := BackToSpot(onDemand, market(false, false))
			return ExplainBackToSpot(onDemand, market(false, false), c, ok)
		}(),
			"trying spot in a: 3.0 h slack left, its stock expected to last 1.9 h (refuel's prior: nothing seen of it yet)"},
		"no slack for a changeover": {ExplainBackToSpot(State{TimeLeft: h(10.3), Remaining: h(10), RestartOverhead: 12 * time.Minute, Current: odA}, market(false, false), None, false),
			"staying on on-demand: 18 min slack left, too little for a changeover and a preemption"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got  %q\nwant %q", tc.got, tc.want)
			}
		})
	}
}
