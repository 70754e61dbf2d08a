package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/cost"
	"refuel/pkg/policy"
	"refuel/pkg/spec"
)

// On a cloud without a market clock, a deadline run decides with refuel
// at two moments: when a try finds no spot, whether to wait for it or take
// on-demand (waitForSpotVersion); and while on on-demand, whether to go
// back to spot (backToSpotVersion).
const (
	waitForSpotVersion = "wait-for-spot"
	backToSpotVersion  = "back-to-spot"
	// stockHistoryVersion marks runs that plan both with what all runs
	// saw of the spot offerings' stock (activities.StockLogs).
	stockHistoryVersion = "stock-history"
)

// spotWatch is how a deadline run weighs spot against on-demand: the
// worker's RunOptions when the run first needed them, kept in the run's
// history so that a replay, or a worker configured otherwise, decides
// the same.
type spotWatch struct {
	Every, AtMost, RestartOverhead time.Duration
	// Wait is RunOptions.WaitForSpot; Step the longest a waiting run goes
	// between tries (RunOptions.MaxCapacityBackoff).
	Wait bool          `json:",omitempty"`
	Step time.Duration `json:",omitempty"`
}

// decidesMarket reports whether the run chooses between spot and
// on-demand itself: a deadline run that follows no market clock (which
// decides at every tick instead), holds no grant of the capacity pool
// (the pool decides where its runs go), and may use both.
func (r *run) decidesMarket() bool {
	return r.spec.Tier == spec.TierDeadline && r.spec.Deadline != nil && r.market == nil && r.grant == nil &&
		len(r.spotOfferings()) > 0 && len(capacity.OnlyMarket(r.offerings, capacity.OnDemand)) > 0
}

// watch returns the run's spotWatch, taking it from the options the first
// time.
func (r *run) watch(ctx workflow.Context) *spotWatch {
	if r.spotWatch == nil {
		var w spotWatch
		o := r.opts
		err := workflow.SideEffect(ctx, func(workflow.Context) any {
			return spotWatch{Every: o.SpotRetryInterval, AtMost: o.MaxSpotRetryInterval, RestartOverhead: o.RestartOverhead,
				Wait: o.WaitForSpot, Step: o.MaxCapacityBackoff}
		}).Get(&w)
		if err != nil {
			return nil
		}
		r.spotWatch = &w
	}
	return r.spotWatch
}

// waitsForSpot reports whether the run, about to acquire, should try spot
// alone and wait while none is in stock: refuel's answer for the run's
// slack and work left, asked again before every try. Waiting costs no
// money (on-demand later costs what it costs now), only slack, which
// later preemptions need; so refuel waits while the slack allows it and
// takes on-demand when it does not.
func (r *run) waitsForSpot(ctx workflow.Context) bool {
	if !r.decidesMarket() || r.spotImpossible || workflow.GetVersion(ctx, waitForSpotVersion, workflow.DefaultVersion, 1) < 1 {
		return false
	}
	w := r.watch(ctx)
	if w == nil || !w.Wait {
		return false
	}
	od := capacity.OnlyMarket(capacity.Order(r.offerings, r.spec.Tier, ""), capacity.OnDemand)
	m := r.spotMarket(ctx, max(w.Step, time.Second), od[0].PricePerHour)
	return policy.WaitForSpot(r.policyState(workflow.Now(ctx), w, policy.None), m)
}

// spotMarket is the run's spot offerings as refuel plans with them, each
// a place of its own with what all runs saw of its stock, deciding every
// step.
func (r *run) spotMarket(ctx workflow.Context, step time.Duration, onDemandPrice float64) policy.Market {
	spots := r.spotOfferings()
	m := policy.Market{Step: step, OnDemandPrice: onDemandPrice}
	history := r.stockHistory(ctx, spots)
	for i, o := range spots {
		z := policy.Zone{Name: o.Key(), SpotPrice: o.PricePerHour}
		if history != nil {
			z.History = history[i]
		}
		m.Zones = append(m.Zones, z)
	}
	return m
}

