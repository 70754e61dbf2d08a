package policy

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

var (
	spotA = Choice{Market: capacity.Spot, Zone: "a"}
	spotB = Choice{Market: capacity.Spot, Zone: "b"}
	odA   = Choice{Market: capacity.OnDemand, Zone: "a"}
)

// market is two zones a and b with the given stock now, decided every
// ten minutes.
func market(a, b bool) Market {
	return Market{Step: 10 * time.Minute, OnDemandPrice: 3.06, Zones: []Zone{
		{Name: "a", SpotAvailable: a, SpotPrice: 0.97},
		{Name: "b", SpotAvailable: b, SpotPrice: 0.97},
	}}
}

// state is a run 48h long with 12m restart overhead, done hours in, with
// left hours to its deadline.
func state(done, left float64, cur Choice) State {
	h := func(x float64) time.Duration { return time.Duration(x * float64(time.Hour)) }
	return State{Elapsed: h(done), TimeLeft: h(left), Done: h(done), Remaining: h(48 - done), RestartOverhead: 12 * time.Minute, Current: cur}
}

func TestDecideByTier(t *testing.T) {
	behind := State{Elapsed: 12 * time.Hour, TimeLeft: 40 * time.Hour, Done: 10 * time.Hour, Remaining: 38 * time.Hour, RestartOverhead: 12 * time.Minute}
	cases := map[string]struct {
		tier   spec.Tier
		name   Name
		s      State
		m      Market
		want   Choice
		errAs  any
		errMsg string
	}{
		"critical holds on-demand whatever the policy":      {tier: spec.TierCritical, name: Greedy, s: state(10, 60, None), m: market(true, true), want: odA},
		"flexible takes spot":                               {tier: spec.TierFlexible, name: Greedy, s: state(10, 60, None), m: market(false, true), want: spotB},
		"flexible stays in its zone":                        {tier: spec.TierFlexible, name: Greedy, s: state(10, 60, spotB), m: market(true, true), want: spotB},
		"flexible pauses out of stock":                      {tier: spec.TierFlexible, name: Refuel, s: state(10, 60, spotA), m: market(false, false), want: None},
		"flexible refuel takes spot":                        {tier: spec.TierFlexible, name: Refuel, s: state(10, 60, None), m: market(true, false), want: spotA},
		"deadline ondemand":                                 {tier: spec.TierDeadline, name: OnDemandOnly, s: state(10, 60, None), m: market(true, true), want: odA},
		"deadline greedy takes spot":                        {tier: spec.TierDeadline, name: Greedy, s: state(10, 60, None), m: market(true, false), want: spotA},
		"deadline greedy waits with slack":                  {tier: spec.TierDeadline, name: Greedy, s: state(10, 60, None), m: market(false, false), want: None},
		"deadline greedy goes on-demand at the last moment": {tier: spec.TierDeadline, name: Greedy, s: state(10, 38.3, None), m: market(false, false), want: odA},
		"deadline greedy stays on on-demand":                {tier: spec.TierDeadline, name: Greedy, s: state(10, 60, odA), m: market(true, true), want: odA},
		"deadline uniform-progress catches up on on-demand": {tier: spec.TierDeadline, name: UniformProgress, s: behind, m: market(false, false), want: odA},
		"deadline uniform-progress takes spot when ahead":   {tier: spec.TierDeadline, name: UniformProgress, s: state(10, 43, odA), m: market(true, false), want: spotA},
		"deadline uniform-progress net of 2 overheads":      {tier: spec.TierDeadline, name: UniformProgress, s: state(10, 38.3, None), m: market(true, false), want: odA},
		"deadline refuel takes spot with ample slack":       {tier: spec.TierDeadline, name: Refuel, s: state(10, 60, None), m: market(true, false), want: spotA},
		"deadline refuel never risks the deadline":          {tier: spec.TierDeadline, name: Refuel, s: state(10, 38.1, None), m: market(true, true), want: odA},
		"deadline refuel holds nothing once done":           {tier: spec.TierDeadline, name: Refuel, s: state(48, 5, odA), m: market(true, true), want: None},
		"optimal is offline":                                {tier: spec.TierDeadline, name: Optimal, s: state(10, 60, None), m: market(true, true), errAs: new(*OfflineError)},
		"unknown policy":                                    {tier: spec.TierDeadline, name: "fastest", s: state(10, 60, None), m: market(true, true), errAs: new(*UnknownPolicyError)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Decide(tc.tier, tc.name, tc.s, tc.m)
			if tc.errAs != nil {
				if !errors.As(err, tc.errAs) {
					t.Fatalf("got error %v, want %T", err, tc.errAs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestSafeKeepsOnDemandInReach(t *testing.T) {
	m := market(true, false)
	cases := map[string]struct {
		s    State
		c    Choice
		want bool
	}{
		"idle with room for a step and a start":    {state(0, 48.2+1.0/6, None), None, true},
		"idle without":                             {state(0, 48.2+1.0/6-0.01, None), None, false},
		"new spot with room for two starts":        {state(0, 48.4, None), spotA, true},
		"new spot without":                         {state(0, 48.36, None), spotA, false},
		"on-demand that can still finish":          {state(0, 48.2, None), odA, true},
		"on-demand too late":                       {state(0, 48.19, None), odA, false},
		"spot that finishes within the step":       {state(47.95, 0.1, spotA), spotA, true},
		"spot kept with room for one more start":   {state(0, 48.2, spotA), spotA, true},
		"spot kept without room for another start": {state(0, 48.19, spotA), spotA, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := safe(tc.s, m, tc.c); got != tc.want {
				t.Errorf("safe(%s) = %v, want %v", tc.c, got, tc.want)
			}
		})
	}
}

func TestDecisionsAreDeterministic(t *testing.T) {
	var hist Availability
	for i := range 300 {
		hist.Observe(i%7 != 0 && i%31 > 3, 195*time.Second)
	}
	m := market(true, false)
	m.Zones[0].History = hist
	m.Zones[1].History = hist
	remembering := new(Decider)
	for _, name := range []Name{OnDemandOnly, Greedy, UniformProgress, Refuel} {
		for _, s := range []State{state(5, 52, None), state(20, 26, spotA), state(30, 19, odA), state(40, 8.5, None)} {
			first, err := Decide(spec.TierDeadline, name, s, m)
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				again, _ := Decide(spec.TierDeadline, name, s, m)
				remembered, _ := remembering.Decide(spec.TierDeadline, name, s, m)
				if again != first || remembered != first {
					t.Fatalf("%s at %+v: decided %s, then %s, and %s with a Decider", name, s, first, again, remembered)
				}
			}
		}
	}
}

func TestAvailabilityCountsStretches(t *testing.T) {
	var a Availability
	for _, obs := range []struct {
		in bool
		d  time.Duration
	}{{true, 5 * time.Minute}, {true, 10 * time.Minute}, {false, 30 * time.Minute}, {true, time.Minute}, {true, 0}} {
		a.Observe(obs.in, obs.d)
	}
	var wantIn, wantOut Stretches
	wantIn.Count, wantIn.Total = 1, 15*time.Minute
	wantIn.Time[0], wantIn.Time[1] = 10*time.Minute, 5*time.Minute
	wantIn.Ended[1] = 1
	wantOut.Count, wantOut.Total = 1, 30*time.Minute
	wantOut.Time[0], wantOut.Time[1], wantOut.Time[2] = 10*time.Minute, 10*time.Minute, 10*time.Minute
	wantOut.Ended[2] = 1
	got := []any{a.In, a.Out, a.Last, a.Since, a.FitIn, a.NextFit}
	want := []any{wantIn, wantOut, true, time.Minute, wantIn, 3}
	if d := cmp.Diff(got, want); d != "" {
		t.Errorf("got(-), want(+):\n%s", d)
	}
}

func TestCheckpointInterval(t *testing.T) {
	cases := map[string]struct {
		write, mtbp, lo, hi, want time.Duration
	}{
		"Young/Daly":             {2 * time.Second, time.Hour, time.Minute, time.Hour, 2 * time.Minute},
		"clamped below":          {time.Second, 10 * time.Minute, 5 * time.Minute, time.Hour, 5 * time.Minute},
		"clamped above":          {5 * time.Minute, 100 * time.Hour, time.Minute, time.Hour, time.Hour},
		"write not yet measured": {0, 4 * time.Hour, time.Minute, time.Hour, time.Minute},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := CheckpointInterval(tc.write, tc.mtbp, tc.lo, tc.hi); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestCheckpointLogLearnsFromEarlierRuns(t *testing.T) {
	var earlier, now CheckpointLog
	earlier.Ran(6 * time.Hour)
	earlier.Preempted()
	earlier.Wrote(20 * time.Second)
	now.Ran(2 * time.Hour)
	now.Preempted()
	now.Wrote(40 * time.Second)
	all := earlier.Add(now)
	got := []any{all.MeanWrite(), all.MTBP(2 * time.Hour), all.Interval(2*time.Hour, time.Minute, time.Hour)}
	want := []any{30 * time.Second, 10 * time.Hour / 3, CheckpointInterval(30*time.Second, 10*time.Hour/3, time.Minute, time.Hour)}
	if d := cmp.Diff(got, want); d != "" {
		t.Errorf("got(-), want(+):\n%s", d)
	}
}

func TestParseName(t *testing.T) {
	for _, n := range Names {
		if got, err := ParseName(" " + string(n) + " "); err != nil || got != n {
			t.Errorf("ParseName(%q) = %q, %v", n, got, err)
		}
	}
	if _, err := ParseName("cheap"); err == nil {
		t.Error("ParseName(cheap) did not fail")
	}
}

// A run names its policy in its JobSpec, which cannot import this package:
// the names it accepts must be exactly the online policies but the peers.
func TestSpecNamesTheOnlinePolicies(t *testing.T) {
	var online []string
	for _, n := range Names {
		if n.Online() && !n.Peer() {
			online = append(online, string(n))
		}
	}
	if diff := cmp.Diff(online, spec.MarketPolicies); diff != "" {
		t.Errorf("spec.MarketPolicies differ from the online policies, got(-), want(+):\n%s", diff)
	}
}

func TestPriorsFollowThePlacementScore(t *testing.T) {
	cases := map[int]struct{ in, out time.Duration }{
		0:  {2 * time.Hour, time.Hour}, // no score: refuel's own priors
		7:  {126 * time.Minute, 54 * time.Minute},
		10: {171 * time.Minute, 9 * time.Minute}, // kept within 95%
		1:  {18 * time.Minute, 162 * time.Minute},
	}
	for score, want := range cases {
		in, out := priors(score)
		if in != want.in || out != want.out {
			t.Errorf("score %d: priors %s in, %s out; want %s, %s", score, in, out, want.in, want.out)
		}
	}
}
