package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/capacity"
	"refuel/pkg/cost"
	"refuel/pkg/policy"
	"refuel/pkg/spec"
)

// TrainingRun is the durable life of one training job: acquire an
// instance, train on it, survive preemptions by resuming on a replacement
// from the latest checkpoint, and give back everything it acquired however
// the run ends. Its input is one JobSpec; its result is the final Status.
//
// carry is nil on a first start: a client that passes only the spec, from
// any SDK, leaves it out. A run that has waited long for capacity
// continues as new, handing its state on in it (see continueAsNew).
func TrainingRun(ctx workflow.Context, js spec.JobSpec, carry *RunCarry) (Status, error) {
	r, err := newRun(ctx, js, carry)
	if err != nil {
		return Status{}, err
	}
	defer r.releaseOnExit(ctx)

	if carry == nil {
		if err := r.listOfferings(ctx); err != nil {
			return r.end(ctx, err)
		}
		m, err := r.openMarket(ctx)
		if err != nil {
			return r.end(ctx, err)
		}
		if m != nil {
			return r.end(ctx, r.followMarket(ctx, m))
		}
		r.joinPool(ctx)
	}
	for !r.done {
		if err := r.waitWhilePaused(ctx); err != nil {
			return r.end(ctx, err)
		}
		if r.yield != nil {
			r.yieldCapacity(ctx)
		}
		if err := r.admit(ctx); err != nil {
			return r.end(ctx, err)
		}
		if r.paused || r.yield != nil {
			continue
		}
		if err := r.acquire(ctx); err != nil {
			return r.end(ctx, err)
		}
		if r.instance == nil {
			continue // paused or asked to yield while waiting for capacity
		}
		res, err := r.train(ctx)
		if err := r.settle(ctx, res, err); err != nil {
			return r.end(ctx, err)
		}
	}
	return r.end(ctx, nil)
}

// run is the state of one TrainingRun; its methods are the steps.
type run struct {
	id       string // the workflow id: the job's id when started through the contract
	spec     spec.JobSpec
	status   Status
	ledger   cost.Ledger
	opts     RunOptions
	instance *capacity.Instance

	offerings []capacity.Offering
	avoidZone string // the zone that just preempted us: tried last
	attempt   int
	paused    bool
	done      bool

	// With a capacity pool: whether the pool took the run's request, what
	// it granted, whether it holds the request paused, and a yield it
	// asked for that is not done yet.
	inPool, requested, heldInQueue bool
	grant                          *admission.Allocation
	yield                          *YieldRequest

	signals []signalHandler // the signals the run takes, drained before it continues as new
	waits   int             // waits for capacity in this run of the workflow

	market    *clockedMarket // set when the run follows a market's own clock
	spotWatch *spotWatch     // how it weighs spot against on-demand, once it first did
	// spotImpossible is set when spot failed in a way no wait cures
	// (quota, price, spec mismatch): the run stops waiting for it.
	spotImpossible bool
	training       workflow.Future // the training attempt under way, if any

	// attemptLog is what the current instance teaches about its pool,
	// handed to the pool's checkpoint log when the instance is released.
	attemptLog policy.CheckpointLog

	recovering      bool      // a preemption happened and no replacement has resumed yet
	trainingSince   time.Time // when the current attempt's training started
	trainingAttempt int       // the attempt the trainer runs under; 0 when none runs
	trainerFailures int
	stopTraining    workflow.CancelFunc
}

