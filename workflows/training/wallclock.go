package training

import (
	"strconv"
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/policy"
	"refuel/pkg/spec"
	"refuel/workflows/workload"
)

// runClock is the wall clock as a training run keeps it (WallClock): a
// deadline run that may use both spot and on-demand decides with refuel
// at two moments: when a try finds no spot, whether to wait for it or
// take on-demand now (waitForSpotVersion); and while on on-demand,
// whether to go back to spot (backToSpotVersion). An elastic gang short
// of nodes tries for them while it trains (elastic.go).
type runClock struct {
	workload.WallClock
	r *run
}

// Next is the tier's order, or spot alone while refuel says a deadline
// run should wait for it.
func (c runClock) Next(ctx workflow.Context, w *workload.Workload) (*workload.Ask, error) {
	r := c.r
	if r.MustStop(ctx, workload.StopYield) != workload.GoOn { // no pool: no yield
		return nil, nil
	}
	order := capacity.Order(r.Offerings, r.spec.Tier, r.AvoidZone)
	if wait, first := c.waitsForSpot(ctx); wait {
		a := w.AskFor(tryFirst(capacity.OnlyMarket(order, capacity.Spot), first))
		a.SpotOnly = true
		return a, nil
	}
	return w.AskFor(order), nil
}

// Failed: spot that no wait for stock brings back (quota, price, a spec
// it does not meet) ends a deadline run's wait for it at once; anything
// else as on any wall clock.
func (c runClock) Failed(ctx workflow.Context, w *workload.Workload, a workload.Ask, details []activities.FailureDetail, backoff *time.Duration) (bool, error) {
	if a.SpotOnly && !workload.CuredSoon(details) {
		c.r.Spot.Impossible = true // on to on-demand
		return true, nil
	}
	return c.WallClock.Failed(ctx, w, a, details, backoff)
}

// Watch: a deadline run on on-demand looks for a way back to spot while
// it trains; an elastic gang short of nodes, for them.
func (c runClock) Watch(ctx workflow.Context, w *workload.Workload, a *workload.Attempt) workload.Move {
	if c.short(ctx) {
		grow, err := c.awaitNodes(ctx, a)
		if grow || err != nil {
			return workload.Move{Grow: grow, Err: err}
		}
	}
	if c.watchesForSpot(ctx) {
		spot, err := c.awaitSpot(ctx, a)
		if spot != nil || err != nil {
			return workload.Move{Spot: spot, Err: err}
		}
	}
	return c.WallClock.Watch(ctx, w, a)
}

// Status: a deadline run that weighs spot against on-demand shows its
// latest decision.
func (c runClock) Status() (*workload.MarketStatus, string) {
	s := c.r.Spot
	if s.Why == "" {
		return nil, ""
	}
	return &workload.MarketStatus{Clock: workload.ClockWall, Policy: string(policy.Refuel), Why: s.Why, DecidedAt: s.DecidedAt}, s.Why
}

// spotWatch is how a deadline run weighs spot against on-demand. A run
// whose options are in its history derives it from them; one recorded
// before took it from the worker's options when it first needed it,
// through a side effect, and keeps it in its state.
type spotWatch struct {
	Every, AtMost, RestartOverhead time.Duration
	// Wait is RunOptions.WaitForSpot; Step the longest a waiting run goes
	// between tries (RunOptions.MaxCapacityBackoff).
	Wait bool          `json:",omitempty"`
	Step time.Duration `json:",omitempty"`
	// Moves price a move of the checkpoint between regions.
	Moves movePrices `json:",omitzero"`
}

func watchOf(o workload.RunOptions) spotWatch {
	return spotWatch{Every: o.SpotRetryInterval, AtMost: o.MaxSpotRetryInterval, RestartOverhead: o.RestartOverhead,
		Wait: o.WaitForSpot, Step: o.MaxCapacityBackoff, Moves: movePricesOf(o)}
}

// watch returns the run's spotWatch.
func (c runClock) spotWatch(ctx workflow.Context) *spotWatch {
	r := c.r
	if r.Options != nil {
		w := watchOf(*r.Options)
		return &w
	}
	if r.Spot.Watch == nil {
		var w spotWatch
		o := r.opts
		if err := workflow.SideEffect(ctx, func(workflow.Context) any { return watchOf(o) }).Get(&w); err != nil {
			return nil
		}
		r.Spot.Watch = &w
	}
	return r.Spot.Watch
}

