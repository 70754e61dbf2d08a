package policy

import (
	"testing"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

// seen is a zone's history of n stretches in stock of length in, each
// followed by one out of it of length out, ending out of stock.
func seen(n int, in, out time.Duration) Availability {
	var a Availability
	for range n {
		a.Observe(true, in)
		a.Observe(false, out)
	}
	return a
}

// gangOf4 is an elastic gang of 4 that trains on 2 or more, with the
// nodes in stock in zones a and b, and what was seen of stock for part of
// it in zone a.
func gangOf4(a, b int, partial Availability) Gang {
	return Gang{Nodes: 4, MinNodes: 2, InStock: []int{a, b}, Partial: []Availability{partial, {}}}
}

func shrunkA(n int) Choice { return Choice{Market: capacity.Spot, Zone: "a", Nodes: n} }

func TestDecideGangOnCounts(t *testing.T) {
	long, short := seen(4, 2*time.Hour, time.Hour), seen(6, 5*time.Minute, time.Hour)
	cases := map[string]struct {
		tier    spec.Tier
		name    Name
		s       State
		m       Market
		g       Gang
		want    Choice
		asWhole bool // decided as for the whole gang (Decide)
	}{
		"a rigid gang decides as Decide":              {name: Refuel, s: state(10, 60, None), m: market(false, false), g: Gang{Nodes: 4, MinNodes: 4, InStock: []int{3, 0}}, asWhole: true},
		"the zero Gang decides as Decide":             {name: Greedy, s: state(10, 60, None), m: market(false, false), asWhole: true},
		"greedy takes the widest stock":               {name: Greedy, s: state(10, 60, None), m: market(false, false), g: gangOf4(3, 2, long), want: shrunkA(3)},
		"greedy keeps the width it holds":             {name: Greedy, s: state(10, 60, shrunkA(2)), m: market(false, false), g: gangOf4(3, 0, long), want: shrunkA(2)},
		"greedy grows back once the gang is in stock": {name: Greedy, s: state(10, 60, shrunkA(2)), m: market(true, false), g: gangOf4(4, 0, long), want: spotA},
		"greedy waits below the min nodes":            {name: Greedy, s: state(10, 60, None), m: market(false, false), g: gangOf4(1, 0, long), want: None},
		"greedy does not shrink past the last moment": {name: Greedy, s: state(10, 38.3, None), m: market(false, false), g: gangOf4(3, 0, long), want: odA},
		"uniform-progress takes stock for part":       {name: UniformProgress, s: state(10, 43, None), m: market(false, false), g: gangOf4(2, 0, short), want: shrunkA(2)},
		"refuel shrinks where such stock lasted":      {name: Refuel, s: state(10, 60, None), m: market(false, false), g: gangOf4(3, 0, long), want: shrunkA(3)},
		"refuel does not where it passed at once":     {name: Refuel, s: state(10, 60, None), m: market(false, false), g: gangOf4(3, 0, short), asWhole: true},
		"refuel does not where none was seen":         {name: Refuel, s: state(10, 60, None), m: market(false, false), g: gangOf4(3, 0, Availability{}), asWhole: true},
		"refuel trains on while its nodes last":       {name: Refuel, s: state(10, 60, shrunkA(2)), m: market(false, false), g: gangOf4(2, 0, short), want: shrunkA(2)},
		"refuel grows back once the gang is in stock": {name: Refuel, s: state(10, 60, shrunkA(2)), m: market(true, false), g: gangOf4(4, 0, long), want: spotA},
		"refuel keeps on-demand it holds":             {name: Refuel, s: state(10, 38.6, odA), m: market(false, false), g: gangOf4(3, 0, long), want: odA},
		"a flexible gang trains on part of its nodes": {tier: spec.TierFlexible, name: Greedy, s: state(10, 60, None), m: market(false, false), g: gangOf4(0, 2, long), want: Choice{Market: capacity.Spot, Zone: "b", Nodes: 2}},
		"a critical gang holds on-demand, every node": {tier: spec.TierCritical, name: Refuel, s: state(10, 60, None), m: market(false, false), g: gangOf4(3, 0, long), want: odA},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.tier == "" {
				tc.tier = spec.TierDeadline
			}
			if tc.asWhole {
				var err error
				if tc.want, err = Decide(tc.tier, tc.name, tc.s, tc.m); err != nil {
					t.Fatal(err)
				}
			}
			got, err := new(Decider).DecideGang(tc.tier, tc.name, tc.s, tc.m, tc.g)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestSeenLeftIsTheMeanRestOfStretchesThatLastedAsLong(t *testing.T) {
	m := time.Minute
	cases := map[string]struct {
		a    Availability
		want time.Duration
	}{
		"nothing seen":              {Availability{}, 0},
		"three of 30 minutes, at 0": {seen(3, 30*m, time.Hour), 30 * m},
		"one of 5 and one of 45": {func() Availability {
			a := seen(1, 5*m, time.Hour)
			a.Observe(true, 45*m)
			a.Observe(false, m)
			return a
		}(), 25 * m},
		"none lasted as long as this": {func() Availability { a := seen(3, 5*m, time.Hour); a.Observe(true, 15*m); return a }(), 0},
		"at 15 of three of 30":        {func() Availability { a := seen(3, 30*m, time.Hour); a.Observe(true, 15*m); return a }(), 15 * m},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := seenLeft(tc.a, true); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}
