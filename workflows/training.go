package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

// TrainingRun is the durable life of one training job: admit it, acquire
// an instance, train on it, and when the instance is preempted acquire a
// replacement and resume from the latest checkpoint, until the work is
// done; everything acquired is given back however the run ends. Its
// input is one JobSpec; its result is the final Status.
//
// carried is nil on a first start: a client that passes only the spec,
// from any SDK, leaves it out. A run that has waited long for capacity
// continues as new, handing its whole state on in it.
func (w *Workflows) TrainingRun(ctx workflow.Context, input json.RawMessage, carried *RunState) (Status, error) {
	r, err := w.startRun(ctx, input, carried)
	if err != nil {
		return Status{}, err
	}
	defer r.releaseAll(ctx)

	if carried == nil {
		if err := r.open(ctx); err != nil {
			return r.end(ctx, err)
		}
	}
	if r.Training != nil {
		// The previous run handed on an attempt under way: attach to it.
		end, err := r.resumeTraining(ctx)
		if err != nil {
			return r.end(ctx, err)
		}
		if err := r.settle(ctx, end); err != nil {
			return r.end(ctx, err)
		}
	}
	for !r.finished {
		// A gang whose lost nodes were replaced holds its instances: it
		// trains on without being admitted or acquiring again.
		if r.Lease == nil {
			if err := r.admit(ctx); err != nil {
				return r.end(ctx, err)
			}
			// The first instance, or the replacement of one the market took.
			lease, err := r.acquire(ctx)
			if err != nil {
				return r.end(ctx, err)
			}
			if lease == nil {
				continue // paused, asked to yield, or the market's next decision is due
			}
		}
		// Resume from the latest checkpoint and train until the attempt
		// ends: completed, preempted, stopped, or the instance lost.
		end, err := r.train(ctx)
		if err != nil {
			return r.end(ctx, err)
		}
		if err := r.settle(ctx, end); err != nil {
			return r.end(ctx, err)
		}
	}
	return r.end(ctx, nil)
}

// run is one TrainingRun: its state, and what it keeps while it runs.
type run struct {
	RunState
	id string // the workflow id: the job's id
	// identity is the run's first run ID, the same across continue-as-new
	// and never reused by a later run with the same job id: idempotency
	// tokens derive from it.
	identity string
	spec     spec.JobSpec
	opts     RunOptions // the recorded options, or the worker's for older runs

	// market is how the run finds capacity, chosen when it first starts.
	market market
	// standby is an instance acquired to change over to, not yet in use.
	standby *Lease
	// growing are nodes an elastic gang short of nodes acquired, to train
	// with from its next checkpoint on.
	growing []*Lease
	// standbyPeers are a gang's ranks after rank 0 acquired beside
	// standby, to change over to with it.
	standbyPeers []*Lease
	// attempt is the training attempt under way on lease, if any; peers
	// are those of a gang's other ranks.
	attempt *attempt
	peers   []*attempt
	// finished is set when the work is done: the trainer completed, or
	// the market's account says so. The run then ends.
	finished bool
	signals  []signalHandler // drained before the run continues as new
	// handOn is set when the history grew long while an attempt trains:
	// the run continues as new, handing the attempt on.
	handOn bool
	waits  int // waits for capacity in this run of the workflow
	// unreleased is a lost instance whose release rides with the
	// acquisition of its replacement (releaseLater).
	unreleased *activities.ReleaseInput
	// batching is set when search attributes are written once per
	// workflow task, heldAttrs until then (batchAttributes).
	batching  bool
	heldAttrs []temporal.SearchAttributeUpdate
	// oneTrip is set once the run recovers the one-trip way
	// (recoversInOneTrip).
	oneTrip bool
	// taken are the instances their cloud said it took (instance-taken).
	taken map[string]bool
}