// decidesMarket reports whether the run chooses between spot and
// on-demand itself: a deadline run that may use both. A gang decides as
// one node would, for all its nodes at once (gangSpotVersion): it waits
// for a gang's worth of spot in one zone, and goes back to spot whole.
func (c runClock) decidesMarket(ctx workflow.Context) bool {
	r := c.r
	if r.spec.Tier != spec.TierDeadline || r.spec.Deadline == nil ||
		len(c.spotOfferings()) == 0 || len(capacity.OnlyMarket(r.Offerings, capacity.OnDemand)) == 0 {
		return false
	}
	return r.Nodes() == 1 || workflow.GetVersion(ctx, gangSpotVersion, workflow.DefaultVersion, 1) >= 1
}

// waitsForSpot reports whether the run, about to acquire, should try spot
// alone and wait while none is in stock: refuel's answer for the run's
// slack and work left, asked again before every try. Waiting costs no
// money (on-demand later costs what it costs now), only slack, which
// later preemptions need; so refuel waits while the slack allows it and
// takes on-demand when it does not. While it waits, first is the zone
// refuel would start in were every zone in stock, but the one that just
// preempted it, for a run that prices its zones; "" leaves the tier's
// order.
func (c runClock) waitsForSpot(ctx workflow.Context) (wait bool, first string) {
	r := c.r
	if !c.decidesMarket(ctx) || r.Spot.Impossible || workflow.GetVersion(ctx, waitForSpotVersion, workflow.DefaultVersion, 1) < 1 {
		return false, ""
	}
	w := c.spotWatch(ctx)
	if w == nil || !w.Wait {
		return false, ""
	}
	od := capacity.OnlyMarket(capacity.Order(r.Offerings, r.spec.Tier, ""), capacity.OnDemand)
	m, priced := c.spotMarket(ctx, w, max(w.Step, time.Second), od[0].PricePerHour)
	s := c.policyState(workflow.Now(ctx), w, policy.None)
	if !askPlans(ctx) {
		return policy.WaitForSpot(s, m), ""
	}
	in := activities.DecisionInput{Kind: activities.DecideWaitForSpot, State: s, Market: m}
	if priced {
		for _, o := range c.spotOfferings() {
			if o.Zone == r.AvoidZone {
				in.NotFirst = append(in.NotFirst, o.Key())
			}
		}
	}
	d, err := decide(ctx, in, "ask refuel whether to wait for spot")
	if err != nil {
		// Without an answer the run takes on-demand: its deadline is safe.
		workflow.GetLogger(ctx).Warn("refuel's plans did not answer; taking on-demand", "error", err)
		d.Explanation = "on-demand: refuel's plans did not answer (" + err.Error() + ")"
	}
	c.explain(ctx, d.Explanation)
	if !priced || d.Choice.Market != capacity.Spot {
		return d.Wait, ""
	}
	return d.Wait, d.Choice.Zone
}

// tryFirst is spots with the offering keyed first at their head.
func tryFirst(spots []capacity.Offering, first string) []capacity.Offering {
	for _, o := range spots {
		if o.Key() == first {
			return capacity.First(spots, o)
		}
	}
	return spots
}

// explain keeps the latest market decision's line for status and the
// Web UI.
func (c runClock) explain(ctx workflow.Context, why string) {
	r := c.r
	r.Spot.Why, r.Spot.DecidedAt = why, workflow.Now(ctx)
	r.ShowDetails(ctx)
}

// spotMarket is the run's spot offerings as refuel plans with them, each
// a place of its own with what all runs saw of its stock, deciding every
// step. A run that prices its zones (priced, see pricedZonesVersion)
// places each in its region with the on-demand price beside it, and
// counts the move of its checkpoint to another region at w's prices.
func (c runClock) spotMarket(ctx workflow.Context, w *spotWatch, step time.Duration, onDemandPrice float64) (m policy.Market, priced bool) {
	spots := c.spotOfferings()
	m = policy.Market{Step: step, OnDemandPrice: onDemandPrice}
	history := c.stockHistory(ctx, spots)
	priced = pricesZones(ctx)
	m.Rules = rules(ctx)
	for i, o := range spots {
		z := policy.Zone{Name: o.Key(), SpotPrice: o.PricePerHour}
		if history != nil {
			z.History = history[i]
		}
		if priced {
			z.Region, z.OnDemandPrice = regionOf(o), c.onDemandBeside(o)
		}
		m.Zones = append(m.Zones, z)
	}
	if priced {
		m.Move = c.move(w.Moves)
	}
	return m, priced
}

