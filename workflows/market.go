package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/policy"
	"refuel/pkg/replay"
	"refuel/pkg/spec"
)

// marketClockVersion marks runs that look for a market clock before
// acquiring; runs recorded before it go straight to acquiring.
const marketClockVersion = "market-clock"

// clockedMarket is a run's view of a market that keeps a clock of its own
// (the simulated cloud): at each of its ticks the run decides with
// pkg/policy what to hold, and keeps its account with the same replay
// meter `starter sim` uses, so that both reach the same decisions and the
// same cost from the same stock.
type clockedMarket struct {
	provider string
	pools    []activities.MarketPool
	zones    []string             // the policy's name of each pool
	spot     []*capacity.Offering // per pool; nil where it sells no spot
	onDemand []*capacity.Offering // per pool; nil where it sells no on-demand

	policy  policy.Name
	decider policy.Decider
	job     replay.Job
	meter   *replay.Meter
	start   int
	tick    int           // the next tick to decide
	holding policy.Choice // what the account says the run holds
}

// MarketStatus is a clocked run's account in market time: what it decided
// at each tick and what that cost, as `starter sim` reports a window.
type MarketStatus struct {
	Policy string   `json:"policy"`
	Zones  []string `json:"zones"`
	// Job is the run as the account sees it: work, the deadline as a
	// budget of market time from the start, and prices.
	Job           replay.Job       `json:"job"`
	StartTick     int              `json:"start_tick"`
	TickSeconds   float64          `json:"tick_seconds"`
	CostUSD       float64          `json:"cost_usd"`
	SpotHours     float64          `json:"spot_hours"`
	OnDemandHours float64          `json:"ondemand_hours"`
	Preemptions   int              `json:"preemptions"`
	Changeovers   int              `json:"changeovers"`
	DoneHours     float64          `json:"done_hours"`
	Finished      bool             `json:"finished"`
	FinishHours   float64          `json:"finish_hours"`
	DeadlineMet   bool             `json:"deadline_met"`
	Decisions     []MarketDecision `json:"decisions"`
}

// MarketDecision is what a run held during one tick of the market.
type MarketDecision struct {
	Tick      int    `json:"tick"`
	Choice    string `json:"choice"`
	Preempted bool   `json:"preempted,omitempty"`
}

// openMarket finds out whether the run's offerings trade on a market with
// a clock; if so the run follows it. Critical runs hold stable capacity
// whatever the market does, and a run spread over several providers keeps
// wall time.
func (r *run) openMarket(ctx workflow.Context) (*clockedMarket, error) {
	if !r.spec.Tier.AllowsSpot() || workflow.GetVersion(ctx, marketClockVersion, workflow.DefaultVersion, 1) < 1 {
		return nil, nil
	}
	m := &clockedMarket{policy: policy.Name(r.spec.Policy)}
	for _, o := range r.offerings {
		if m.provider == "" {
			m.provider = o.Provider
		}
		if o.Provider != m.provider {
			return nil, nil
		}
		m.add(o)
	}
	if len(m.pools) == 0 {
		return nil, nil
	}
	var view activities.MarketView
	in := activities.MarketInput{Provider: m.provider, Pools: m.pools}
	if err := workflow.ExecuteActivity(controlOptions(ctx), activities.OpenMarketName, in).Get(ctx, &view); err != nil || !view.Clocked {
		return nil, err
	}
	m.job = m.jobFor(r.spec, r.status.StartedAt, view.RestartOverhead)
	meter, err := replay.NewMeter(m.job, m.zones, view.TickLength)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError("the market cannot be followed: "+err.Error(), "InvalidJobSpec", nil)
	}
	for t := 0; t < view.Tick-view.PastFrom; t++ {
		stock := make([]bool, len(view.Past))
		for z, past := range view.Past {
			stock[z] = past[t] == '1'
		}
		if err := meter.Witness(stock); err != nil {
			return nil, err
		}
	}
	m.meter, m.start, m.tick = meter, view.Tick, view.Tick
	return m, nil
}

