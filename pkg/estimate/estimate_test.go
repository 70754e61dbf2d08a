package estimate

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"refuel/pkg/policy"
	"refuel/pkg/spec"
	"refuel/pkg/trace"
)

// builtin is a built-in market's trace of 10-minute ticks: in stock for
// inFor, out for outFor, over and over, for days.
func builtin(inFor, outFor time.Duration, days int) *trace.Trace {
	gap := 10 * time.Minute
	var points []int
	for len(points) < int(time.Duration(days)*24*time.Hour/gap) {
		for range int(inFor / gap) {
			points = append(points, 1)
		}
		for range int(outFor / gap) {
			points = append(points, 0)
		}
	}
	return &trace.Trace{Name: "z", Zone: "z", Gap: gap, Points: points}
}

// memoryOf is a stock log that watched the trace whole.
func memoryOf(t *trace.Trace) *policy.Availability {
	var a policy.Availability
	for i := range t.Len() {
		a.Observe(t.Available(i), t.Gap)
	}
	a.Observe(!a.Last, t.Gap)
	return &policy.Availability{In: a.In, Out: a.Out}
}

func pool(zone string, b *trace.Trace) Pool {
	return Pool{Provider: "sim", InstanceType: "p3.2xlarge", Zone: zone, Spot: true, SpotPrice: 0.9701, OnDemandPrice: 3.06,
		Builtin: b, BuiltinMarket: "test-market"}
}

func ask(tier spec.Tier, deadline time.Duration, pools ...Pool) Ask {
	return Ask{Tier: tier, Work: 48 * time.Hour, Deadline: deadline, RestartOverhead: 12 * time.Minute, Pools: pools, Windows: 8}
}

func TestAsksThatCannotBeEstimatedNameTheField(t *testing.T) {
	calm := builtin(10*time.Hour, time.Hour, 20)
	short := &policy.Availability{}
	short.Seen(true, time.Hour, true)
	for name, tc := range map[string]struct {
		ask   Ask
		field string
	}{
		"no pool":                        {ask(spec.TierFlexible, 0), "resources"},
		"deadline shorter than the work": {ask(spec.TierDeadline, 40*time.Hour, pool("a", calm)), "deadline"},
		"deadline tier without deadline": {ask(spec.TierDeadline, 0, pool("a", calm)), "deadline"},
		"no work":                        {Ask{Tier: spec.TierFlexible, Pools: []Pool{pool("a", calm)}}, "work"},
		"a pool nothing tells of":        {ask(spec.TierFlexible, 0, Pool{Provider: "sim", InstanceType: "p", Zone: "a", Spot: true, OnDemandPrice: 3, Memory: short}), "pool sim/p/a/spot"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Estimate(tc.ask)
			var ae *AskError
			if !errors.As(err, &ae) || ae.Field != tc.field || ae.Fix == "" {
				t.Fatalf("Estimate: %v; want an *AskError on %q with a fix", err, tc.field)
			}
		})
	}
}

// The spec as written comes first, then the other tiers at its deadline,
// then the deadline tier at 1.1, 1.5 and 2 times the work; a critical run
// costs on-demand's price whatever the window, a flexible one without a
// deadline has no share met.
func TestCasesBesideTheSpecAsWritten(t *testing.T) {
	a := ask(spec.TierDeadline, 60*time.Hour, pool("a", builtin(10*time.Hour, time.Hour, 30)))
	a.Alternatives = true
	r, err := Estimate(a)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Name     string
		Tier     spec.Tier
		Deadline float64
	}
	var got []row
	for _, c := range r.Cases {
		got = append(got, row{c.Name, c.Tier, c.DeadlineHours})
	}
	want := []row{
		{"as written", spec.TierDeadline, 60}, {"tier critical", spec.TierCritical, 60}, {"tier flexible", spec.TierFlexible, 60},
		{"deadline 1.1x work", spec.TierDeadline, 52.8}, {"deadline 1.5x work", spec.TierDeadline, 72}, {"deadline 2x work", spec.TierDeadline, 96},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("cases, got(-) want(+):\n%s", d)
	}
	od := round2((48*time.Hour + 12*time.Minute).Hours() * 3.06)
	critical := r.Cases[1]
	if critical.CostUSD != (Spread{od, od, od}) || critical.OnDemandCostUSD != od {
		t.Errorf("critical costs %+v against on-demand's %v; want on-demand's %v in every window", critical.CostUSD, critical.OnDemandCostUSD, od)
	}
	if u := critical.Offerings; len(u) != 1 || u[0].Offering != "sim/p3.2xlarge/a/on-demand" || u[0].Share != 1 {
		t.Errorf("critical used %+v; want on-demand alone", u)
	}
	written := r.Cases[0]
	if !(written.CostUSD.P10 <= written.CostUSD.P50 && written.CostUSD.P50 <= written.CostUSD.P90 && written.CostUSD.P90 < od) {
		t.Errorf("a deadline run in a zone mostly in stock costs %+v; want ordered percentiles below on-demand's %v", written.CostUSD, od)
	}
	if written.DeadlineMetShare == nil || *written.DeadlineMetShare != 1 {
		t.Errorf("deadline met in %v of windows; want all: on-demand is always there", written.DeadlineMetShare)
	}

	a = ask(spec.TierFlexible, 0, pool("a", builtin(10*time.Hour, time.Hour, 30)))
	r, err = Estimate(a)
	if err != nil {
		t.Fatal(err)
	}
	if c := r.Cases[0]; c.DeadlineMetShare != nil || c.HorizonHours != 4*(48+0.2) || len(r.Cases) != 1 {
		t.Errorf("a flexible run without a deadline: %d cases, met share %v, horizon %vh; want one case, no share, 4 times work and a start", len(r.Cases), c.DeadlineMetShare, c.HorizonHours)
	}
}