// stockHistory is what all runs saw of the offerings' stock, from the
// control plane's stock logs; nil when the logs cannot be read (the plan
// then goes by refuel's priors).
func (c runClock) stockHistory(ctx workflow.Context, offerings []capacity.Offering) []policy.Availability {
	r := c.r
	if workflow.GetVersion(ctx, stockHistoryVersion, workflow.DefaultVersion, 1) < 1 {
		return nil
	}
	keys := make([]string, len(offerings))
	for i, o := range offerings {
		keys[i] = o.Key()
	}
	var h []policy.Availability
	err := r.ReadMemory(ctx, activities.StockHistoryName, "what runs saw of "+strconv.Itoa(len(keys))+" spot offerings' stock", keys).Get(ctx, &h)
	if err != nil || len(h) != len(keys) {
		workflow.GetLogger(ctx).Warn("stock logs unavailable; planning with refuel's priors", "error", err)
		return nil
	}
	return h
}

// policyState is the run as refuel sees it at now, holding held.
func (c runClock) policyState(now time.Time, w *spotWatch, held policy.Choice) policy.State {
	r := c.r
	remaining := c.remainingWork(now)
	return policy.State{
		Elapsed: now.Sub(r.StartedAt), TimeLeft: r.spec.Deadline.Sub(now),
		Done: r.spec.Work.D() - remaining, Remaining: remaining,
		RestartOverhead: w.RestartOverhead, Current: held,
	}
}

// watchesForSpot reports whether the run, training now on on-demand,
// should look for a way back to spot meanwhile.
func (c runClock) watchesForSpot(ctx workflow.Context) bool {
	r := c.r
	if r.Lease.Offering().Market != capacity.OnDemand || !c.decidesMarket(ctx) {
		return false
	}
	if workflow.GetVersion(ctx, backToSpotVersion, workflow.DefaultVersion, 1) < 1 {
		return false
	}
	w := c.spotWatch(ctx)
	return w != nil && w.Every > 0
}

// spotOfferings are the spot offerings the run may use, in order.
func (c runClock) spotOfferings() []capacity.Offering {
	r := c.r
	return capacity.OnlyMarket(capacity.Order(r.Offerings, r.spec.Tier, ""), capacity.Spot)
}

// awaitSpot waits while the run trains on on-demand, asking refuel every
// so often whether to try spot again; when it says so, it launches spot
// while the on-demand instance keeps training, so a try that finds no
// stock costs nothing. It returns the spot instance it got, or nil once
// the attempt ends (by itself, or stopped for a pause or a cancel). Tries
// that find no stock back off up to the watch's AtMost. A run whose
// history grew long continues as new instead (the error).
func (c runClock) awaitSpot(ctx workflow.Context, a *workload.Attempt) (*workload.Lease, error) {
	w := c.spotWatch(ctx)
	wait := w.Every
	var spot *workload.Lease
	_, err := c.pollWhileTraining(ctx, a, func() (time.Duration, string) {
		return wait, "ask refuel whether to try spot again"
	}, func() bool {
		first, ok := c.spotToTry(ctx, w)
		if !ok {
			wait = w.Every
			return false
		}
		if spot = c.trySpot(ctx, first); spot != nil {
			return true
		}
		wait = min(2*wait, max(w.AtMost, w.Every))
		return false
	})
	return spot, err
}

// pollWhileTraining waits while the attempt trains and, each time the
// wait ends, asks try, until try succeeds (true), the attempt ends by
// itself or is stopped (false), or the run's history grew long and it
// continues as new (the error). While a pause or a yield stops the
// trainer it asks nothing: the attempt ends soon.
func (c runClock) pollWhileTraining(ctx workflow.Context, a *workload.Attempt, wait func() (time.Duration, string), try func() bool) (bool, error) {
	r := c.r
	for {
		d, summary := wait()
		tctx, cancelTimer := workflow.WithCancel(ctx)
		t := workload.Timer(tctx, d, summary)
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(a.Lead().Result, func(workflow.Future) {})
		sel.AddFuture(t, func(workflow.Future) {})
		sel.Select(ctx)
		if a.Lead().Result.IsReady() || ctx.Err() != nil {
			cancelTimer()
			return false, nil
		}
		if a.MayContinue && r.HistoryFull(ctx) {
			return false, a.HandOff(ctx)
		}
		if r.MustStop(ctx, workload.StopBudget) != workload.GoOn {
			continue
		}
		if try() {
			return true, nil
		}
	}
}

