package estimate

import (
	"cmp"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"refuel/pkg/policy"
	"refuel/pkg/replay"
	"refuel/pkg/spec"
	"refuel/pkg/trace"
)

// How the windows are made. dispersion alone was tuned, on the
// availability traces of shared/traces (`make bench-estimate`), from
// 0.5, 0.75, 1 and 1.25; the preemption traces are its hold-out.
const (
	// warmup is the market a window's run watches before it starts, as
	// a live run has watched its pools.
	warmup = 48 * time.Hour
	// dispersion is how far a window's market strays from the memory's
	// average (see stockModel.swayed).
	dispersion = 1.0
	// shrink is how many bucket spans of evidence pull each age's rate
	// towards the pool's overall one (see modelOf).
	shrink = 1.0
	// roamingSpan is how much of the pools' market the stock across
	// them is measured on, at least (see roamingMemory).
	roamingSpan = 30 * 24 * time.Hour
	// planBytes bounds the outlooks the replays share.
	planBytes = 384 << 20
	// flexibleRuns is how many times its work (and a start) a flexible
	// run without a deadline is replayed for before it counts as not
	// finished.
	flexibleRuns = 4
	// longestHorizon bounds the market replayed after a start where the
	// deadline is further off: a run that has not finished by then and
	// twice its work after counts as not finished.
	longestHorizon = 14 * 24 * time.Hour
)

// deadlineShares are the deadlines of the alternative cases, as shares
// of the work.
var deadlineShares = []float64{1.1, 1.5, 2}

// Estimate replays the ask's run over windows of its market and reports
// each case. It starts and reserves nothing.
func Estimate(a Ask) (Report, error) {
	if a.Policy == "" {
		a.Policy = policy.Refuel
	}
	if a.Windows <= 0 {
		a.Windows = DefaultWindows
	}
	if a.MinMemory <= 0 {
		a.MinMemory = DefaultMinMemory
	}
	if a.Tick <= 0 {
		a.Tick = DefaultTick
	}
	if err := a.check(); err != nil {
		return Report{}, err
	}
	// The replay starts on-demand a policy asks for without a zone in the
	// first: the cheapest.
	a.Pools = slices.Clone(a.Pools)
	slices.SortStableFunc(a.Pools, func(x, y Pool) int { return cmp.Compare(x.OnDemandPrice, y.OnDemandPrice) })
	m := newMarkets(a)
	cases := a.cases()
	outs, err := m.replay(a, cases)
	if err != nil {
		return Report{}, err
	}
	var r Report
	for i, c := range cases {
		r.Cases = append(r.Cases, c.summarise(a, m, outs[i]))
	}
	r.Problems = a.problems(r.Cases)
	return r, nil
}

// caseSpec is one way to run the job.
type caseSpec struct {
	name     string
	tier     spec.Tier
	deadline time.Duration // 0: none
	horizon  time.Duration // the market replayed after the start
}

// cases are the spec as written, then, with Alternatives, the other
// tiers (at the spec's deadline) and the deadline tier at 1.1, 1.5 and
// 2 times the work.
func (a Ask) cases() []caseSpec {
	out := []caseSpec{a.caseOf("as written", a.Tier, a.Deadline)}
	if !a.Alternatives {
		return out
	}
	for _, t := range spec.Tiers {
		if t == a.Tier || (t == spec.TierDeadline && a.Deadline == 0) {
			continue
		}
		out = append(out, a.caseOf("tier "+string(t), t, a.Deadline))
	}
	for _, share := range deadlineShares {
		d := time.Duration(share * float64(a.Work)).Round(time.Second)
		if a.Tier == spec.TierDeadline && d == a.Deadline {
			continue
		}
		out = append(out, a.caseOf(fmt.Sprintf("deadline %gx work", share), spec.TierDeadline, d))
	}
	return out
}

func (a Ask) caseOf(name string, tier spec.Tier, deadline time.Duration) caseSpec {
	c := caseSpec{name: name, tier: tier, deadline: deadline, horizon: deadline}
	switch {
	case tier == spec.TierFlexible:
		c.horizon = max(deadline, flexibleRuns*(a.Work+a.RestartOverhead))
	case deadline == 0:
		c.horizon = a.Work + a.RestartOverhead
	}
	c.horizon = min(c.horizon, max(longestHorizon, flexibleRuns*(a.Work+a.RestartOverhead)))
	return c
}