// RunOptions are the knobs of a run that are not part of the JobSpec.
// Defaults suit real jobs; tests shorten them.
type RunOptions struct {
	CapacityBackoff    time.Duration // first wait after no capacity anywhere
	MaxCapacityBackoff time.Duration
	HeartbeatTimeout   time.Duration // how long an instance may be silent before it counts as lost
	StopGrace          time.Duration // how long a pause or cancel waits for the final checkpoint
	MaxTrainerFailures int           // trainer crashes (non-zero exits) tolerated before the run fails
	// MaxWaits bounds a run's history while it waits for capacity: after
	// this many waits it continues as new (sooner if the server suggests).
	MaxWaits int
	// A deadline run on on-demand asks refuel whether to try spot again
	// every SpotRetryInterval, backing off to MaxSpotRetryInterval while
	// tries find no stock; RestartOverhead is what refuel counts a
	// changeover to cost (boot, setup, restoring the checkpoint). A run
	// keeps the values it first used (see spotWatch); 0 turns it off.
	SpotRetryInterval, MaxSpotRetryInterval time.Duration
	RestartOverhead                         time.Duration
	// WaitForSpot makes a deadline run that finds no spot wait for it
	// while refuel says the slack allows, rather than take on-demand at
	// once.
	WaitForSpot bool
}

// DefaultRunOptions are the options every TrainingRun uses.
var DefaultRunOptions = RunOptions{
	CapacityBackoff:    5 * time.Second,
	MaxCapacityBackoff: 2 * time.Minute,
	HeartbeatTimeout:   20 * time.Second,
	StopGrace:          2 * time.Minute,
	MaxTrainerFailures: 3,
	// A wait adds about eight events: a thousand stays far inside the
	// history limits.
	MaxWaits:             1000,
	SpotRetryInterval:    10 * time.Minute,
	MaxSpotRetryInterval: time.Hour,
	RestartOverhead:      12 * time.Minute,
	WaitForSpot:          true,
}

func newRun(ctx workflow.Context, js spec.JobSpec, carry *RunCarry) (*run, error) {
	r := &run{id: workflow.GetInfo(ctx).WorkflowExecution.ID, opts: DefaultRunOptions}
	if carry != nil {
		// The spec was validated when the run first started; its deadline
		// may have passed since, which is the run's to handle, not an
		// invalid spec.
		r.spec = js
		r.restore(*carry)
		return r, r.registerHandlers(ctx)
	}
	js.Normalize()
	// Validation formats its messages with fmt, which workflowcheck cannot
	// prove deterministic; it only formats the spec's own values.
	//workflowcheck:ignore
	if err := js.Validate(workflow.Now(ctx)); err != nil {
		return nil, invalidSpecError(err)
	}
	r.spec = js
	r.status = Status{
		ID: js.ID, Team: js.Team, Tier: string(js.Tier), State: StatePending,
		Priority: js.Priority, StartedAt: workflow.Now(ctx), Failures: []Failure{},
	}
	if err := r.registerHandlers(ctx); err != nil {
		return nil, err
	}
	err := workflow.UpsertTypedSearchAttributes(ctx,
		AttrTeam.ValueSet(js.Team), AttrTier.ValueSet(string(js.Tier)),
		AttrPriority.ValueSet(int64(js.Priority)), AttrState.ValueSet(string(StatePending)))
	return r, err
}

// waitWhilePaused blocks, holding no instance, until the run is resumed.
func (r *run) waitWhilePaused(ctx workflow.Context) error {
	if !r.paused {
		return nil
	}
	r.leavePool(ctx) // a paused run holds no capacity; it asks again on resume
	r.setState(ctx, StatePaused)
	return workflow.Await(ctx, func() bool { return !r.paused })
}

