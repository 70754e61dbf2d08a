package workflows

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/internal/telemetry"
	"refuel/pkg/admission"
	"refuel/pkg/capacity"
	"refuel/pkg/policy"
	"refuel/pkg/spec"
)

// workload is what a training run and a development environment share:
// the instances they hold (Holding), what their attempts, losses and
// recoveries count (Record), how they find capacity (market), and what
// is under way in this run of the workflow. A workload acquires through
// its market, runs attempts on what it holds (attempt) and recovers from
// what it loses (recovery); what is its own (its phases, when it must
// stop, what it shows) it asks its host.
type workload struct {
	h   *Holding
	rec *Record
	id  string // the workflow id
	// identity is the workload's first run ID, the same across
	// continue-as-new and never reused by a later workflow with the same
	// id: idempotency tokens derive from it.
	identity string
	// spec is the job the workload's agents run: a training run's
	// JobSpec, or the one a development environment runs its command as.
	spec *spec.JobSpec
	opts *RunOptions
	kind admission.Kind // what the capacity pool queues it as
	host host
	// market is how the workload finds capacity, chosen when it first
	// starts.
	market market

	// attempt is the attempt under way on what the workload holds, if
	// any.
	attempt *attempt
	// handOn is set when the history grew long while an attempt runs:
	// the workload continues as new, handing the attempt on.
	handOn bool
	// standby is an instance acquired to change over to, not yet in use;
	// standbyPeers are a gang's ranks after rank 0 acquired beside it.
	standby      *Lease
	standbyPeers []*Lease
	// growing are nodes an elastic gang short of nodes acquired, to train
	// with from its next checkpoint on.
	growing []*Lease
	waits   int // waits for capacity in this run of the workflow
	// unreleased is a lost instance whose release rides with the
	// acquisition of its replacement (releaseLater).
	unreleased *activities.ReleaseInput
	attrs      searchAttrs
	// oneTrip is set once the workload recovers the one-trip way
	// (recoversInOneTrip).
	oneTrip bool
	// taken are the instances their cloud said it took (instance-taken).
	taken takenInstances
}

// host is what a workload asks of the workflow it serves: a training
// run or a development environment.
type host interface {
	// enter moves the host to its phase for s, one of the phases every
	// workload goes through (acquiring, waiting, queued, running,
	// preempted, paused, over budget).
	enter(ctx workflow.Context, s State)
	// mustStop is whether the workload must stop now and hold nothing,
	// and why; except names what the asking place leaves out.
	mustStop(ctx workflow.Context, except ...stopWhy) stopWhy
	// holdWhilePaused blocks, holding nothing, while the host may not
	// acquire (paused, over its budget).
	holdWhilePaused(ctx workflow.Context) error
	// paused reports whether the operator holds the workload.
	paused() bool
	// ending reports whether the host is ending of its own accord (an
	// environment being deleted): a workload waiting for capacity stops
	// waiting.
	ending() bool
	// priority is the workload's priority now.
	priority() int
	// showDetails publishes the host's current details.
	showDetails(ctx workflow.Context)
	// continueAsNew hands the host's whole state on to its next run.
	continueAsNew(ctx workflow.Context) error
	// attemptStarted is told of an attempt once its rank 0 is launched,
	// to watch it (a budget, say).
	attemptStarted(ctx workflow.Context, a *attempt)
}

// owner is who the workload's instances are acquired for.
func (w *workload) owner() owner { return owner{id: w.id, identity: w.identity} }

func (w *workload) listOfferings(ctx workflow.Context) error {
	var offerings []capacity.Offering
	in := activities.OfferingsInput{Resources: w.spec.Resources, CheckpointURL: w.spec.Checkpoint.URL}
	actx := titled(controlOptions(ctx), "list what can be acquired for "+strconv.Itoa(w.spec.Resources.GPUs)+" GPU(s)")
	if err := workflow.ExecuteActivity(actx, activities.ListOfferingsName, in).Get(ctx, &offerings); err != nil {
		return err
	}
	if len(offerings) == 0 {
		return temporal.NewNonRetryableApplicationError(
			"no provider offers what resources asks for: check resources.gpus, instance_types, zones, providers and max_price_per_hour",
			string(capacity.SpecMismatch), nil)
	}
	w.h.Offerings = offerings
	return nil
}

// admit returns once the workload may acquire: not paused, and granted
// capacity when it goes through the pool.
func (w *workload) admit(ctx workflow.Context) error {
	if w.host.mustStop(ctx) != goOn {
		w.releaseNow(ctx) // it waits before it acquires
	}
	return w.market.admit(ctx, w)
}

