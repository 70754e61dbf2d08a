package training

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/policy"
	"refuel/pkg/replay"
	"refuel/pkg/spec"
	"refuel/pkg/trace"
	"refuel/workflows"
	"refuel/workflows/workload"
)

// clockedMarket is a run's view of a market that keeps a clock of its own
// (the simulated cloud): at each of its ticks the run decides with
// pkg/policy what to hold, and keeps its account with the same replay
// meter `starter sim` uses, so that both reach the same decisions and the
// same cost from the same stock.
type clockedMarket struct {
	r        *run
	provider string
	nodes    int // the gang's, 0 for one node: the stock asked for
	minNodes int // an elastic gang's fewest, 0 for a rigid one
	pools    []activities.MarketPool
	zones    []string             // the policy's name of each pool
	spot     []*capacity.Offering // per pool; nil where it sells no spot
	onDemand []*capacity.Offering // per pool; nil where it sells no on-demand

	policy  policy.Name
	decider policy.Decider
	job     replay.Job
	meter   *replay.Meter
	// acquiresProbes makes refuel's probes acquisitions through the
	// provider (acquiresProbesVersion), not answers from the tick's stock.
	acquiresProbes bool
	start          int
	tick           int           // the next tick to decide
	holding        policy.Choice // what the account says the run holds

	// A tick goes through three steps: its view is asked for (view),
	// its stock is seen by the meter (seen), and what to hold is decided
	// (decided), after which the run acts on it. A training attempt that
	// ends, or is stopped, between two steps leaves the rest for the
	// run's next turn of its loop.
	view    workflow.Future
	seen    *seenTick
	decided *policy.Choice
	// why is the latest decision in a line a person reads.
	why string
}

// seenTick is a tick whose stock the meter has seen: the policy's view
// of the run and the market at it.
type seenTick struct {
	state  policy.State
	market policy.Market
}

// openMarket finds out whether the run's offerings trade on a market with
// a clock; if so the run follows it. Critical runs hold stable capacity
// whatever the market does, and a run spread over several providers keeps
// wall time. A gang (gangClockVersion) follows the clock as `starter sim
// --nodes N [--min-nodes M]` replays it: the meter sees how many of its
// nodes each pool has in stock, bills every node held, and the policy
// decides for the gang on those counts (policy.DecideGang); an elastic
// gang holds the width the policy chooses.
func openClockedMarket(ctx workflow.Context, r *run) (*clockedMarket, error) {
	if !r.spec.Tier.AllowsSpot() || r.Nodes() > 1 && workflow.GetVersion(ctx, gangClockVersion, workflow.DefaultVersion, 1) < 1 ||
		workflow.GetVersion(ctx, marketClockVersion, workflow.DefaultVersion, 1) < 1 {
		return nil, nil
	}
	m := &clockedMarket{r: r, policy: policy.Name(r.spec.Policy)}
	if r.Nodes() > 1 {
		m.nodes = r.Nodes()
		if r.spec.Resources.Elastic() {
			m.minNodes = r.spec.Resources.MinNodeCount()
		}
	}
	for _, o := range r.Offerings {
		if m.provider == "" {
			m.provider = o.Provider
		}
		if o.Provider != m.provider {
			return nil, nil
		}
		m.Add(o)
	}
	if len(m.pools) == 0 {
		return nil, nil
	}
	var view activities.MarketView
	in := activities.MarketInput{Provider: m.provider, Pools: m.pools, Nodes: m.nodes, MinNodes: m.minNodes}
	actx := workload.Titled(workload.ControlOptions(ctx), "does "+m.provider+"'s market keep a clock?")
	if err := workflow.ExecuteActivity(actx, activities.OpenMarketName, in).Get(ctx, &view); err != nil || !view.Clocked {
		return nil, err
	}
	var moves *movePrices
	if pricesZones(ctx) {
		p := movePricesOf(r.opts)
		moves = &p
	}
	m.job = m.jobFor(r.spec, r.StartedAt, view.RestartOverhead, moves)
	m.job.Nodes, m.job.MinNodes = m.nodes, m.minNodes
	m.job.Rules = rules(ctx)
	m.job.LearnsByTrying = workflow.GetVersion(ctx, learnsByTryingVersion, workflow.DefaultVersion, 1) >= 1
	m.acquiresProbes = m.job.LearnsByTrying && workflow.GetVersion(ctx, acquiresProbesVersion, workflow.DefaultVersion, 1) >= 1
	meter, err := replay.NewMeter(m.job, m.zones, view.TickLength)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError("the market cannot be followed: "+err.Error(), "InvalidJobSpec", nil)
	}
	for t := 0; t < view.Tick-view.PastFrom; t++ {
		counts := make([]int, len(view.Past))
		for z, past := range view.Past {
			switch past[t] {
			case '1':
				counts[z] = max(1, m.nodes)
			case 'm':
				counts[z] = m.minNodes
			}
		}
		if err := meter.WitnessCounts(counts); err != nil {
			return nil, err
		}
	}
	m.meter, m.start, m.tick = meter, view.Tick, view.Tick
	return m, nil
}