// startRun takes up a carried state, or validates the spec, records the
// options and publishes the search attributes of a new run.
func (w *Workflows) startRun(ctx workflow.Context, input json.RawMessage, carried *RunState) (*run, error) {
	info := workflow.GetInfo(ctx)
	r := &run{id: info.WorkflowExecution.ID, identity: info.FirstRunID, opts: w.Run}
	// Decoding formats its messages with fmt and walks the input by
	// reflection, which workflowcheck cannot prove deterministic; it reads
	// only the input.
	//workflowcheck:ignore
	js, err := spec.DecodeJobSpecJSON(input)
	if err != nil {
		return nil, invalidSpecError(err)
	}
	if carried != nil {
		// The spec was validated when the run first started; its deadline
		// may have passed since, which is the run's to handle, not an
		// invalid spec.
		r.spec, r.RunState = js, *carried
		if r.Options != nil {
			r.opts = r.Options.filled()
		}
		r.market = r.marketOfState()
		return r, r.registerHandlers(ctx)
	}
	js.Normalize()
	// Validation formats its messages with fmt, which workflowcheck cannot
	// prove deterministic; it only formats the spec's own values.
	//workflowcheck:ignore
	if err := js.Validate(workflow.Now(ctx)); err != nil {
		return nil, invalidSpecError(err)
	}
	if js.ID != r.id && workflow.GetVersion(ctx, specIDVersion, workflow.DefaultVersion, 1) >= 1 {
		return nil, invalidSpecError(spec.CheckWorkflowID("JobSpec", js.ID, r.id))
	}
	r.spec = js
	if o := recordOptions(ctx, w.Run); o != nil {
		r.Options, r.opts = o, o.filled()
	}
	r.RunRecord = RunRecord{
		ID: js.ID, Team: js.Team, Tier: string(js.Tier), State: StatePending,
		Priority: js.Priority, StartedAt: workflow.Now(ctx), Failures: []Failure{}, BudgetUSD: js.BudgetUSD,
		StoreURL: activities.StoreURL(js.Checkpoint.URL, r.opts.StoreURL),
	}
	if err := r.registerHandlers(ctx); err != nil {
		return nil, err
	}
	r.showDetails(ctx)
	err = workflow.UpsertTypedSearchAttributes(ctx,
		AttrTeam.ValueSet(js.Team), AttrTier.ValueSet(string(js.Tier)),
		AttrPriority.ValueSet(int64(js.Priority)), AttrState.ValueSet(string(StatePending)))
	return r, err
}

// open lists what the run may acquire and chooses how it finds capacity:
// following a market's own clock, through the capacity pool, or on its
// own in wall time.
func (r *run) open(ctx workflow.Context) error {
	if err := r.listOfferings(ctx); err != nil {
		return err
	}
	m, err := openClockedMarket(ctx, r)
	if err != nil {
		return err
	}
	switch {
	case m != nil:
		r.market = m
	case r.joinPool(ctx):
		r.market = poolGrant{}
	default:
		r.market = wallClock{}
	}
	return nil
}

// marketOfState is the market of a run taken up from a carried state: a
// run on a clocked market never continues as new.
func (r *run) marketOfState() market {
	if r.Pool != nil {
		return poolGrant{}
	}
	return wallClock{}
}

func (r *run) listOfferings(ctx workflow.Context) error {
	var offerings []capacity.Offering
	in := activities.OfferingsInput{Resources: r.spec.Resources, CheckpointURL: r.spec.Checkpoint.URL}
	actx := titled(controlOptions(ctx), "list what can be acquired for "+strconv.Itoa(r.spec.Resources.GPUs)+" GPU(s)")
	if err := workflow.ExecuteActivity(actx, activities.ListOfferingsName, in).Get(ctx, &offerings); err != nil {
		return err
	}
	if len(offerings) == 0 {
		return temporal.NewNonRetryableApplicationError(
			"no provider offers what resources asks for: check resources.gpus, instance_types, zones, providers and max_price_per_hour",
			string(capacity.SpecMismatch), nil)
	}
	r.Offerings = offerings
	return nil
}

// admit returns once the run may acquire: not paused, and granted
// capacity when it goes through the pool.
func (r *run) admit(ctx workflow.Context) error {
	if r.mustStop(ctx) != goOn {
		r.releaseNow(ctx) // it waits before it acquires
	}
	return r.market.admit(ctx, r)
}