// acquire gets the workload an instance on what its market offers next,
// trying again as the market says while none can be had. It returns no
// lease when the workload should go round again first (paused, asked to
// yield, or the market's next decision is due).
func (w *workload) acquire(ctx workflow.Context) (*Lease, error) {
	backoff := w.opts.CapacityBackoff
	for {
		ask, err := w.market.next(ctx, w)
		if err != nil || ask == nil {
			return nil, err
		}
		if len(ask.offerings) == 0 {
			return nil, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("no offering matching resources suits tier %s (it allows spot: %v, on-demand: %v)",
					w.spec.Tier, w.spec.Tier.AllowsSpot(), w.spec.Tier.AllowsOnDemand()),
				string(capacity.SpecMismatch), nil)
		}
		w.host.enter(ctx, StateAcquiring)
		lease, err := w.acquireLease(ctx, ask.leaseAsk)
		var details []activities.FailureDetail
		if err == nil {
			w.h.UnclassifiedWaits = 0
			w.use(ctx, lease)
			w.market.acquired(ctx, w, lease, 0)
			if details = w.acquirePeers(ctx, *ask); details == nil {
				return lease, nil
			}
		}
		if ctx.Err() != nil {
			return nil, temporal.NewCanceledError()
		}
		if details == nil {
			details = w.recordFailures(ctx, err)
		}
		again, err := w.market.failed(ctx, w, *ask, details, &backoff)
		if err != nil || !again {
			return nil, err
		}
	}
}

// use makes lease, just acquired, the workload's instance (take): a
// recovery under way has its replacement.
func (w *workload) use(ctx workflow.Context, lease *Lease) {
	w.take(ctx, lease)
	w.recovery().replaced(lease, lease.Since)
}

// take makes lease the workload's instance: status shows it, and
// operators filter on its market.
func (w *workload) take(ctx workflow.Context, lease *Lease) {
	lease.Teaches = true
	w.h.Lease = lease
	w.attrs.upsert(ctx, AttrMarket.ValueSet(string(lease.Offering().Market)))
	w.host.showDetails(ctx)
}

// backOff waits before the next try after no offering could be had,
// doubling the wait each time; a workload that has waited long continues as
// new instead, so its history stays short however long the wait.
func (w *workload) backOff(ctx workflow.Context, details []activities.FailureDetail, backoff *time.Duration) (bool, error) {
	if unclassified(details) {
		if w.h.UnclassifiedWaits++; w.h.UnclassifiedWaits > w.opts.MaxUnknownWaits {
			return false, cannotAcquire(fmt.Sprintf("acquisitions failed %d times in a row for reasons the providers did not classify; "+
				"the worker's log has each failure", w.h.UnclassifiedWaits), details)
		}
	} else {
		w.h.UnclassifiedWaits = 0
	}
	w.waits++
	if w.waits >= w.opts.MaxWaits || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
		return false, w.host.continueAsNew(ctx)
	}
	w.host.enter(ctx, StateWaiting)
	// Operators filter on why a workload waits: RefuelState names the class.
	w.attrs.upsert(ctx, AttrState.ValueSet(string(StateWaiting)+":"+string(waitingOn(details))))
	wait := jittered(*backoff, w.identity, w.h.Attempts)
	summary := "wait " + wait.Round(time.Second).String() + " for capacity (" + string(waitingOn(details)) + ")"
	until := workflow.Now(ctx).Add(wait)
	w.rec.WaitingUntil, w.rec.WaitingOn = &until, string(waitingOn(details))
	w.host.showDetails(ctx)
	// Holding nothing, it spends no budget while it waits.
	_, err := waitFor(ctx, wait, summary, func() bool { return w.host.mustStop(ctx, stopBudget) != goOn })
	w.rec.WaitingUntil, w.rec.WaitingOn = nil, ""
	if err != nil {
		return false, err
	}
	*backoff = min(2**backoff, w.opts.MaxCapacityBackoff)
	return true, nil
}

// release gives the workload's instance back: it stops paying for it, status
// and the search attributes stop naming it.
func (w *workload) release(ctx workflow.Context, reason activities.ReleaseReason) {
	if w.h.Lease == nil {
		return
	}
	w.releasePeers(ctx, reason)
	w.h.Leases.release(ctx, w.h.Lease, reason)
	w.h.Lease = nil
	w.attrs.upsert(ctx, AttrCostUSD.ValueSet(w.h.Ledger.CostUSD(workflow.Now(ctx))), AttrMarket.ValueUnset())
	w.host.showDetails(ctx)
}