// add files an offering under its pool, naming the pool by its zone, or
// zone/type where a zone has several types.
func (m *clockedMarket) add(o capacity.Offering) {
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
func (m *clockedMarket) jobFor(js spec.JobSpec, started time.Time, overhead time.Duration) replay.Job {
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
	return j
}

// followMarket is the run on a clocked market: at every tick, see the
// stock, decide with the run's policy, hold what it chose, until the work
// is done by the market's account or the trainer finishes first.
func (r *run) followMarket(ctx workflow.Context, m *clockedMarket) error {
	r.market = m
	for !r.done && !m.meter.Finished() {
		view, err := r.awaitTick(ctx, m.tick)
		if err != nil {
			return err
		}
		if r.done {
			break
		}
		s, market, preempted, err := m.meter.Begin(view.Stock)
		if err != nil {
			return err
		}
		if preempted && r.instance != nil {
			r.loseToMarket(ctx)
		}
		choice := policy.None
		if !r.paused {
			if choice, err = m.decider.Decide(r.spec.Tier, m.policy, s, market); err != nil {
				return temporal.NewNonRetryableApplicationError(err.Error(), "InvalidJobSpec", nil)
			}
		}
		step, err := m.meter.Hold(choice)
		if err != nil {
			return fmt.Errorf("policy %s at tick %d: %w", m.policy, m.tick, err)
		}
		m.tick++
		if err := r.hold(ctx, step.Choice); err != nil {
			return err
		}
	}
	if !r.done {
		// The market's account says the work is done.
		r.stopInstance(ctx, activities.ReleaseCompleted)
		r.done = true
	}
	return nil
}

// awaitTick waits for the market's tick, settling the training attempt
// meanwhile if it ends.
func (r *run) awaitTick(ctx workflow.Context, tick int) (activities.MarketView, error) {
	m := r.market
	in := activities.MarketInput{Provider: m.provider, Pools: m.pools, Tick: tick}
	f := workflow.ExecuteActivity(marketOptions(ctx), activities.MarketAtName, in)
	for {
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(f, func(workflow.Future) {})
		if r.training != nil {
			sel.AddFuture(r.training, func(workflow.Future) {})
		}
		sel.Select(ctx)
		if r.training != nil && r.training.IsReady() {
			if err := r.trainingEnded(ctx); err != nil {
				return activities.MarketView{}, err
			}
		}
		if f.IsReady() {
			var view activities.MarketView
			err := f.Get(ctx, &view)
			if ctx.Err() != nil {
				return view, temporal.NewCanceledError()
			}
			return view, err
		}
	}
}

// hold makes the run hold what the policy chose: keep the instance,
// change over to another (stopping the trainer at a checkpoint first),
// or give it back and hold nothing.
func (r *run) hold(ctx workflow.Context, c policy.Choice) error {
	m := r.market
	if r.instance != nil && m.holding == c {
		if r.training == nil {
			r.startTraining(ctx)
		}
		return nil
	}
	if r.instance != nil {
		r.stopInstance(ctx, activities.ReleasePaused)
	}
	m.holding = c
	if !c.Holds() {
		if r.paused {
			r.setState(ctx, StatePaused)
		} else {
			r.setState(ctx, StateWaiting)
		}
		return nil
	}
	o := m.offering(c)
	if o == nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("policy chose %s, which no offering of the run sells", c), string(capacity.SpecMismatch), nil)
	}
	r.attempt++
	r.status.Attempt = r.attempt
	r.setState(ctx, StateAcquiring)
	req := capacity.Request{
		RunID: workflow.GetInfo(ctx).WorkflowExecution.ID, Attempt: r.attempt, Offerings: []capacity.Offering{*o},
		Tags:            map[string]string{capacity.TagTeam: r.spec.Team, capacity.TagPool: "burst"},
		MaxPricePerHour: r.spec.Resources.MaxPricePerHour,
	}
	var inst capacity.Instance
	err := workflow.ExecuteActivity(acquireOptions(ctx), activities.AcquireName, req).Get(ctx, &inst)
	if ctx.Err() != nil {
		return temporal.NewCanceledError()
	}
	if err != nil {
		// The market's account holds it anyway: it had the stock. A run
		// racing others for the last instance tries again next tick.
		details := r.recordAcquireFailure(ctx, err)
		if permanent(details) {
			return temporal.NewNonRetryableApplicationError("cannot acquire what the policy chose: "+describeFailures(details), string(details[0].Class), nil, details)
		}
		r.setState(ctx, StateWaiting)
		return nil
	}
	r.onAcquired(ctx, inst)
	r.startTraining(ctx)
	return nil
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

// trainingEnded settles a training attempt that ended by itself or was
// stopped.
func (r *run) trainingEnded(ctx workflow.Context) error {
	res, err := r.attemptResult(ctx)
	return r.settle(ctx, res, err)
}

// stopInstance stops the trainer at a checkpoint and gives the instance
// back.
func (r *run) stopInstance(ctx workflow.Context, reason activities.ReleaseReason) {
	if r.training != nil {
		res, _ := r.stopAttempt(ctx)
		r.observeResult(ctx, res)
	}
	r.release(ctx, reason)
}

// loseToMarket settles the spot instance the market just took back. The
// agent may not have reported yet: the run stops it at a checkpoint,
// which the notice allows for, and counts the preemption either way.
func (r *run) loseToMarket(ctx workflow.Context) {
	if r.training != nil {
		res, err := r.stopAttempt(ctx)
		if err == nil && res.Outcome == activities.OutcomeCompleted {
			_ = r.settle(ctx, res, nil)
			return
		}
		r.observeResult(ctx, res)
		r.onPreempted(ctx, max(res.LastStep, r.status.Step), true)
		return
	}
	r.onPreempted(ctx, r.status.Step, true)
}

// marketStatus is the account as status shows it.
func (m *clockedMarket) marketStatus() *MarketStatus {
	res := m.meter.Result()
	st := &MarketStatus{
		Policy: string(m.policy), Zones: m.zones, Job: m.job, StartTick: m.start, TickSeconds: m.meter.Gap().Seconds(),
		CostUSD: res.Cost, SpotHours: res.Spot.Hours(), OnDemandHours: res.OnDemand.Hours(),
		Preemptions: res.Preemptions, Changeovers: res.Changeovers, Finished: res.Finished,
		FinishHours: res.Finish.Hours(), DeadlineMet: res.DeadlineMet, Decisions: make([]MarketDecision, len(res.Steps)),
	}
	for i, s := range res.Steps {
		st.Decisions[i] = MarketDecision{Tick: m.start + i, Choice: s.Choice.String(), Preempted: s.Preempted}
		st.DoneHours = s.Done.Hours()
	}
	return st
}
