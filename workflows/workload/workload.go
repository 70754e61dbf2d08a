package workload

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
	"refuel/workflows"
)

// Workload is what a training run and a development environment share:
// the instances they hold (Holding), what their attempts, losses and
// recoveries count (Record), how they find capacity (market), and what
// is under way in this run of the workflow. A workload acquires through
// its market, runs attempts on what it holds (attempt) and recovers from
// what it loses (recovery); what is its own (its phases, when it must
// stop, what it shows) it asks its host.
type Workload struct {
	Held       *Holding
	Counts     *Record
	WorkflowID string // the workflow id
	// Identity is the workload's first run ID, the same across
	// continue-as-new and never reused by a later workflow with the same
	// id: idempotency tokens derive from it.
	Identity string
	// Spec is the job the workload's agents run: a training run's
	// JobSpec, or the one a development environment runs its command as.
	Spec *spec.JobSpec
	Opts *RunOptions
	Kind admission.Kind // what the capacity pool queues it as
	Host host
	// Market is how the workload finds capacity, chosen when it first
	// starts.
	Market Market

	// Attempt is the attempt under way on what the workload holds, if
	// any.
	Attempt *Attempt
	// HandOn is set when the history grew long while an attempt runs:
	// the workload continues as new, handing the attempt on.
	HandOn bool
	// Standby is an instance acquired to change over to, not yet in use;
	// StandbyPeers are a gang's ranks after rank 0 acquired beside it.
	Standby      *Lease
	StandbyPeers []*Lease
	// Growing are nodes an elastic gang short of nodes acquired, to train
	// with from its next checkpoint on.
	Growing []*Lease
	Waits   int // waits for capacity in this run of the workflow
	// unreleased is a lost instance whose release rides with the
	// acquisition of its replacement (releaseLater).
	unreleased *activities.ReleaseInput
	Attrs      searchAttrs
	// oneTrip is set once the workload recovers the one-trip way
	// (recoversInOneTrip).
	oneTrip bool
	// Taken are the instances their cloud said it took (instance-taken).
	Taken takenInstances
}

// host is what a workload asks of the workflow it serves: a training
// run or a development environment.
type host interface {
	// Enter moves the host to its phase for s, one of the phases every
	// workload goes through (acquiring, waiting, queued, running,
	// preempted, paused, over budget).
	Enter(ctx workflow.Context, s workflows.State)
	// MustStop is whether the workload must stop now and hold nothing,
	// and why; except names what the asking place leaves out.
	MustStop(ctx workflow.Context, except ...StopWhy) StopWhy
	// HoldWhilePaused blocks, holding nothing, while the host may not
	// acquire (paused, over its budget).
	HoldWhilePaused(ctx workflow.Context) error
	// OnHold reports whether the operator holds the workload.
	OnHold() bool
	// Ending reports whether the host is ending of its own accord (an
	// environment being deleted): a workload waiting for capacity stops
	// waiting.
	Ending() bool
	// CurrentPriority is the workload's priority now.
	CurrentPriority() int
	// ShowDetails publishes the host's current details.
	ShowDetails(ctx workflow.Context)
	// ContinueAsNew hands the host's whole state on to its next run.
	ContinueAsNew(ctx workflow.Context) error
	// AttemptStarted is told of an attempt once its rank 0 is launched,
	// to watch it (a budget, say).
	AttemptStarted(ctx workflow.Context, a *Attempt)
}

// Owner is who the workload's instances are acquired for.
func (w *Workload) Owner() Owner { return Owner{WorkflowID: w.WorkflowID, Identity: w.Identity} }

func (w *Workload) ListOfferings(ctx workflow.Context) error {
	var offerings []capacity.Offering
	in := activities.OfferingsInput{Resources: w.Spec.Resources, CheckpointURL: w.Spec.Checkpoint.URL}
	actx := Titled(ControlOptions(ctx), "list what can be acquired for "+strconv.Itoa(w.Spec.Resources.GPUs)+" GPU(s)")
	if err := workflow.ExecuteActivity(actx, activities.ListOfferingsName, in).Get(ctx, &offerings); err != nil {
		return err
	}
	if len(offerings) == 0 {
		return temporal.NewNonRetryableApplicationError(
			"no provider offers what resources asks for: check resources.gpus, instance_types, zones, providers and max_price_per_hour",
			string(capacity.SpecMismatch), nil)
	}
	w.Held.Offerings = offerings
	return nil
}