// releaseAll runs however the workflow ends: nothing acquired is kept,
// but for an instance handed on, training, to the next run of the workflow.
func (w *workload) releaseAll(ctx workflow.Context) {
	w.releaseNow(ctx)
	if w.h.Training != nil {
		return
	}
	if w.standby != nil {
		w.h.Leases.release(ctx, w.standby, activities.ReleaseCleanup)
		w.standby = nil
	}
	w.releaseStandbyPeers(ctx)
	w.releaseGrowing(ctx)
	w.release(ctx, activities.ReleaseCleanup)
}

// recordFailures adds each classified failure of an acquisition to
// status and returns them.
func (w *workload) recordFailures(ctx workflow.Context, err error) []activities.FailureDetail {
	details := failureDetails(err)
	for _, d := range details {
		w.addFailure(ctx, string(d.Class), d.Offering, d.Message)
	}
	return details
}

func (w *workload) addFailure(ctx workflow.Context, class, offering, msg string) {
	w.rec.Failures = addFailure(ctx, w.rec.Failures, class, offering, msg)
	w.rec.StockOuts = addStockOut(ctx, w.rec.StockOuts, class, offering)
}

// nodes is how many instances the workload runs on at once.
func (w *workload) nodes() int { return w.spec.Resources.NodeCount() }

// gang is the workload's leases in rank order.
func (w *workload) gang() []*Lease {
	if w.h.Lease == nil {
		return nil
	}
	return append([]*Lease{w.h.Lease}, w.h.Peers...)
}

// acquirePeers acquires the gang's ranks after rank 0 (just acquired on
// ask), each like it: in its zone unless the spec allows spreading, and
// on its market. A rank that cannot be had gives the whole gang back:
// the workload holds nothing while it waits. It returns what failed.
func (w *workload) acquirePeers(ctx workflow.Context, ask ask) []activities.FailureDetail {
	if from := w.width(); w.market.widthToAcquire(w) != from {
		// A short gang given back whole is acquired whole again, unless
		// the market chose its width (clockedMarket.holdWidth).
		w.h.Width = 0
		w.resized(ctx, from)
	}
	for rank := len(w.h.Peers) + 1; rank < w.width(); rank++ {
		lease, err := w.h.Leases.acquire(ctx, w.owner(), w.peerAsk(ask, rank, w.h.Lease.Offering()))
		if err != nil {
			details := w.recordFailures(ctx, err)
			w.release(ctx, activities.ReleaseCleanup)
			return details
		}
		lease.Teaches = true
		w.h.Peers = append(w.h.Peers, lease)
		w.market.acquired(ctx, w, lease, rank)
	}
	w.host.showDetails(ctx)
	return nil
}

// peerAsk is what rank acquires beside rank 0, which is on first: a
// granted base machine of its own, or the workload's offerings on first's
// market, in first's zone unless the spec allows spreading.
func (w *workload) peerAsk(ask ask, rank int, first capacity.Offering) leaseAsk {
	a := ask.leaseAsk
	if p := w.h.Pool; p != nil && p.Grant != nil && p.Grant.Layer == admission.BaseLayer && rank < len(p.Grant.Nodes) {
		n := p.Grant.Nodes[rank]
		a.offerings, a.node = n.Offerings, n.Node
		return a
	}
	var like []capacity.Offering
	for _, o := range a.offerings {
		if o.Market == first.Market && (!w.spec.Resources.OneZone() || o.Zone == first.Zone) {
			like = append(like, o)
		}
	}
	a.offerings = capacity.First(like, first) // its type and zone first
	return a
}

// releasePeers gives back the gang's ranks after rank 0.
func (w *workload) releasePeers(ctx workflow.Context, reason activities.ReleaseReason) {
	for _, l := range w.h.Peers {
		w.h.Leases.release(ctx, l, reason)
	}
	w.h.Peers = nil
}

// foldProgress folds what an attempt reached into the record, from its
// progress signals, its result or its last heartbeat alike: the step
// (never back), the total steps when known, and a checkpoint no older
// than the one recorded.
func (w *workload) foldProgress(step, total int64, c *activities.CheckpointRef) {
	w.rec.Step = max(w.rec.Step, step)
	if total > 0 {
		w.rec.TotalSteps = total
	}
	if c != nil && (w.rec.LastCheckpoint == nil || c.Step >= w.rec.LastCheckpoint.Step) {
		w.rec.LastCheckpoint = c
	}
}