// stockHistory is what all runs saw of the offerings' stock, from the
// control plane's stock logs; nil when the logs cannot be read (the plan
// then goes by refuel's priors).
func (r *run) stockHistory(ctx workflow.Context, offerings []capacity.Offering) []policy.Availability {
	if workflow.GetVersion(ctx, stockHistoryVersion, workflow.DefaultVersion, 1) < 1 {
		return nil
	}
	keys := make([]string, len(offerings))
	for i, o := range offerings {
		keys[i] = o.Key()
	}
	var h []policy.Availability
	err := workflow.ExecuteActivity(controlOptions(ctx), activities.StockHistoryName, keys).Get(ctx, &h)
	if err != nil || len(h) != len(keys) {
		workflow.GetLogger(ctx).Warn("stock logs unavailable; planning with refuel's priors", "error", err)
		return nil
	}
	return h
}

// policyState is the run as refuel sees it at now, holding c.
func (r *run) policyState(now time.Time, w *spotWatch, c policy.Choice) policy.State {
	remaining := r.remainingWork(now)
	return policy.State{
		Elapsed: now.Sub(r.status.StartedAt), TimeLeft: r.spec.Deadline.Sub(now),
		Done: r.spec.Work.D() - remaining, Remaining: remaining,
		RestartOverhead: w.RestartOverhead, Current: c,
	}
}

// watchesForSpot reports whether the run, training now on on-demand,
// should look for a way back to spot meanwhile.
func (r *run) watchesForSpot(ctx workflow.Context) bool {
	if !r.decidesMarket() || r.instance == nil || r.instance.Offering.Market != capacity.OnDemand {
		return false
	}
	if workflow.GetVersion(ctx, backToSpotVersion, workflow.DefaultVersion, 1) < 1 {
		return false
	}
	w := r.watch(ctx)
	return w != nil && w.Every > 0
}

// spotOfferings are the spot offerings the run may use, in order.
func (r *run) spotOfferings() []capacity.Offering {
	return capacity.OnlyMarket(capacity.Order(r.offerings, r.spec.Tier, ""), capacity.Spot)
}

// awaitSpot waits while the run trains on on-demand, asking refuel every
// so often whether to try spot again; when it says so, it launches spot
// while the on-demand instance keeps training, so a try that finds no
// stock costs nothing. It returns the spot instance it got, and when, or
// nil once the attempt ends (by itself, or stopped for a pause or a
// cancel). Tries that find no stock back off up to MaxSpotRetryInterval.
func (r *run) awaitSpot(ctx workflow.Context) (*capacity.Instance, time.Time) {
	wait := r.spotWatch.Every
	for {
		tctx, cancelTimer := workflow.WithCancel(ctx)
		timer := workflow.NewTimer(tctx, wait)
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(r.training, func(workflow.Future) {})
		sel.AddFuture(timer, func(workflow.Future) {})
		sel.Select(ctx)
		if r.training.IsReady() || ctx.Err() != nil {
			cancelTimer()
			return nil, time.Time{}
		}
		if r.paused || r.yield != nil {
			continue // the trainer is stopping; the attempt ends soon
		}
		first, ok := r.spotToTry(ctx)
		if !ok {
			wait = r.spotWatch.Every
			continue
		}
		if inst := r.trySpot(ctx, first); inst != nil {
			return inst, workflow.Now(ctx)
		}
		wait = min(2*wait, max(r.spotWatch.AtMost, r.spotWatch.Every))
	}
}