// acquire gets an instance, trying the offerings the tier allows in order
// and waiting with backoff while none has capacity. It returns with no
// instance if the run was paused meanwhile.
func (r *run) acquire(ctx workflow.Context) error {
	backoff := r.opts.CapacityBackoff
	for !r.paused && r.yield == nil {
		order := capacity.Order(r.offerings, r.spec.Tier, r.avoidZone)
		spotOnly := false
		switch {
		case r.grant != nil:
			order = r.grantedOfferings()
		case r.waitsForSpot(ctx):
			order, spotOnly = capacity.OnlyMarket(order, capacity.Spot), true
		}
		if len(order) == 0 {
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("no offering matching resources suits tier %s (it allows spot: %v, on-demand: %v)",
					r.spec.Tier, r.spec.Tier.AllowsSpot(), r.spec.Tier.AllowsOnDemand()),
				string(capacity.SpecMismatch), nil)
		}
		r.attempt++
		r.status.Attempt = r.attempt
		r.setState(ctx, StateAcquiring)
		req := capacity.Request{
			RunID: workflow.GetInfo(ctx).WorkflowExecution.ID, Attempt: r.attempt, Offerings: order,
			Tags:            r.grantTags(),
			MaxPricePerHour: r.spec.Resources.MaxPricePerHour,
		}
		var inst capacity.Instance
		err := workflow.ExecuteActivity(acquireOptions(ctx), activities.AcquireName, req).Get(ctx, &inst)
		if err == nil {
			r.onAcquired(ctx, inst)
			r.bindGrant(ctx, inst.Offering)
			return nil
		}
		if ctx.Err() != nil {
			return temporal.NewCanceledError()
		}
		details := r.recordAcquireFailure(ctx, err)
		if spotOnly && !capacity.CuredWithin(capacity.Minutes, classes(details)...) {
			r.spotImpossible = true // no use waiting for it (quota, price, spec): on to on-demand
			continue
		}
		if permanent(details) {
			return temporal.NewNonRetryableApplicationError(
				"no offering can ever be acquired: "+describeFailures(details), string(details[0].Class), nil, details)
		}
		r.waits++
		if r.waits >= r.opts.MaxWaits || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			return r.continueAsNew(ctx)
		}
		r.setState(ctx, StateWaiting)
		// Operators filter on why a run waits: RefuelState names the class.
		_ = workflow.UpsertTypedSearchAttributes(ctx, AttrState.ValueSet(string(StateWaiting)+":"+string(retryableClass(details))))
		if _, err := workflow.AwaitWithTimeout(ctx, backoff, func() bool { return r.paused || r.yield != nil }); err != nil {
			return err
		}
		backoff = min(2*backoff, r.opts.MaxCapacityBackoff)
	}
	return nil
}

func (r *run) listOfferings(ctx workflow.Context) error {
	var offerings []capacity.Offering
	in := activities.OfferingsInput{Resources: r.spec.Resources}
	if err := workflow.ExecuteActivity(controlOptions(ctx), activities.ListOfferingsName, in).Get(ctx, &offerings); err != nil {
		return err
	}
	if len(offerings) == 0 {
		return temporal.NewNonRetryableApplicationError(
			"no provider offers what resources asks for: check resources.gpus, instance_types, zones, providers and max_price_per_hour",
			string(capacity.SpecMismatch), nil)
	}
	r.offerings = offerings
	return nil
}

func (r *run) onAcquired(ctx workflow.Context, inst capacity.Instance) {
	r.onAcquiredAt(ctx, inst, workflow.Now(ctx))
}

// onAcquiredAt makes inst the run's instance, paid for since now.
func (r *run) onAcquiredAt(ctx workflow.Context, inst capacity.Instance, now time.Time) {
	r.instance = &inst
	r.attemptLog = policy.CheckpointLog{}
	o := inst.Offering
	r.ledger.Open(cost.Segment{
		InstanceID: inst.ID, Pool: o.Provider, Market: string(o.Market), Offering: o.Key(),
		PricePerHour: o.PricePerHour, Start: now,
	})
	r.status.Instance = &InstanceRef{ID: inst.ID, Offering: o.Key(), Market: string(o.Market), Zone: o.Zone, PricePerHour: o.PricePerHour, Since: now}
	if r.recovering {
		r.status.LastRecovery = &RecoveryInfo{ReplacementAt: now, InstanceID: inst.ID}
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, AttrMarket.ValueSet(string(o.Market)))
}