// acquire gets the run an instance on what its market offers next,
// trying again as the market says while none can be had. It returns no
// lease when the run should go round again first (paused, asked to
// yield, or the market's next decision is due).
func (r *run) acquire(ctx workflow.Context) (*Lease, error) {
	backoff := r.opts.CapacityBackoff
	for {
		ask, err := r.market.next(ctx, r)
		if err != nil || ask == nil {
			return nil, err
		}
		if len(ask.offerings) == 0 {
			return nil, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("no offering matching resources suits tier %s (it allows spot: %v, on-demand: %v)",
					r.spec.Tier, r.spec.Tier.AllowsSpot(), r.spec.Tier.AllowsOnDemand()),
				string(capacity.SpecMismatch), nil)
		}
		r.enter(ctx, StateAcquiring)
		lease, err := r.acquireLease(ctx, ask.leaseAsk)
		var details []activities.FailureDetail
		if err == nil {
			r.UnclassifiedWaits = 0
			r.use(ctx, lease)
			r.market.acquired(ctx, r, lease)
			if details = r.acquirePeers(ctx, *ask); details == nil {
				return lease, nil
			}
		}
		if ctx.Err() != nil {
			return nil, temporal.NewCanceledError()
		}
		if details == nil {
			details = r.recordFailures(ctx, err)
		}
		again, err := r.market.failed(ctx, r, *ask, details, &backoff)
		if err != nil || !again {
			return nil, err
		}
	}
}

// use makes lease the run's instance: status shows it, operators filter
// on its market, and a recovery under way has its replacement.
func (r *run) use(ctx workflow.Context, lease *Lease) {
	lease.Teaches = true
	r.Lease = lease
	if r.Recovery != nil {
		r.LastRecovery = &RecoveryInfo{ReplacementAt: lease.Since, InstanceID: lease.Instance.ID}
	}
	r.upsertAttrs(ctx, AttrMarket.ValueSet(string(lease.Offering().Market)))
	r.showDetails(ctx)
}

// backOff waits before the next try after no offering could be had,
// doubling the wait each time; a run that has waited long continues as
// new instead, so its history stays short however long the wait.
func (r *run) backOff(ctx workflow.Context, details []activities.FailureDetail, backoff *time.Duration) (bool, error) {
	if unclassified(details) {
		if r.UnclassifiedWaits++; r.UnclassifiedWaits > r.opts.MaxUnknownWaits {
			return false, cannotAcquire(fmt.Sprintf("acquisitions failed %d times in a row for reasons the providers did not classify; "+
				"the worker's log has each failure", r.UnclassifiedWaits), details)
		}
	} else {
		r.UnclassifiedWaits = 0
	}
	r.waits++
	if r.waits >= r.opts.MaxWaits || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
		return false, r.continueAsNew(ctx)
	}
	r.enter(ctx, StateWaiting)
	// Operators filter on why a run waits: RefuelState names the class.
	r.upsertAttrs(ctx, AttrState.ValueSet(string(StateWaiting)+":"+string(waitingOn(details))))
	wait := jittered(*backoff, r.identity, r.Attempts)
	summary := "wait " + wait.Round(time.Second).String() + " for capacity (" + string(waitingOn(details)) + ")"
	until := workflow.Now(ctx).Add(wait)
	r.WaitingUntil, r.WaitingOn = &until, string(waitingOn(details))
	r.showDetails(ctx)
	// Holding nothing, it spends no budget while it waits.
	_, err := waitFor(ctx, wait, summary, func() bool { return r.mustStop(ctx, stopBudget) != goOn })
	r.WaitingUntil, r.WaitingOn = nil, ""
	if err != nil {
		return false, err
	}
	*backoff = min(2**backoff, r.opts.MaxCapacityBackoff)
	return true, nil
}

// release gives the run's instance back: it stops paying for it, status
// and the search attributes stop naming it.
func (r *run) release(ctx workflow.Context, reason activities.ReleaseReason) {
	if r.Lease == nil {
		return
	}
	r.releasePeers(ctx, reason)
	r.Leases.release(ctx, r.Lease, reason)
	r.Lease = nil
	r.upsertAttrs(ctx, AttrCostUSD.ValueSet(r.Ledger.CostUSD(workflow.Now(ctx))), AttrMarket.ValueUnset())
	r.showDetails(ctx)
}