// spotToTry asks refuel whether to try spot now, for the run as it stands
// (its slack, the work left) on its spot offerings (see spotMarket); it
// returns the offering to try first.
func (c runClock) spotToTry(ctx workflow.Context, w *spotWatch) (capacity.Offering, bool) {
	r := c.r
	o := r.Lease.Offering()
	m, priced := c.spotMarket(ctx, w, w.Every, o.PricePerHour)
	held := policy.Choice{Market: capacity.OnDemand, Zone: o.Key()}
	if priced {
		// On-demand held where the market has a place for it: refuel
		// then prices staying on it, and its region, as that place's.
		held.Zone = c.spotPlace(o)
	}
	s := c.policyState(workflow.Now(ctx), w, held)
	var choice policy.Choice
	var ok bool
	if askPlans(ctx) {
		d, err := decide(ctx, activities.DecisionInput{Kind: activities.DecideBackToSpot, State: s, Market: m}, "ask refuel whether to try spot now")
		if err != nil {
			workflow.GetLogger(ctx).Warn("refuel's plans did not answer; staying on on-demand until the next ask", "error", err)
			d.Explanation = "staying on on-demand: refuel's plans did not answer (" + err.Error() + ")"
		}
		choice, ok = d.Choice, err == nil && d.Try
		c.explain(ctx, d.Explanation)
	} else {
		choice, ok = policy.BackToSpot(s, m)
	}
	if !ok {
		return capacity.Offering{}, false
	}
	for _, o := range c.spotOfferings() {
		if o.Key() == choice.Zone {
			return o, true
		}
	}
	return capacity.Offering{}, false
}

// remainingWork is the work left: the spec's estimate times the share of
// steps left when the trainer reports its total, else the estimate less
// the instance time paid so far that was not lost. That fallback counts
// starts and a changeover's overlap as work done, so it errs towards less
// work left; a trainer that reports its total steps (REFUEL_PROGRESS
// total=N) is judged by its steps instead.
func (c runClock) remainingWork(now time.Time) time.Duration {
	r := c.r
	work := r.spec.Work.D()
	if t := r.TotalSteps; t > 0 {
		return time.Duration(float64(work) * float64(max(0, t-r.Step)) / float64(t))
	}
	done := time.Duration((r.Ledger.Hours(now)*3600 - r.LostWorkSecs) * float64(time.Second))
	return max(0, work-done)
}

// trySpot launches spot, first the offering refuel chose, then the run's
// other spot offerings; nil if none has stock (the failures are in
// status, and the cloud's unavailable cache remembers them). What it
// gets is the run's standby until the changeover.
func (c runClock) trySpot(ctx workflow.Context, first capacity.Offering) *workload.Lease {
	r := c.r
	a := r.AskFor(capacity.First(c.spotOfferings(), first))
	spot, err := r.Leases.Acquire(ctx, r.Owner(), a.LeaseAsk)
	if err != nil {
		if ctx.Err() == nil {
			r.RecordFailures(ctx, err)
		}
		return nil
	}
	if !c.spotPeers(ctx, *a, spot) {
		return nil
	}
	r.Standby = spot
	return spot
}

// spotPeers acquires a gang's ranks after rank 0 beside spot, its new
// rank 0, into r.StandbyPeers: the whole gang changes over or none of
// it, so a rank that cannot be had gives back spot and the others.
func (c runClock) spotPeers(ctx workflow.Context, a workload.Ask, spot *workload.Lease) bool {
	r := c.r
	for rank := 1; rank < r.Nodes(); rank++ {
		lease, err := r.Leases.Acquire(ctx, r.Owner(), r.PeerAsk(a, rank, spot.Offering()))
		if err != nil {
			if ctx.Err() == nil {
				r.RecordFailures(ctx, err)
			}
			r.Leases.Release(ctx, spot, activities.ReleaseCleanup)
			r.ReleaseStandbyPeers(ctx)
			return false
		}
		r.StandbyPeers = append(r.StandbyPeers, lease)
	}
	return true
}