// train runs the job on the instance until it completes, is preempted,
// is stopped for a pause, or the instance goes silent. A deadline run on
// on-demand meanwhile goes back to spot when refuel says the slack
// allows it (see awaitSpot), and trains on there.
func (r *run) train(ctx workflow.Context) (activities.TrainingResult, error) {
	r.startTraining(ctx)
	for r.watchesForSpot(ctx) {
		spot, since := r.awaitSpot(ctx)
		if spot == nil {
			break
		}
		res, moved, err := r.changeOver(ctx, *spot, since)
		if !moved {
			return res, err
		}
		r.startTraining(ctx)
	}
	return r.attemptResult(ctx)
}

// startTraining starts the training attempt on the held instance; a run
// on a clocked market watches the market while it runs.
func (r *run) startTraining(ctx workflow.Context) {
	r.setState(ctx, StateRunning)
	r.trainingSince = workflow.Now(ctx)
	r.trainingAttempt = r.attempt
	in := activities.TrainingInput{
		Spec: r.spec, Attempt: r.attempt, InstanceID: r.instance.ID, CheckpointURL: r.spec.Checkpoint.URL,
		CheckpointInterval: r.checkpointInterval(ctx), StopGrace: r.opts.StopGrace,
	}
	actx, cancel := workflow.WithCancel(trainingOptions(ctx, r.instance.TaskQueue, r.spec.Work.D(), r.opts))
	r.stopTraining = cancel
	r.training = workflow.ExecuteActivity(actx, activities.RunTrainingName, in)
}

// attemptResult waits for the training attempt to end.
func (r *run) attemptResult(ctx workflow.Context) (activities.TrainingResult, error) {
	var res activities.TrainingResult
	err := r.training.Get(ctx, &res)
	r.training, r.stopTraining, r.trainingAttempt = nil, nil, 0
	return res, err
}

// stopAttempt asks the trainer to stop at a checkpoint and waits for the
// attempt to end.
func (r *run) stopAttempt(ctx workflow.Context) (activities.TrainingResult, error) {
	r.stopTraining()
	return r.attemptResult(ctx)
}

// settle acts on how an attempt ended.
func (r *run) settle(ctx workflow.Context, res activities.TrainingResult, err error) error {
	if ctx.Err() != nil {
		return temporal.NewCanceledError()
	}
	r.observeResult(ctx, res)
	var canceled *temporal.CanceledError
	switch {
	case err == nil && res.Outcome == activities.OutcomeCompleted:
		r.done = true
		r.status.ModelDigest = res.ModelDigest
		r.release(ctx, activities.ReleaseCompleted)
	case err == nil && res.Outcome == activities.OutcomePreempted:
		r.onPreempted(ctx, res.LastStep, true)
	case err == nil && res.Outcome == activities.OutcomeFailed:
		r.trainerFailures++
		r.addFailure(ctx, "trainer", r.instance.Offering.Key(), res.Message)
		r.release(ctx, activities.ReleaseFailed)
		if r.trainerFailures >= r.opts.MaxTrainerFailures {
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("trainer failed %d times; last: %s", r.trainerFailures, res.Message), "TrainerFailed", nil)
		}
	case err == nil && res.Outcome == activities.OutcomeStopped, errors.As(err, &canceled):
		reason := activities.ReleasePaused
		if r.yield != nil {
			reason = activities.ReleaseYielded
		}
		r.release(ctx, reason)
	default:
		// The instance went silent or its agent never picked the work up:
		// it was taken without notice, or died. Either way it is lost.
		r.addFailure(ctx, "instance-lost", r.instance.Offering.Key(), err.Error())
		r.onPreempted(ctx, r.status.Step, false)
	}
	return nil
}