// What the ask should change: a deadline not even on-demand meets, a
// budget below the p10.
func TestProblemsSayWhatToChange(t *testing.T) {
	calm := builtin(10*time.Hour, time.Hour, 30)
	a := ask(spec.TierDeadline, 48*time.Hour+5*time.Minute, pool("a", calm))
	a.BudgetUSD = 10
	r, err := Estimate(a)
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, p := range r.Problems {
		fields[p.Field] = p.Line()
	}
	if !strings.Contains(fields["deadline"], "move the deadline to at least 48h12m") {
		t.Errorf("deadline problem %q; want it to name the least deadline, the work and one start", fields["deadline"])
	}
	if !strings.Contains(fields["budget_usd"], "below the estimate's p10") || !strings.Contains(fields["budget_usd"], "raise budget_usd") {
		t.Errorf("budget problem %q; want it below the p10, and the fix", fields["budget_usd"])
	}
	a.BudgetUSD, a.Deadline = 1000, 70*time.Hour
	if r, _ := Estimate(a); len(r.Problems) != 0 {
		t.Errorf("a budget above every window's cost and a deadline met in every window: problems %+v; want none", r.Problems)
	}
}

// The memory stands for a pool once it has watched it long enough, else
// the built-in market does, and the basis says which, how long, and the
// placement scores.
func TestBasisSaysWhatWasReplayed(t *testing.T) {
	calm := builtin(10*time.Hour, time.Hour, 30)
	long, brief := memoryOf(builtin(6*time.Hour, time.Hour, 3)), &policy.Availability{}
	brief.Seen(true, 5*time.Hour, true)
	for name, tc := range map[string]struct {
		pools []Pool
		want  string
	}{
		"memory": {[]Pool{withMemory(pool("a", calm), long)}, "3.2 days of market memory for p3.2xlarge in a; 8 windows"},
		"no history": {[]Pool{pool("a", calm), pool("b", calm)},
			"built-in market test-market, no history for p3.2xlarge in a, b; 8 windows"},
		"too little": {[]Pool{withMemory(pool("a", calm), brief)}, "built-in market test-market, 5 hours of history for p3.2xlarge in a; 8 windows"},
		"stand-in and score": {[]Pool{func() Pool { p := pool("a", calm); p.StandIn, p.PlacementScore = "p3.2xlarge in b", 7; return p }()},
			"built-in market test-market (p3.2xlarge in b standing in), no history for p3.2xlarge in a; placement scores a 7; 8 windows"},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := Estimate(ask(spec.TierFlexible, 0, tc.pools...))
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Cases[0].Basis; got != tc.want {
				t.Errorf("basis %q; want %q", got, tc.want)
			}
		})
	}
}

func withMemory(p Pool, a *policy.Availability) Pool {
	p.Memory = a
	return p
}

// An estimate is a function of its ask: asked twice, it says the same.
func TestSameAskSameReport(t *testing.T) {
	a := ask(spec.TierDeadline, 60*time.Hour, withMemory(pool("a", nil), memoryOf(builtin(3*time.Hour, time.Hour, 5))), pool("b", builtin(5*time.Hour, 2*time.Hour, 20)))
	a.Alternatives, a.Seed = true, 7
	first, err := Estimate(a)
	if err != nil {
		t.Fatal(err)
	}
	second, _ := Estimate(a)
	if d := cmp.Diff(first, second); d != "" {
		t.Errorf("the same ask estimated twice differs, got(-) want(+):\n%s", d)
	}
}