// Admit returns once the workload may acquire: not paused, and granted
// capacity when it goes through the pool.
func (w *Workload) Admit(ctx workflow.Context) error {
	if w.Host.MustStop(ctx) != GoOn {
		w.ReleaseNow(ctx) // it waits before it acquires
	}
	return w.Market.Admit(ctx, w)
}

// Acquire gets the workload an instance on what its market offers next,
// trying again as the market says while none can be had. It returns no
// lease when the workload should go round again first (paused, asked to
// yield, or the market's next decision is due).
func (w *Workload) Acquire(ctx workflow.Context) (*Lease, error) {
	backoff := w.Opts.CapacityBackoff
	for {
		ask, err := w.Market.Next(ctx, w)
		if err != nil || ask == nil {
			return nil, err
		}
		if len(ask.Offerings) == 0 {
			return nil, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("no offering matching resources suits tier %s (it allows spot: %v, on-demand: %v)",
					w.Spec.Tier, w.Spec.Tier.AllowsSpot(), w.Spec.Tier.AllowsOnDemand()),
				string(capacity.SpecMismatch), nil)
		}
		w.Host.Enter(ctx, workflows.StateAcquiring)
		lease, err := w.acquireLease(ctx, ask.LeaseAsk)
		var details []activities.FailureDetail
		if err == nil {
			w.Held.UnclassifiedWaits = 0
			w.Use(ctx, lease)
			w.Market.Acquired(ctx, w, lease, 0)
			if details = w.acquirePeers(ctx, *ask); details == nil {
				return lease, nil
			}
		}
		if ctx.Err() != nil {
			return nil, temporal.NewCanceledError()
		}
		if details == nil {
			details = w.RecordFailures(ctx, err)
		}
		again, err := w.Market.Failed(ctx, w, *ask, details, &backoff)
		if err != nil || !again {
			return nil, err
		}
	}
}

// Use makes lease, just acquired, the workload's instance (take): a
// recovery under way has its replacement.
func (w *Workload) Use(ctx workflow.Context, lease *Lease) {
	w.take(ctx, lease)
	w.Recover().replaced(lease, lease.Since)
}

// take makes lease the workload's instance: status shows it, and
// operators filter on its market.
func (w *Workload) take(ctx workflow.Context, lease *Lease) {
	lease.Teaches = true
	w.Held.Lease = lease
	w.Attrs.Upsert(ctx, workflows.AttrMarket.ValueSet(string(lease.Offering().Market)))
	w.Host.ShowDetails(ctx)
}

// backOff waits before the next try after no offering could be had,
// doubling the wait each time; a workload that has waited long continues as
// new instead, so its history stays short however long the wait.
func (w *Workload) backOff(ctx workflow.Context, details []activities.FailureDetail, backoff *time.Duration) (bool, error) {
	if unclassified(details) {
		if w.Held.UnclassifiedWaits++; w.Held.UnclassifiedWaits > w.Opts.MaxUnknownWaits {
			return false, CannotAcquire(fmt.Sprintf("acquisitions failed %d times in a row for reasons the providers did not classify; "+
				"the worker's log has each failure", w.Held.UnclassifiedWaits), details)
		}
	} else {
		w.Held.UnclassifiedWaits = 0
	}
	w.Waits++
	if w.Waits >= w.Opts.MaxWaits || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
		return false, w.Host.ContinueAsNew(ctx)
	}
	w.Host.Enter(ctx, workflows.StateWaiting)
	// Operators filter on why a workload waits: RefuelState names the class.
	w.Attrs.Upsert(ctx, workflows.AttrState.ValueSet(string(workflows.StateWaiting)+":"+string(waitingOn(details))))
	wait := jittered(*backoff, w.Identity, w.Held.Attempts)
	summary := "wait " + wait.Round(time.Second).String() + " for capacity (" + string(waitingOn(details)) + ")"
	until := workflow.Now(ctx).Add(wait)
	w.Counts.WaitingUntil, w.Counts.WaitingOn = &until, string(waitingOn(details))
	w.Host.ShowDetails(ctx)
	// Holding nothing, it spends no budget while it waits.
	_, err := WaitFor(ctx, wait, summary, func() bool { return w.Host.MustStop(ctx, StopBudget) != GoOn })
	w.Counts.WaitingUntil, w.Counts.WaitingOn = nil, ""
	if err != nil {
		return false, err
	}
	*backoff = min(2**backoff, w.Opts.MaxCapacityBackoff)
	return true, nil
}