// spotToTry asks refuel whether to try spot now, for the run as it stands
// (its slack, the work left) on its spot offerings (see spotMarket); it
// returns the offering to try first.
func (r *run) spotToTry(ctx workflow.Context) (capacity.Offering, bool) {
	m := r.spotMarket(ctx, r.spotWatch.Every, r.instance.Offering.PricePerHour)
	s := r.policyState(workflow.Now(ctx), r.spotWatch, policy.Choice{Market: capacity.OnDemand, Zone: r.instance.Offering.Key()})
	c, ok := policy.BackToSpot(s, m)
	if !ok {
		return capacity.Offering{}, false
	}
	for _, o := range r.spotOfferings() {
		if o.Key() == c.Zone {
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
func (r *run) remainingWork(now time.Time) time.Duration {
	work := r.spec.Work.D()
	if t := r.status.TotalSteps; t > 0 {
		return time.Duration(float64(work) * float64(max(0, t-r.status.Step)) / float64(t))
	}
	done := time.Duration((r.ledger.Hours(now)*3600 - r.status.LostWorkSecs) * float64(time.Second))
	return max(0, work-done)
}

// trySpot launches spot, first the offering refuel chose, then the run's
// other spot offerings; nil if none has stock (the failures are in
// status, and the cloud's unavailable cache remembers them).
func (r *run) trySpot(ctx workflow.Context, first capacity.Offering) *capacity.Instance {
	order := []capacity.Offering{first}
	for _, o := range r.spotOfferings() {
		if o != first {
			order = append(order, o)
		}
	}
	r.attempt++
	r.status.Attempt = r.attempt
	req := capacity.Request{
		RunID: workflow.GetInfo(ctx).WorkflowExecution.ID, Attempt: r.attempt, Offerings: order,
		Tags: r.grantTags(), MaxPricePerHour: r.spec.Resources.MaxPricePerHour,
	}
	var inst capacity.Instance
	if err := workflow.ExecuteActivity(acquireOptions(ctx), activities.AcquireName, req).Get(ctx, &inst); err != nil {
		if ctx.Err() == nil {
			r.recordAcquireFailure(ctx, err)
		}
		return nil
	}
	return &inst
}

// changeOver moves the run from its on-demand instance to the spot one it
// just got: the trainer stops at a checkpoint, the on-demand instance is
// released (reason changeover) and the spot one becomes the run's, paid
// for since it was launched. If the attempt ended otherwise meanwhile
// (completed, failed, or stopped for a pause or cancel), the spot
// instance is given back unused and that ending is returned to settle;
// moved is false then.
func (r *run) changeOver(ctx workflow.Context, spot capacity.Instance, since time.Time) (res activities.TrainingResult, moved bool, err error) {
	res, err = r.stopAttempt(ctx)
	var canceled *temporal.CanceledError
	stopped := (err == nil && res.Outcome == activities.OutcomeStopped) || errors.As(err, &canceled)
	if !stopped || r.paused || r.yield != nil || ctx.Err() != nil {
		r.giveBackUnused(ctx, spot, since)
		return res, false, err
	}
	r.observeResult(ctx, res)
	r.release(ctx, activities.ReleaseChangeover)
	r.onAcquiredAt(ctx, spot, since)
	r.status.Changeovers++
	return res, true, nil
}

// giveBackUnused releases an instance the run got but never trained on,
// and books the time it was held.
func (r *run) giveBackUnused(ctx workflow.Context, inst capacity.Instance, since time.Time) {
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	o := inst.Offering
	r.ledger.Open(cost.Segment{
		InstanceID: inst.ID, Pool: o.Provider, Market: string(o.Market), Offering: o.Key(),
		PricePerHour: o.PricePerHour, Start: since,
	})
	in := activities.ReleaseInput{Instance: inst, Reason: activities.ReleaseCleanup}
	if err := workflow.ExecuteActivity(releaseOptions(dctx), activities.ReleaseName, in).Get(dctx, nil); err != nil {
		workflow.GetLogger(ctx).Error("release failed; the janitor will reclaim the instance", "instance", inst.ID, "error", err)
	}
	r.ledger.Close(inst.ID, workflow.Now(ctx))
}