// job is the replay's job for case c.
func (a Ask) job(c caseSpec) replay.Job {
	j := replay.Job{
		Tier: c.tier, Work: a.Work, Deadline: c.deadline, RestartOverhead: a.RestartOverhead,
		Nodes: a.Nodes, MinNodes: a.MinNodes, LearnsByTrying: !a.SeesEveryZone,
	}
	if j.Deadline == 0 {
		j.Deadline = c.horizon
	}
	for _, p := range a.Pools {
		spot := p.SpotPrice
		if !p.Spot {
			spot = p.OnDemandPrice
		}
		j.Zones = append(j.Zones, replay.ZonePrice{Region: trace.Region(p.Zone), Spot: spot, OnDemand: p.OnDemandPrice})
	}
	return j
}

// outcome is how one replay went.
type outcome struct {
	cost   float64
	probes float64 // of cost, what learning stock by trying cost
	finish time.Duration
	done   bool
	held   map[string]time.Duration // by offering key
	err    error
}

// replay runs every case over every window, in parallel, and returns
// the outcomes by case and window.
func (m *markets) replay(a Ask, cases []caseSpec) ([][]outcome, error) {
	outs := make([][]outcome, len(cases))
	for i := range outs {
		outs[i] = make([]outcome, a.Windows)
	}
	type task struct{ window, c int }
	tasks := make(chan task)
	var mu sync.Mutex
	done, total := 0, a.Windows*len(cases)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), total) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range tasks {
				o := m.run(a, cases[t.c], t.window)
				mu.Lock()
				outs[t.c][t.window] = o
				done++
				if a.Progress != nil {
					a.Progress(done, total)
				}
				mu.Unlock()
			}
		}()
	}
	// Case by case, so the replays of one case, which plan alike, find
	// its outlooks still held.
	for c := range cases {
		for w := range a.Windows {
			tasks <- task{w, c}
		}
	}
	close(tasks)
	wg.Wait()
	for i, c := range outs {
		for w, o := range c {
			if o.err != nil {
				return nil, fmt.Errorf("estimate: %s, window %d: %w", cases[i].name, w, o.err)
			}
		}
	}
	return outs, nil
}

// run replays case c over window w.
func (m *markets) run(a Ask, c caseSpec, w int) outcome {
	market, err := m.window(w, m.ticks(c.horizon))
	if err != nil {
		return outcome{err: err}
	}
	d := &planned{tier: c.tier, policy: a.Policy, decider: m.plans.Decider(), memory: m.memory, roaming: m.roaming, scores: m.scores,
		prober: replay.NewOnline(c.tier, a.Policy)}
	res, err := replay.Run(market, a.job(c), m.warm, d)
	if err != nil {
		return outcome{err: err}
	}
	o := outcome{cost: res.Cost, probes: res.ProbeUSD, finish: res.Finish, done: res.Finished, held: map[string]time.Duration{}}
	for _, s := range res.Steps {
		if !s.Choice.Holds() {
			continue
		}
		i := slices.Index(market.Zones, s.Choice.Zone)
		if i < 0 {
			continue
		}
		o.held[a.Pools[i].offering(s.Choice.Market)] += market.Gap
	}
	return o
}

// planned decides as the run's policy does, with what a live run of the
// deployment knows beside what it watched: each pool's market memory and
// its placement score. Its decider solves with plans every replay of the
// estimate shares, as a worker's runs share theirs.
type planned struct {
	tier    spec.Tier
	policy  policy.Name
	decider *policy.Decider
	memory  []*policy.Availability
	roaming *policy.Availability
	scores  []int
	// prober makes the probes the policy makes where the run learns
	// stock by trying, as `starter sim` replays them.
	prober *replay.Online
}

// Probe implements replay.Prober.
func (p *planned) Probe(t int, s policy.State, held policy.Choice, m policy.Market, learns bool, try func(zone int) bool) {
	p.prober.Probe(t, s, held, m, learns, try)
}

// Decide implements replay.Decider.
func (p *planned) Decide(t int, s policy.State, m policy.Market, g policy.Gang) (policy.Choice, error) {
	zones := slices.Clone(m.Zones)
	for i := range zones {
		h := &zones[i].History
		if mem := p.memory[i]; mem != nil {
			h.In, h.Out, h.FitIn, h.FitOut = mem.In, mem.Out, mem.In, mem.Out
		}
		if p.scores[i] > 0 {
			h.PlacementScore = p.scores[i]
		}
	}
	m.Zones = zones
	if r := p.roaming; r != nil {
		m.Roaming.In, m.Roaming.Out, m.Roaming.FitIn, m.Roaming.FitOut = r.In, r.Out, r.In, r.Out
	}
	return p.decider.DecideGang(p.tier, p.policy, s, m, g)
}