// Release gives the workload's instance back: it stops paying for it, status
// and the search attributes stop naming it.
func (w *Workload) Release(ctx workflow.Context, reason activities.ReleaseReason) {
	if w.Held.Lease == nil {
		return
	}
	w.releasePeers(ctx, reason)
	w.Held.Leases.Release(ctx, w.Held.Lease, reason)
	w.Held.Lease = nil
	w.Attrs.Upsert(ctx, workflows.AttrCostUSD.ValueSet(w.Held.Ledger.CostUSD(workflow.Now(ctx))), workflows.AttrMarket.ValueUnset())
	w.Host.ShowDetails(ctx)
}

// ReleaseAll runs however the workflow ends: nothing acquired is kept,
// but for an instance handed on, training, to the next run of the workflow.
func (w *Workload) ReleaseAll(ctx workflow.Context) {
	w.ReleaseNow(ctx)
	if w.Held.Training != nil {
		return
	}
	if w.Standby != nil {
		w.Held.Leases.Release(ctx, w.Standby, activities.ReleaseCleanup)
		w.Standby = nil
	}
	w.ReleaseStandbyPeers(ctx)
	w.ReleaseGrowing(ctx)
	w.Release(ctx, activities.ReleaseCleanup)
}

// RecordFailures adds each classified failure of an acquisition to
// status and returns them.
func (w *Workload) RecordFailures(ctx workflow.Context, err error) []activities.FailureDetail {
	details := FailureDetails(err)
	for _, d := range details {
		w.AddFailure(ctx, string(d.Class), d.Offering, d.Message)
	}
	return details
}

func (w *Workload) AddFailure(ctx workflow.Context, class, offering, msg string) {
	w.Counts.Failures = AddFailure(ctx, w.Counts.Failures, class, offering, msg)
	w.Counts.StockOuts = AddStockOut(ctx, w.Counts.StockOuts, class, offering)
}

// Nodes is how many instances the workload runs on at once.
func (w *Workload) Nodes() int { return w.Spec.Resources.NodeCount() }

// Gang is the workload's leases in rank order.
func (w *Workload) Gang() []*Lease {
	if w.Held.Lease == nil {
		return nil
	}
	return append([]*Lease{w.Held.Lease}, w.Held.Peers...)
}

// acquirePeers acquires the gang's ranks after rank 0 (just acquired on
// ask), each like it: in its zone unless the spec allows spreading, and
// on its market. A rank that cannot be had gives the whole gang back:
// the workload holds nothing while it waits. It returns what failed.
func (w *Workload) acquirePeers(ctx workflow.Context, ask Ask) []activities.FailureDetail {
	if from := w.NodesNow(); w.Market.WidthToAcquire(w) != from {
		// A short gang given back whole is acquired whole again, unless
		// the market chose its width (clockedMarket.holdWidth).
		w.Held.Width = 0
		w.Resized(ctx, from)
	}
	for rank := len(w.Held.Peers) + 1; rank < w.NodesNow(); rank++ {
		lease, err := w.Held.Leases.Acquire(ctx, w.Owner(), w.PeerAsk(ask, rank, w.Held.Lease.Offering()))
		if err != nil {
			details := w.RecordFailures(ctx, err)
			w.Release(ctx, activities.ReleaseCleanup)
			return details
		}
		lease.Teaches = true
		w.Held.Peers = append(w.Held.Peers, lease)
		w.Market.Acquired(ctx, w, lease, rank)
	}
	w.Host.ShowDetails(ctx)
	return nil
}

// PeerAsk is what rank acquires beside rank 0, which is on first: a
// granted base machine of its own, or the workload's offerings on first's
// market, in first's zone unless the spec allows spreading.
func (w *Workload) PeerAsk(ask Ask, rank int, first capacity.Offering) LeaseAsk {
	a := ask.LeaseAsk
	if p := w.Held.Pool; p != nil && p.Grant != nil && p.Grant.Layer == admission.BaseLayer && rank < len(p.Grant.Nodes) {
		n := p.Grant.Nodes[rank]
		a.Offerings, a.Node = n.Offerings, n.Node
		return a
	}
	var like []capacity.Offering
	for _, o := range a.Offerings {
		if o.Market == first.Market && (!w.Spec.Resources.OneZone() || o.Zone == first.Zone) {
			like = append(like, o)
		}
	}
	a.Offerings = capacity.First(like, first) // its type and zone first
	return a
}

