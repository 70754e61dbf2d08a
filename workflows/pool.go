package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/internal/telemetry"
	"refuel/pkg/admission"
	"refuel/pkg/pool"
)

// PoolInput starts the capacity pool: its pools file, and after a
// continue-as-new the pool's whole state, handed on as it is.
type PoolInput struct {
	Config pool.Config      `json:"config"`
	State  *admission.State `json:"state,omitempty"`
	Counts PoolCounts       `json:"counts"`
	// MaxHistory continues as new past this many events even if the
	// server has not suggested it yet; 0 means DefaultPoolMaxHistory.
	MaxHistory int `json:"max_history,omitempty"`
}

// PoolCounts are the pool's running totals, carried across generations.
type PoolCounts struct {
	Preemptions int `json:"preemptions"`
	Moves       int `json:"moves"`
	Generation  int `json:"generation"`
}

// DefaultPoolMaxHistory keeps each generation of the pool's history small
// enough to replay in moments.
const DefaultPoolMaxHistory = 5000

// ownersCheckEvery is how often the pool looks for holders that ended
// without giving their capacity back (terminated, say).
const ownersCheckEvery = time.Minute

// CapacityPool owns the base group and the admission queue: runs and
// services ask it for capacity; it admits by priority with aging, places
// on base first and overflows to the burst pools, preempts lower-priority
// training for what cannot be placed, moves burst training onto base that
// comes free so burst is given back first, and continues as new to keep
// its history bounded, carrying its whole state.
func CapacityPool(ctx workflow.Context, in PoolInput) error {
	p, err := newCapacityPool(ctx, in)
	if err != nil {
		return err
	}
	if err := workflow.SetQueryHandlerWithOptions(ctx, QueryStatus, func() (PoolStatus, error) { return p.status(ctx), nil },
		workflow.QueryHandlerOptions{Description: "base and burst in use, the queue in admission order, allocations"}); err != nil {
		return err
	}
	signals := p.channels(ctx)
	p.schedule(ctx)
	check := timer(ctx, ownersCheckEvery, "look for holders that ended")
	for ctx.Err() == nil && !p.tooLong(ctx) {
		sel := workflow.NewSelector(ctx)
		addSignals(ctx, sel, signals)
		sel.AddFuture(check, func(workflow.Future) {
			p.releaseAbandoned(ctx)
			check = timer(ctx, ownersCheckEvery, "look for holders that ended")
		})
		sel.Select(ctx)
		p.schedule(ctx)
	}
	if ctx.Err() != nil {
		return temporal.NewCanceledError()
	}
	// Nothing sent to the pool may be lost across generations: take in
	// every signal already delivered before handing the state on.
	drainSignals(ctx, signals)
	p.schedule(ctx)
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	p.Counts.Generation++
	p.Config = p.State.Config // the pools file in force, reconfigured or not
	return workflow.NewContinueAsNewError(ctx, CapacityPoolName, p.PoolInput)
}

// capacityPool is the pool workflow: its state is its input, handed on
// whole to the next generation.
type capacityPool struct {
	PoolInput
}

func newCapacityPool(ctx workflow.Context, in PoolInput) (*capacityPool, error) {
	in.Config.Normalize()
	if err := in.Config.Validate(); err != nil {
		return nil, temporal.NewNonRetryableApplicationError("invalid pools file: "+err.Error(), "InvalidPoolConfig", nil)
	}
	p := &capacityPool{PoolInput: in}
	if p.State == nil {
		p.State = admission.New(in.Config)
	}
	if p.MaxHistory <= 0 {
		p.MaxHistory = DefaultPoolMaxHistory
	}
	workflow.GetLogger(ctx).Info("capacity pool open", "generation", p.Counts.Generation,
		"base_machines", len(p.State.Nodes), "burst_pools", len(p.State.Config.Burst),
		"waiting", len(p.State.Waiting), "running", len(p.State.Running))
	return p, nil
}