// summarise turns a case's outcomes into its report.
func (c caseSpec) summarise(a Ask, m *markets, outs []outcome) Case {
	job := a.job(c)
	r := Case{
		Name: c.name, Tier: c.tier, DeadlineHours: round2(c.deadline.Hours()), OnDemandCostUSD: round2(job.OnDemandCost()),
		HorizonHours: round2(c.horizon.Hours()), Windows: len(outs), Basis: m.basis,
	}
	costs := make([]float64, len(outs))
	finish := make([]float64, len(outs))
	held := map[string]time.Duration{}
	var all time.Duration
	var probes float64
	met, finished := 0, 0
	for i, o := range outs {
		costs[i] = o.cost
		probes += o.probes
		finish[i] = math.Inf(1)
		if o.done {
			finished++
			finish[i] = o.finish.Hours()
			if c.deadline > 0 && o.finish <= c.deadline {
				met++
			}
		}
		for k, d := range o.held {
			held[k] += d
			all += d
		}
	}
	r.CostUSD = Spread{P10: round2(quantile(costs, 0.1)), P50: round2(quantile(costs, 0.5)), P90: round2(quantile(costs, 0.9))}
	r.FinishHours = Finish{P50: finite(quantile(finish, 0.5)), P90: finite(quantile(finish, 0.9))}
	r.FinishedShare = share(finished, len(outs))
	r.ProbeUSD = round2(probes / float64(len(outs)))
	if c.deadline > 0 {
		s := share(met, len(outs))
		r.DeadlineMetShare = &s
	}
	for k, d := range held {
		r.Offerings = append(r.Offerings, Use{Offering: k, Share: math.Round(1000*float64(d)/float64(all)) / 1000})
	}
	sort.Slice(r.Offerings, func(i, j int) bool {
		x, y := r.Offerings[i], r.Offerings[j]
		return x.Share > y.Share || x.Share == y.Share && x.Offering < y.Offering
	})
	return r
}

// problems are what the ask should change: a deadline no market meets,
// a budget the run would spend before its work is done.
func (a Ask) problems(cases []Case) []Problem {
	var out []Problem
	written := cases[0]
	if need := a.Work + a.RestartOverhead; a.Deadline > 0 && a.Deadline < need {
		out = append(out, Problem{"deadline", fmt.Sprintf("leaves %s, less than the work and one start (%s), so not even on-demand meets it", a.Deadline.Round(time.Minute), need.Round(time.Minute)),
			fmt.Sprintf("move the deadline to at least %s from now", need.Round(time.Minute))})
	} else if written.DeadlineMetShare != nil && *written.DeadlineMetShare < 0.9 && written.Tier == spec.TierDeadline {
		fix := "move the deadline later"
		for _, c := range cases[1:] {
			if c.Tier == spec.TierDeadline && c.DeadlineHours > written.DeadlineHours && c.DeadlineMetShare != nil && *c.DeadlineMetShare >= 0.9 {
				fix = fmt.Sprintf("move the deadline to %.0fh from now (met in %.0f%% of replays)", c.DeadlineHours, 100**c.DeadlineMetShare)
				break
			}
		}
		out = append(out, Problem{"deadline", fmt.Sprintf("was met in %.0f%% of replays", 100**written.DeadlineMetShare), fix})
	}
	if b := a.BudgetUSD; b > 0 {
		switch c := written.CostUSD; {
		case b < c.P10:
			out = append(out, Problem{"budget_usd", fmt.Sprintf("$%.2f is below the estimate's p10 of $%.2f: 9 runs in 10 would spend it before their work is done", b, c.P10),
				fmt.Sprintf("raise budget_usd to at least $%.2f (the p90), or choose a case that costs less", c.P90)})
		case b < c.P90:
			out = append(out, Problem{"budget_usd", fmt.Sprintf("$%.2f is below the estimate's p90 of $%.2f: some runs would stop over budget", b, c.P90),
				fmt.Sprintf("raise budget_usd to $%.2f to cover 9 runs in 10", c.P90)})
		}
	}
	return out
}

// quantile is the q-th quantile of xs, interpolated between ranks; +Inf
// values sort last.
func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	pos := q * float64(len(s)-1)
	lo := int(pos)
	if lo+1 >= len(s) {
		return s[len(s)-1]
	}
	if math.IsInf(s[lo+1], 1) {
		if pos == float64(lo) {
			return s[lo]
		}
		return math.Inf(1)
	}
	return s[lo] + (pos-float64(lo))*(s[lo+1]-s[lo])
}

func finite(h float64) *float64 {
	if math.IsInf(h, 1) {
		return nil
	}
	h = math.Round(h*100) / 100
	return &h
}

func share(n, of int) float64 { return math.Round(1000*float64(n)/float64(of)) / 1000 }

func round2(x float64) float64 { return math.Round(x*100) / 100 }