// observeResult folds an attempt's final report into the record: the
// recovery it resumed if the "restored" signal never came (or came
// late), and what it reached.
func (w *workload) observeResult(ctx workflow.Context, e attemptEnd) {
	res := e.res
	if res.Outcome != activities.OutcomeFailed {
		w.recovery().resumed(ctx, res.RestoredStep, e.started)
	}
	w.foldProgress(res.LastStep, res.TotalSteps, res.LastCheckpoint)
}

// onProgress folds a node agent's report into the record. Reports from
// another attempt (a late signal from a lost instance) are ignored, and
// a gang's other ranks report too: the workload follows rank 0.
func (w *workload) onProgress(ctx workflow.Context, p activities.Progress) {
	a := w.attempt
	if a == nil {
		return
	}
	lead := a.lead()
	if p.Attempt != lead.in.Attempt || p.InstanceID != "" && p.InstanceID != lead.lease.Instance.ID {
		return
	}
	lead.heard = true
	var c *activities.CheckpointRef
	if p.Kind == activities.ProgressCheckpoint {
		c = p.Checkpoint
	}
	w.foldProgress(p.Step, p.TotalSteps, c)
	switch p.Kind {
	case activities.ProgressCheckpoint:
		// A report may tell several checkpoints together: the latest, and
		// what their uploads took in all.
		h, n := workflow.GetMetricsHandler(ctx), max(1, p.Checkpoints)
		if c := p.Checkpoint; c != nil && c.WriteSeconds > 0 {
			took := time.Duration(c.WriteSeconds * float64(time.Second))
			lead.lease.Log = lead.lease.Log.Add(policy.CheckpointLog{Writes: n, WriteTime: took})
			for range n {
				telemetry.ObserveCheckpointUpload(h, lead.lease.Offering(), took/time.Duration(n))
			}
		}
		h.Counter(telemetry.CheckpointsTotal).Inc(int64(n))
	case activities.ProgressRestored:
		w.recovery().resumed(ctx, p.Step, workflow.Now(ctx))
	case activities.ProgressNotice:
		workflow.GetLogger(ctx).Info("interruption notice", "instance", p.InstanceID, "step", p.Step)
	}
}

// observeLastHeartbeat folds in what the agent of an attempt that went
// silent last reported: the step it reached and its latest checkpoint,
// which the workload may not have been signalled yet (checkpoints close
// together are told together). The work lost is counted from them.
func (w *workload) observeLastHeartbeat(err error) {
	var timeout *temporal.TimeoutError
	if !errors.As(err, &timeout) || !timeout.HasLastHeartbeatDetails() {
		return
	}
	var last activities.Progress
	if timeout.LastHeartbeatDetails(&last) != nil {
		return
	}
	c := last.Checkpoint
	if c != nil && w.rec.LastCheckpoint != nil && c.Step == w.rec.LastCheckpoint.Step {
		c = nil // a signal told this checkpoint first: it stays as told
	}
	w.foldProgress(last.Step, 0, c)
}

// holdingPricePerHour is what the instances the workload holds cost an hour.
func (w *workload) holdingPricePerHour() float64 {
	var p float64
	for _, l := range append(append(w.gang(), w.standby), w.standbyPeers...) {
		if l != nil {
			p += l.Offering().PricePerHour
		}
	}
	return p
}

// releaseStandbyPeers gives back a standby gang's ranks after rank 0.
func (w *workload) releaseStandbyPeers(ctx workflow.Context) {
	for _, l := range w.standbyPeers {
		w.h.Leases.release(ctx, l, activities.ReleaseCleanup)
	}
	w.standbyPeers = nil
}

// width is how many nodes the gang trains on now: all it asks for but
// while an elastic gang is short.
func (w *workload) width() int {
	if w.h.Width > 0 && w.h.Width < w.nodes() {
		return w.h.Width
	}
	return w.nodes()
}

// releaseGrowing gives back nodes acquired to grow a gang that is not
// going to train with them.
func (w *workload) releaseGrowing(ctx workflow.Context) {
	for _, l := range w.growing {
		w.h.Leases.release(ctx, l, activities.ReleaseCleanup)
	}
	w.growing = nil
}

// resized books a change of the gang's width, from the checkpoint it
// resumes from.
func (w *workload) resized(ctx workflow.Context, from int) {
	step := int64(0)
	if ck := w.rec.LastCheckpoint; ck != nil {
		step = ck.Step
	}
	now := workflow.Now(ctx)
	w.h.Ledger.AddResize(now, step, from, w.width())
	workflow.GetLogger(ctx).Info("the gang changed width", "from", from, "to", w.width(), "step", step)
	w.host.showDetails(ctx)
}