// channels wires each signal of the protocol to its handler. The order is
// fixed, so replays take signals that arrived together in the same order.
func (p *capacityPool) channels(ctx workflow.Context) []signalHandler {
	log := workflow.GetLogger(ctx)
	ignore := func(what, id string, err error) {
		var nf *admission.NotFoundError
		if err != nil && !errors.As(err, &nf) {
			log.Warn("pool ignored a signal", "signal", what, "id", id, "error", err)
		}
	}
	return []signalHandler{
		onSignalOf(ctx, SignalPoolConfigure, func(ctx workflow.Context, cfg pool.Config) {
			cfg.Normalize()
			if err := cfg.Validate(); err != nil {
				log.Error("pools file refused; keeping the one in force", "error", err)
				return
			}
			p.State.Reconfigure(cfg)
		}),
		onSignalOf(ctx, SignalPoolRequest, func(ctx workflow.Context, r admission.Request) {
			p.request(ctx, r)
		}),
		onSignalOf(ctx, SignalPoolBind, func(ctx workflow.Context, b PoolBind) {
			ignore(SignalPoolBind, b.ID, p.State.Bind(b.ID, b.Offering))
		}),
		onSignalOf(ctx, SignalPoolRelease, func(ctx workflow.Context, ref PoolRef) {
			p.release(ref.ID)
		}),
		onSignalOf(ctx, SignalPoolYielded, func(ctx workflow.Context, ref PoolRef) {
			ignore(SignalPoolYielded, ref.ID, p.State.Requeue(ref.ID, workflow.Now(ctx)))
		}),
		onSignalOf(ctx, SignalPoolPriority, func(ctx workflow.Context, pr PoolPriority) {
			ignore(SignalPoolPriority, pr.ID, p.State.SetPriority(pr.ID, pr.Priority))
		}),
		onSignalOf(ctx, SignalPoolPause, func(ctx workflow.Context, ref PoolRef) {
			ignore(SignalPoolPause, ref.ID, p.State.Pause(ref.ID, workflow.Now(ctx)))
		}),
		onSignalOf(ctx, SignalPoolResume, func(ctx workflow.Context, ref PoolRef) {
			ignore(SignalPoolResume, ref.ID, p.State.Resume(ref.ID, workflow.Now(ctx)))
		}),
	}
}

// request queues a request. One already running is granted again: its
// owner asks only when it holds nothing, so it lost the first grant.
func (p *capacityPool) request(ctx workflow.Context, r admission.Request) {
	if r.Owner == "" {
		r.Owner = r.ID
	}
	err := p.State.Enqueue(r, workflow.Now(ctx))
	var dup *admission.DuplicateError
	switch {
	case errors.As(err, &dup):
		for _, a := range p.State.Running {
			if a.Request.ID == r.ID && !a.Yielding {
				p.grant(ctx, a)
			}
		}
	case err != nil:
		workflow.GetLogger(ctx).Error("request refused", "id", r.ID, "error", err)
	}
}

// release gives back what a request holds, or takes it out of the queue.
func (p *capacityPool) release(id string) {
	if _, err := p.State.Release(id); err == nil {
		return
	}
	_ = p.State.Cancel(id)
}

// schedule admits what fits, asks lower-priority training to yield for
// what does not, and moves burst training onto freed base.
func (p *capacityPool) schedule(ctx workflow.Context) {
	for {
		now := workflow.Now(ctx)
		granted := p.State.Admit(now, nil)
		if len(granted) == 0 {
			break
		}
		for _, a := range granted {
			r := a.Request
			telemetry.ObserveAdmissionWait(workflow.GetMetricsHandler(ctx), string(r.Kind), string(a.Layer), now.Sub(r.EnqueuedAt)-r.PausedFor)
			p.grant(ctx, a)
		}
	}
	for _, r := range p.State.Queue(workflow.Now(ctx)) {
		if r.Paused {
			continue
		}
		victims, ok := p.State.Victims(r, nil, workflow.Now(ctx))
		if !ok {
			continue
		}
		for _, v := range victims {
			p.Counts.Preemptions++
			p.yield(ctx, v, fmt.Sprintf("preempted for %s (priority %d)", r.ID, r.Priority), r.ID)
		}
	}
	for _, a := range p.State.Moves() {
		p.Counts.Moves++
		p.yield(ctx, a, "moving to base capacity that came free: burst is given back first", "")
	}
}