// releaseAll runs however the workflow ends: nothing acquired is kept,
// but for an instance handed on, training, to the run that continues.
func (r *run) releaseAll(ctx workflow.Context) {
	r.releaseNow(ctx)
	if r.Training != nil {
		return
	}
	if r.standby != nil {
		r.Leases.release(ctx, r.standby, activities.ReleaseCleanup)
		r.standby = nil
	}
	r.releaseStandbyPeers(ctx)
	r.releaseGrowing(ctx)
	r.release(ctx, activities.ReleaseCleanup)
}

// end records the final state and returns the run's result.
func (r *run) end(ctx workflow.Context, err error) (Status, error) {
	r.stopBatching(ctx)
	var next *workflow.ContinueAsNewError
	if errors.As(err, &next) {
		r.releaseNow(ctx)
		return r.snapshot(ctx), err // nothing is held: the next run goes on
	}
	ctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	defer r.leavePool(ctx)
	var canceled *temporal.CanceledError
	cancelled := errors.As(err, &canceled)
	if r.attempt != nil {
		r.attempt.stop()
		if cancelled && workflow.GetVersion(ctx, cancelCheckpointVersion, workflow.DefaultVersion, 1) >= 1 {
			// The trainer saves a final checkpoint and the agent uploads
			// it before the instance goes: a cancelled run can be
			// started again from where it stopped.
			r.observeResult(ctx, r.attemptResult(ctx))
		}
	}
	switch {
	case err == nil:
		r.enter(ctx, StateCompleted)
	case cancelled:
		r.release(ctx, activities.ReleaseCleanup)
		r.enter(ctx, StateCancelled)
		// A cancelled workflow has no result: the final status travels
		// as the cancellation's details.
		st := r.snapshot(ctx)
		return st, temporal.NewCanceledError(st)
	default:
		r.release(ctx, activities.ReleaseFailed)
		r.State = StateFailed
		state := string(StateFailed)
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.Type() != "" {
			state = stateFailedClass + app.Type()
		}
		_ = workflow.UpsertTypedSearchAttributes(ctx, AttrState.ValueSet(state))
		r.showDetails(ctx)
		return r.snapshot(ctx), err
	}
	return r.snapshot(ctx), nil
}

// enter moves the run to phase s (see transitions) and publishes it as
// RefuelState. A move the transitions do not allow is a bug in this
// package: it fails the workflow task, so the run waits, losing nothing,
// for a worker with the fix.
func (r *run) enter(ctx workflow.Context, s State) {
	if r.State == s {
		return
	}
	if err := checkTransition(r.State, s); err != nil {
		panic(fmt.Sprintf("run %s: %v", r.id, err))
	}
	r.State = s
	r.upsertAttrs(ctx, AttrState.ValueSet(string(s)))
	r.showDetails(ctx)
}

// recordFailures adds each classified failure of an acquisition to
// status and returns them.
func (r *run) recordFailures(ctx workflow.Context, err error) []activities.FailureDetail {
	details := failureDetails(err)
	for _, d := range details {
		r.addFailure(ctx, string(d.Class), d.Offering, d.Message)
	}
	return details
}

func (r *run) addFailure(ctx workflow.Context, class, offering, msg string) {
	r.Failures = addFailure(ctx, r.Failures, class, offering, msg)
	r.StockOuts = addStockOut(ctx, r.StockOuts, class, offering)
}

// owner is who the run's instances are acquired for.
func (r *run) owner() owner { return owner{id: r.id, identity: r.identity} }

// invalidSpecError fails the workflow as the spec's fault. Its message is the
// spec's own field errors, formatted with fmt, which workflowcheck cannot
// prove deterministic.
//
//workflowcheck:ignore
func invalidSpecError(err error) error {
	var ve *spec.ValidationError
	if errors.As(err, &ve) {
		return temporal.NewNonRetryableApplicationError(ve.Error(), "InvalidJobSpec", nil, ve.Fields)
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), "InvalidJobSpec", nil)
}