// Add files an offering under its pool, naming the pool by its zone, or
// zone/type where a zone has several types.
func (m *clockedMarket) Add(o capacity.Offering) {
	i := -1
	for k, p := range m.pools {
		if p.Zone == o.Zone && p.InstanceType == o.InstanceType {
			i = k
		}
	}
	if i < 0 {
		m.pools = append(m.pools, activities.MarketPool{Zone: o.Zone, InstanceType: o.InstanceType})
		m.zones = append(m.zones, o.Zone)
		m.spot, m.onDemand = append(m.spot, nil), append(m.onDemand, nil)
		i = len(m.pools) - 1
		for k, p := range m.pools[:i] {
			if p.Zone == o.Zone {
				m.zones[k], m.zones[i] = p.Zone+"/"+p.InstanceType, o.Zone+"/"+o.InstanceType
			}
		}
	}
	switch o.Market {
	case capacity.Spot:
		m.spot[i] = &o
	case capacity.OnDemand:
		m.onDemand[i] = &o
	}
}

// job is the run as the meter accounts for it. The deadline is a budget
// from the run's start, spent in market time; a flexible run without one
// is given a hundred times its work, which no decision of its tier reads.
// With moves (a run that prices its zones, see pricedZonesVersion) each
// pool is priced on its own and placed in its zone's region, and a start
// in another region than the checkpoint's moves a checkpoint of the
// moves' CheckpointGB, as `starter sim --prices` replays a run.
func (m *clockedMarket) jobFor(js spec.JobSpec, started time.Time, overhead time.Duration, moves *movePrices) replay.Job {
	j := replay.Job{Tier: js.Tier, Work: js.Work.D(), Deadline: 100 * js.Work.D(), RestartOverhead: overhead}
	if js.Deadline != nil {
		j.Deadline = js.Deadline.Sub(started)
	}
	for i := range m.pools {
		if o := m.spot[i]; o != nil && j.SpotPrice == 0 {
			j.SpotPrice = o.PricePerHour
		}
		if o := m.onDemand[i]; o != nil && j.OnDemandPrice == 0 {
			j.OnDemandPrice = o.PricePerHour
		}
	}
	if moves == nil {
		return j
	}
	j.Zones = make([]replay.ZonePrice, len(m.pools))
	for i, p := range m.pools {
		// A pool that does not sell a market keeps the run's price for
		// it, as `starter sim --prices` keeps a zone the prices do not
		// know at --spot-price and --ondemand-price.
		z := replay.ZonePrice{Region: trace.Region(p.Zone), Spot: j.SpotPrice, OnDemand: j.OnDemandPrice}
		if o := m.spot[i]; o != nil {
			z.Spot = o.PricePerHour
		}
		if o := m.onDemand[i]; o != nil {
			z.OnDemand = o.PricePerHour
		}
		j.Zones[i] = z
	}
	j.CheckpointGB, j.EgressUSDPerGB = moves.CheckpointGB, moves.EgressUSDPerGB
	j.TransferTime = moves.of("", moves.CheckpointGB).Time
	return j
}

func (*clockedMarket) Admit(workflow.Context, *workload.Workload) error { return nil }