// grant tells an allocation's owner it may acquire. An owner that is gone
// gets nothing: its capacity goes back at once.
func (p *capacityPool) grant(ctx workflow.Context, a admission.Allocation) {
	err := workflow.SignalExternalWorkflow(ctx, a.Request.Owner, "", SignalCapacityGranted, a).Get(ctx, nil)
	if err != nil {
		workflow.GetLogger(ctx).Warn("grant not delivered; releasing", "id", a.Request.ID, "owner", a.Request.Owner, "error", err)
		p.release(a.Request.ID)
	}
}

// yield asks an allocation's holder to checkpoint and give it back.
func (p *capacityPool) yield(ctx workflow.Context, a admission.Allocation, reason, forID string) {
	_ = p.State.MarkYielding(a.Request.ID)
	req := YieldRequest{ID: a.Request.ID, Reason: reason, For: forID}
	if err := workflow.SignalExternalWorkflow(ctx, a.Request.Owner, "", SignalYield, req).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("yield not delivered; releasing", "id", a.Request.ID, "owner", a.Request.Owner, "error", err)
		p.release(a.Request.ID)
	}
}

// releaseAbandoned gives back what owners that ended without saying so
// (terminated, or failed past their cleanup) still hold or wait for.
func (p *capacityPool) releaseAbandoned(ctx workflow.Context) {
	var owners []string
	add := func(o string) {
		if !slices.Contains(owners, o) {
			owners = append(owners, o)
		}
	}
	for _, r := range p.State.Waiting {
		add(r.Owner)
	}
	for _, a := range p.State.Running {
		add(a.Request.Owner)
	}
	if len(owners) == 0 {
		return
	}
	var gone []string
	actx := titled(controlOptions(ctx), "which of "+strconv.Itoa(len(owners))+" holders ended?")
	err := workflow.ExecuteActivity(actx, activities.EndedWorkflowsName, owners).Get(ctx, &gone)
	if err != nil {
		workflow.GetLogger(ctx).Warn("cannot check the pool's holders", "error", err)
		return
	}
	for _, owner := range gone {
		for _, id := range p.idsOf(owner) {
			workflow.GetLogger(ctx).Info("releasing capacity of an ended holder", "id", id, "owner", owner)
			p.release(id)
		}
	}
}

func (p *capacityPool) idsOf(owner string) []string {
	var ids []string
	for _, r := range p.State.Waiting {
		if r.Owner == owner {
			ids = append(ids, r.ID)
		}
	}
	for _, a := range p.State.Running {
		if a.Request.Owner == owner {
			ids = append(ids, a.Request.ID)
		}
	}
	return ids
}

// tooLong reports whether this generation's history should end.
func (p *capacityPool) tooLong(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= p.MaxHistory
}

func (p *capacityPool) status(ctx workflow.Context) PoolStatus {
	now := workflow.Now(ctx)
	st := PoolStatus{Waiting: []QueuedRequest{}, Running: p.State.Running, Preemptions: p.Counts.Preemptions, Moves: p.Counts.Moves,
		Generation: p.Counts.Generation, History: int64(workflow.GetInfo(ctx).GetCurrentHistoryLength())}
	if st.Running == nil {
		st.Running = []admission.Allocation{}
	}
	for _, r := range p.State.Queue(now) {
		st.Waiting = append(st.Waiting, QueuedRequest{Request: r, EffectivePriority: p.State.Effective(r, now)})
	}
	used := 0
	for _, a := range p.State.Running {
		if a.Layer == admission.BaseLayer {
			st.Base++
			used += a.GPUs()
		} else {
			st.Burst++
		}
	}
	for _, n := range p.State.Nodes {
		st.BaseGPUs += n.GPUs
	}
	st.FreeBaseGPUs = st.BaseGPUs - used
	return st
}