// observeResult folds an attempt's final report into status.
func (r *run) observeResult(ctx workflow.Context, res activities.TrainingResult) {
	if r.recovering && r.status.LastRecovery != nil && res.Outcome != activities.OutcomeFailed {
		// The "restored" signal never came (or came late): the attempt's
		// own report shows it did resume.
		r.markRecovered(ctx, res.RestoredStep, r.trainingSince)
	}
	r.status.Step = max(r.status.Step, res.LastStep)
	if res.TotalSteps > 0 {
		r.status.TotalSteps = res.TotalSteps
	}
	if c := res.LastCheckpoint; c != nil && (r.status.LastCheckpoint == nil || c.Step >= r.status.LastCheckpoint.Step) {
		r.status.LastCheckpoint = c
	}
}

// onPreempted records a preemption and gives back what is left of the
// instance; the loop then acquires a replacement, avoiding this zone.
func (r *run) onPreempted(ctx workflow.Context, atStep int64, withNotice bool) {
	now := workflow.Now(ctx)
	ckptStep := int64(0)
	if r.status.LastCheckpoint != nil {
		ckptStep = r.status.LastCheckpoint.Step
	}
	lost := r.lostWorkSeconds(now, atStep, ckptStep, withNotice)
	r.ledger.AddLostWork(lost)
	r.status.Preemptions++
	r.status.LostWorkSecs += lost
	r.status.LastPreemption = &PreemptionInfo{
		Time: now, InstanceID: r.instance.ID, Zone: r.instance.Offering.Zone,
		AtStep: atStep, CheckpointStep: ckptStep, WithNotice: withNotice,
	}
	r.avoidZone = r.instance.Offering.Zone
	r.recovering = true
	m := workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"market": string(r.instance.Offering.Market), "zone": r.instance.Offering.Zone})
	m.Counter("refuel_preemptions_total").Inc(1)
	m.Counter("refuel_lost_work_seconds_total").Inc(int64(lost))
	r.setState(ctx, StatePreempted)
	r.release(ctx, activities.ReleasePreempted)
}

// lostWorkSeconds estimates the compute that must be redone: the steps
// past the last checkpoint, at the pace this attempt trained.
func (r *run) lostWorkSeconds(now time.Time, atStep, ckptStep int64, withNotice bool) float64 {
	if atStep <= ckptStep {
		return 0
	}
	trained := now.Sub(r.trainingSince).Seconds()
	if !withNotice && r.status.LastCheckpoint != nil && r.status.LastCheckpoint.Time.After(r.trainingSince) {
		// Silent loss: everything since the last checkpoint is gone.
		return now.Sub(r.status.LastCheckpoint.Time).Seconds()
	}
	progressed := atStep - r.resumedFrom()
	if progressed <= 0 || trained <= 0 {
		return 0
	}
	return float64(atStep-ckptStep) * trained / float64(progressed)
}

func (r *run) resumedFrom() int64 {
	if r.status.LastRecovery != nil && r.status.LastRecovery.InstanceID == r.instance.ID {
		return r.status.LastRecovery.ResumedFromStep
	}
	return 0
}

// release gives the current instance back and closes its cost segment.
// It uses a disconnected context so it runs even while the run is being
// cancelled.
func (r *run) release(ctx workflow.Context, reason activities.ReleaseReason) {
	if r.instance == nil {
		return
	}
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	r.attemptLog.Ran(workflow.Now(ctx).Sub(r.status.Instance.Since))
	if reason == activities.ReleasePreempted {
		r.attemptLog.Preempted()
	}
	log := r.attemptLog
	in := activities.ReleaseInput{Instance: *r.instance, Reason: reason, Log: &log}
	if err := workflow.ExecuteActivity(releaseOptions(dctx), activities.ReleaseName, in).Get(dctx, nil); err != nil {
		workflow.GetLogger(ctx).Error("release failed; the janitor will reclaim the instance", "instance", r.instance.ID, "error", err)
	}
	now := workflow.Now(ctx)
	r.ledger.Close(r.instance.ID, now)
	r.instance = nil
	r.status.Instance = nil
	r.status.CostUSD = r.ledger.CostUSD(now)
	_ = workflow.UpsertTypedSearchAttributes(ctx, AttrCostUSD.ValueSet(r.status.CostUSD), AttrMarket.ValueUnset())
}