// Next decides at each tick, holding nothing, until the run's policy
// chooses something to hold: that is what to acquire. A run the
// market's account says is done has nothing left to acquire.
func (m *clockedMarket) Next(ctx workflow.Context, w *workload.Workload) (*workload.Ask, error) {
	r := m.r
	for {
		if m.decided == nil {
			if m.seen == nil && m.meter.Finished() {
				r.finished = true
				return nil, nil
			}
			if _, err := m.see(ctx, nil); err != nil {
				return nil, err
			}
			if err := m.decide(ctx); err != nil {
				return nil, err
			}
		}
		c := *m.decided
		m.decided, m.holding = nil, c
		if !c.Holds() {
			switch r.MustStop(ctx, workload.StopYield) {
			case workload.StopPause:
				r.Enter(ctx, workflows.StatePaused)
			case workload.StopBudget:
				r.Enter(ctx, workflows.StateOverBudget)
			default:
				r.Enter(ctx, workflows.StateWaiting)
			}
			continue
		}
		o := m.offering(c)
		if o == nil {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("policy chose %s, which no offering of the run sells", c), string(capacity.SpecMismatch), nil)
		}
		m.holdWidth(ctx, c)
		return w.AskFor([]capacity.Offering{*o}), nil
	}
}

func (*clockedMarket) Acquired(workflow.Context, *workload.Workload, *workload.Lease, int) {}

// Failed: the market's account holds what the policy chose anyway (it
// had the stock); a run racing others for the last instance tries again
// at the next tick.
func (m *clockedMarket) Failed(ctx workflow.Context, w *workload.Workload, _ workload.Ask, details []activities.FailureDetail, _ *time.Duration) (bool, error) {
	if workload.Permanent(details) {
		return false, workload.CannotAcquire("cannot acquire what the policy chose", details)
	}
	w.Host.Enter(ctx, workflows.StateWaiting)
	return false, nil
}

// Watch follows the market while the run trains: at every tick the
// meter sees the stock and the policy decides. The attempt goes on while
// the policy holds what the run holds; it stops when the market takes the
// spot instance, when the policy chooses something else, and when the
// market's account says the work is done.
func (m *clockedMarket) Watch(ctx workflow.Context, _ *workload.Workload, a *workload.Attempt) workload.Move {
	for {
		if m.meter.Finished() {
			return workload.Move{End: a.StopFor(ctx, workload.DoneByMarket)}
		}
		preempted, err := m.see(ctx, a)
		switch {
		case errors.Is(err, errAttemptEnded):
			return workload.Move{End: a.Wait(ctx)}
		case err != nil:
			return workload.Move{Err: err}
		case preempted:
			return workload.Move{End: a.StopFor(ctx, workload.TakenByMarket)}
		}
		if err := m.decide(ctx); err != nil {
			return workload.Move{Err: err}
		}
		if *m.decided != m.holding {
			return workload.Move{End: a.StopFor(ctx, workload.MovedByMarket)}
		}
		m.decided = nil
	}
}

// errAttemptEnded says the training attempt ended while the run waited
// for the market's tick.
var errAttemptEnded = errors.New("the training attempt ended")

// see waits for the market's next tick and lets the meter see its stock;
// preempted says the market took the spot instance the account holds.
// While an attempt a trains, its end comes first (errAttemptEnded): the
// tick is still awaited on the run's next turn.
func (m *clockedMarket) see(ctx workflow.Context, a *workload.Attempt) (preempted bool, err error) {
	if m.seen != nil {
		return false, nil
	}
	if m.view == nil {
		in := activities.MarketInput{Provider: m.provider, Pools: m.pools, Tick: m.tick, Nodes: m.nodes, MinNodes: m.minNodes}
		m.view = workflow.ExecuteActivity(workload.Titled(workload.MarketOptions(ctx), "the market at tick "+strconv.Itoa(m.tick)), activities.MarketAtName, in)
	}
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(m.view, func(workflow.Future) {})
	if a != nil {
		sel.AddFuture(a.Lead().Result, func(workflow.Future) {})
	}
	sel.Select(ctx)
	if a != nil && a.Lead().Result.IsReady() {
		return false, errAttemptEnded
	}
	var view activities.MarketView
	err = m.view.Get(ctx, &view)
	m.view = nil
	if ctx.Err() != nil {
		return false, temporal.NewCanceledError()
	}
	if err != nil {
		return false, err
	}
	counts := view.Counts
	if len(counts) == 0 {
		counts = make([]int, len(view.Stock))
		for z, in := range view.Stock {
			if in {
				counts[z] = max(1, m.nodes)
			}
		}
	}
	s, market, preempted, err := m.meter.BeginCounts(counts)
	if err != nil {
		return false, err
	}
	m.seen = &seenTick{state: s, market: market}
	return preempted && m.r.Lease != nil, nil
}