// A gang is billed for every node: on-demand for the work costs four
// times one node's, and so do its replays.
func TestGangIsEstimatedAsAGang(t *testing.T) {
	one := ask(spec.TierCritical, 0, pool("a", builtin(10*time.Hour, time.Hour, 30)))
	gang := one
	gang.Nodes = 4
	r1, err := Estimate(one)
	if err != nil {
		t.Fatal(err)
	}
	r4, err := Estimate(gang)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(r4.Cases[0].CostUSD.P50-4*r1.Cases[0].CostUSD.P50) > 0.02 || math.Abs(r4.Cases[0].OnDemandCostUSD-4*r1.Cases[0].OnDemandCostUSD) > 0.02 {
		t.Errorf("a gang of 4 costs %v (on-demand %v), one node %v (%v); want four times", r4.Cases[0].CostUSD.P50, r4.Cases[0].OnDemandCostUSD, r1.Cases[0].CostUSD.P50, r1.Cases[0].OnDemandCostUSD)
	}
}

// A deadline run meeting a pool the memory knows to be out of stock, in
// a market whose outages last for days, costs more than one meeting it
// with nothing known: it spends most of its work on on-demand.
func TestAnOutageTheMemoryKnowsCosts(t *testing.T) {
	mem := memoryOf(builtin(40*time.Hour, 40*time.Hour, 40))
	quiet := ask(spec.TierDeadline, 52*time.Hour, withMemory(pool("a", nil), mem))
	quiet.Windows = 40
	out := quiet
	out.Pools = []Pool{withMemory(pool("a", nil), mem)}
	out.Pools[0].Current = &Stretch{For: time.Hour}
	rq, err := Estimate(quiet)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := Estimate(out)
	if err != nil {
		t.Fatal(err)
	}
	if ro.Cases[0].CostUSD.P10 <= rq.Cases[0].CostUSD.P10+10 {
		t.Errorf("p10 with an outage an hour old $%v, with none known $%v; want more by far: no window starts in stock", ro.Cases[0].CostUSD.P10, rq.Cases[0].CostUSD.P10)
	}
}

// Paths drawn from a memory are in stock about the share of the time the
// memory saw, and a known stretch holds from where the window starts.
func TestPathsFollowTheMemory(t *testing.T) {
	for name, tr := range map[string]*trace.Trace{
		"mostly in":  builtin(9*time.Hour, time.Hour, 30),
		"mostly out": builtin(2*time.Hour, 6*time.Hour, 30),
	} {
		t.Run(name, func(t *testing.T) {
			mem := memoryOf(tr)
			want := mem.In.Total.Hours() / (mem.In.Total.Hours() + mem.Out.Total.Hours())
			m := modelOf(*mem, 0, shrink)
			rng := rand.New(rand.NewPCG(1, 2))
			in, all := 0, 0
			for range 50 {
				for _, p := range m.path(rng, 10*time.Minute, 2000, 0, nil) {
					in += p
					all++
				}
			}
			if got := float64(in) / float64(all); math.Abs(got-want) > 0.1 {
				t.Errorf("paths in stock %.2f of the time; the memory saw %.2f", got, want)
			}
			p := m.path(rng, 10*time.Minute, 100, 50, &Stretch{In: false, For: 2 * time.Hour})
			for i := 38; i < 51; i++ {
				if p[i] != 0 {
					t.Fatalf("tick %d of a path out of stock for 2h at tick 50: %v", i, p[30:60])
				}
			}
		})
	}
}

// A run learns the stock of a pool it does not hold only by trying it,
// and the estimate replays it so: where pool b's stock comes and goes
// while the run holds a, refuel's probes of b are paid within the cost.
// Seeing every pool, nothing is probed.
func TestTheEstimatePaysForTheProbesARunMakes(t *testing.T) {
	a := ask(spec.TierDeadline, 60*time.Hour, pool("a", builtin(30*time.Hour, 3*time.Hour, 20)), pool("b", builtin(2*time.Hour, 2*time.Hour, 20)))
	a.Seed = 3
	learning, err := Estimate(a)
	if err != nil {
		t.Fatal(err)
	}
	a.SeesEveryZone = true
	seeing, err := Estimate(a)
	if err != nil {
		t.Fatal(err)
	}
	l, s := learning.Cases[0], seeing.Cases[0]
	if l.ProbeUSD <= 0 || l.ProbeUSD > l.CostUSD.P50 {
		t.Errorf("learning by trying, probes $%.2f a run of p50 $%.2f; want some, within the cost", l.ProbeUSD, l.CostUSD.P50)
	}
	if s.ProbeUSD != 0 {
		t.Errorf("seeing every pool, probes $%.2f; want none", s.ProbeUSD)
	}
}