// releaseOnExit runs however the workflow ends: nothing acquired is kept.
func (r *run) releaseOnExit(ctx workflow.Context) {
	r.release(ctx, activities.ReleaseCleanup)
}

// end records the final state and returns the run's result.
func (r *run) end(ctx workflow.Context, err error) (Status, error) {
	var next *workflow.ContinueAsNewError
	if errors.As(err, &next) {
		return r.snapshot(ctx), err // nothing is held: the next run goes on
	}
	if r.training != nil {
		r.stopTraining() // the release below takes the instance anyway
	}
	ctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	defer r.leavePool(ctx)
	var canceled *temporal.CanceledError
	switch {
	case err == nil:
		r.setState(ctx, StateCompleted)
	case errors.As(err, &canceled):
		r.release(ctx, activities.ReleaseCleanup)
		r.setState(ctx, StateCancelled)
		return r.snapshot(ctx), temporal.NewCanceledError()
	default:
		r.release(ctx, activities.ReleaseFailed)
		r.status.State = StateFailed
		state := string(StateFailed)
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.Type() != "" {
			state = stateFailedClass + app.Type()
		}
		_ = workflow.UpsertTypedSearchAttributes(ctx, AttrState.ValueSet(state))
		return r.snapshot(ctx), err
	}
	return r.snapshot(ctx), nil
}

// snapshot is the status with cost brought up to now.
func (r *run) snapshot(ctx workflow.Context) Status {
	s := r.status
	s.Paused = r.paused
	now := workflow.Now(ctx)
	s.CostUSD = r.ledger.CostUSD(now)
	s.Cost = r.ledger.Breakdown(now)
	s.Ledger = r.ledger
	s.Failures = append([]Failure{}, r.status.Failures...) // [] rather than null for clients
	if r.market != nil {
		s.Market = r.market.marketStatus()
	}
	s.Admission = r.admissionStatus()
	return s
}

func (r *run) setState(ctx workflow.Context, s State) {
	if r.status.State == s {
		return
	}
	r.status.State = s
	_ = workflow.UpsertTypedSearchAttributes(ctx, AttrState.ValueSet(string(s)))
}

func (r *run) addFailure(ctx workflow.Context, class, offering, msg string) {
	r.status.Failures = append(r.status.Failures, Failure{Class: class, Offering: offering, Message: msg, Time: workflow.Now(ctx)})
	if n := len(r.status.Failures); n > maxFailures {
		r.status.Failures = r.status.Failures[n-maxFailures:]
	}
}

// checkpointInterval is how often the trainer on the current instance
// should checkpoint: the spec's interval, or for "auto" the Young/Daly
// optimum from what every run so far measured on the instance's pool
// (write times, time held, preemptions), within the spec's bounds.
func (r *run) checkpointInterval(ctx workflow.Context) time.Duration {
	if d, ok := r.spec.Checkpoint.FixedInterval(); ok {
		return d
	}
	c := r.spec.Checkpoint
	var log policy.CheckpointLog
	if workflow.GetVersion(ctx, autoCheckpointVersion, workflow.DefaultVersion, 1) >= 1 {
		err := workflow.ExecuteActivity(controlOptions(ctx), activities.PoolCheckpointLogName, r.instance.Offering).Get(ctx, &log)
		if err != nil {
			workflow.GetLogger(ctx).Warn("pool's checkpoint log unavailable; checkpointing at the lower bound", "error", err)
		}
	}
	d := log.Interval(autoCheckpointPrior, c.MinInterval.D(), c.MaxInterval.D())
	r.status.CheckpointIntervalSecs = d.Seconds()
	return d
}

func invalidSpecError(err error) error {
	var ve *spec.ValidationError
	if errors.As(err, &ve) {
		return temporal.NewNonRetryableApplicationError(ve.Error(), "InvalidJobSpec", nil, ve.Fields)
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), "InvalidJobSpec", nil)
}