// holdWidth makes the width an elastic gang acquires the one c holds
// (c.Nodes; 0 is all), booking a change of it as the ledger's resize.
func (m *clockedMarket) holdWidth(ctx workflow.Context, c policy.Choice) {
	r := m.r
	if m.minNodes == 0 {
		return
	}
	from := r.NodesNow()
	r.Width = c.Nodes
	if r.NodesNow() != from {
		r.Resized(ctx, from)
	}
}

// offering is the offering that sells a choice.
func (m *clockedMarket) offering(c policy.Choice) *capacity.Offering {
	for i, z := range m.zones {
		if z != c.Zone {
			continue
		}
		if c.Market == capacity.Spot {
			return m.spot[i]
		}
		return m.onDemand[i]
	}
	return nil
}

// Ended: the market stops an attempt when its policy moves the run, when
// its account says the work is done, and when it takes the spot
// instance. A run of one node heeds that first: the market stopped its
// attempt, and a notice its agent had not seen yet is the market's
// preemption all the same. A gang heeds its ranks' completion and
// failures first; any of its nodes lost is the whole gang taken, as
// `starter sim --nodes N` replays it, and a gang moved by its policy is
// stopped.
func (m *clockedMarket) Ended(e workload.AttemptEnd, lost []workload.NodeEnd, gang bool) *workload.MarketEnd {
	if !gang {
		completed := e.Err == nil && e.Res.Outcome == activities.OutcomeCompleted
		switch {
		case e.Cause == workload.MovedByMarket:
			return &workload.MarketEnd{Ending: workload.EndMoved, First: true}
		case e.Cause == workload.DoneByMarket:
			return &workload.MarketEnd{Ending: workload.EndDone, First: true}
		case e.Cause == workload.TakenByMarket && !completed:
			return &workload.MarketEnd{Ending: workload.EndTaken, First: true}
		}
		return nil
	}
	switch {
	case e.Cause == workload.DoneByMarket:
		return &workload.MarketEnd{Ending: workload.EndDone}
	case len(lost) > 0 || e.Cause == workload.TakenByMarket:
		taken := &workload.MarketEnd{Ending: workload.EndTaken}
		for i := range lost {
			if lost[i].End.Err != nil {
				taken.Silent = &lost[i]
			}
		}
		return taken
	}
	return nil
}

// WidthToAcquire: the policy chose the width at the tick (holdWidth).
func (m *clockedMarket) WidthToAcquire(w *workload.Workload) int { return w.NodesNow() }

// Shrinks: the policy chooses the width it acquires at each tick
// instead.
func (m *clockedMarket) Shrinks() bool { return false }

// DefersRelease: the account counts what the run holds.
func (m *clockedMarket) DefersRelease() bool { return false }

// ContinuesAsNew: the account is the run's own, kept while it runs.
func (m *clockedMarket) ContinuesAsNew() bool { return false }

func (m *clockedMarket) Status() (*workload.MarketStatus, string) { return m.marketStatus(), m.why }

// marketStatus is the account as status shows it.
func (m *clockedMarket) marketStatus() *workload.MarketStatus {
	res := m.meter.Result()
	st := &workload.MarketStatus{
		Policy: string(m.policy), Zones: m.zones, Job: m.job, StartTick: m.start, TickSeconds: m.meter.Gap().Seconds(),
		CostUSD: res.Cost, ProbeUSD: res.ProbeUSD, SpotHours: res.Spot.Hours(), OnDemandHours: res.OnDemand.Hours(),
		Preemptions: res.Preemptions, Changeovers: res.Changeovers, Finished: res.Finished,
		FinishHours: res.Finish.Hours(), DeadlineMet: res.DeadlineMet, Decisions: make([]workload.MarketDecision, len(res.Steps)),
		Clock: workload.ClockMarket, Why: m.why,
	}
	for i, s := range res.Steps {
		st.Decisions[i] = workload.MarketDecision{Tick: m.start + i, Choice: s.Choice.String(), Preempted: s.Preempted}
		st.DoneHours = s.Done.Hours()
	}
	return st
}