// releasePeers gives back the gang's ranks after rank 0.
func (w *Workload) releasePeers(ctx workflow.Context, reason activities.ReleaseReason) {
	for _, l := range w.Held.Peers {
		w.Held.Leases.Release(ctx, l, reason)
	}
	w.Held.Peers = nil
}

// foldProgress folds what an attempt reached into the record, from its
// progress signals, its result or its last heartbeat alike: the step
// (never back), the total steps when known, and a checkpoint no older
// than the one recorded.
func (w *Workload) foldProgress(step, total int64, c *activities.CheckpointRef) {
	w.Counts.Step = max(w.Counts.Step, step)
	if total > 0 {
		w.Counts.TotalSteps = total
	}
	if c != nil && (w.Counts.LastCheckpoint == nil || c.Step >= w.Counts.LastCheckpoint.Step) {
		w.Counts.LastCheckpoint = c
	}
}

// ObserveResult folds an attempt's final report into the record: the
// recovery it resumed if the "restored" signal never came (or came
// late), and what it reached.
func (w *Workload) ObserveResult(ctx workflow.Context, e AttemptEnd) {
	res := e.Res
	if res.Outcome != activities.OutcomeFailed {
		w.Recover().resumed(ctx, res.RestoredStep, e.started)
	}
	w.foldProgress(res.LastStep, res.TotalSteps, res.LastCheckpoint)
}

// OnProgress folds a node agent's report into the record. Reports from
// another attempt (a late signal from a lost instance) are ignored, and
// a gang's other ranks report too: the workload follows rank 0.
func (w *Workload) OnProgress(ctx workflow.Context, p activities.Progress) {
	a := w.Attempt
	if a == nil {
		return
	}
	lead := a.Lead()
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
		w.Recover().resumed(ctx, p.Step, workflow.Now(ctx))
	case activities.ProgressNotice:
		workflow.GetLogger(ctx).Info("interruption notice", "instance", p.InstanceID, "step", p.Step)
	}
}

// observeLastHeartbeat folds in what the agent of an attempt that went
// silent last reported: the step it reached and its latest checkpoint,
// which the workload may not have been signalled yet (checkpoints close
// together are told together). The work lost is counted from them.
func (w *Workload) observeLastHeartbeat(err error) {
	var timeout *temporal.TimeoutError
	if !errors.As(err, &timeout) || !timeout.HasLastHeartbeatDetails() {
		return
	}
	var last activities.Progress
	if timeout.LastHeartbeatDetails(&last) != nil {
		return
	}
	c := last.Checkpoint
	if c != nil && w.Counts.LastCheckpoint != nil && c.Step == w.Counts.LastCheckpoint.Step {
		c = nil // a signal told this checkpoint first: it stays as told
	}
	w.foldProgress(last.Step, 0, c)
}

// HoldingPricePerHour is what the instances the workload holds cost an hour.
func (w *Workload) HoldingPricePerHour() float64 {
	var p float64
	for _, l := range append(append(w.Gang(), w.Standby), w.StandbyPeers...) {
		if l != nil {
			p += l.Offering().PricePerHour
		}
	}
	return p
}

// ReleaseStandbyPeers gives back a standby gang's ranks after rank 0.
func (w *Workload) ReleaseStandbyPeers(ctx workflow.Context) {
	for _, l := range w.StandbyPeers {
		w.Held.Leases.Release(ctx, l, activities.ReleaseCleanup)
	}
	w.StandbyPeers = nil
}

// NodesNow is how many nodes the gang trains on now: all it asks for but
// while an elastic gang is short.
func (w *Workload) NodesNow() int {
	if w.Held.Width > 0 && w.Held.Width < w.Nodes() {
		return w.Held.Width
	}
	return w.Nodes()
}

// ReleaseGrowing gives back nodes acquired to grow a gang that is not
// going to train with them.
func (w *Workload) ReleaseGrowing(ctx workflow.Context) {
	for _, l := range w.Growing {
		w.Held.Leases.Release(ctx, l, activities.ReleaseCleanup)
	}
	w.Growing = nil
}

// Resized books a change of the gang's width, from the checkpoint it
// resumes from.
func (w *Workload) Resized(ctx workflow.Context, from int) {
	step := int64(0)
	if ck := w.Counts.LastCheckpoint; ck != nil {
		step = ck.Step
	}
	now := workflow.Now(ctx)
	w.Held.Ledger.AddResize(now, step, from, w.NodesNow())
	workflow.GetLogger(ctx).Info("the gang changed width", "from", from, "to", w.NodesNow(), "step", step)
	w.Host.ShowDetails(ctx)
}
