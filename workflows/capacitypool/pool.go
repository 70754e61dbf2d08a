package capacitypool

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
	"refuel/pkg/pool"
	"refuel/workflows"
	"refuel/workflows/workload"
)

// PoolInput starts the capacity pool: its pools file, and after a
// continue-as-new the pool's state, carried compactly.
type PoolInput struct {
	Config pool.Config `json:"config"`
	// State is the whole state as generations before the carry handed it
	// on; read when a pool started so is replayed or resumed, never written.
	State *admission.State `json:"state,omitempty"`
	Carry *admission.Carry `json:"carry,omitempty"`
	// Unsent are the grants and yields the last generation decided and
	// had not sent yet; this one sends them first.
	Unsent []PoolMessage `json:"unsent,omitempty"`
	Counts PoolCounts    `json:"counts"`
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
// on base first and overflows to the burst pools (a gang all or
// nothing), preempts lower-priority training for what cannot be placed,
// moves burst training onto base that comes free so burst is given back
// first, takes back burst grants a gang cannot fill, and continues as new
// to keep its history bounded, carrying its state.
func CapacityPool(ctx workflow.Context, in PoolInput) error {
	atScale := workflow.GetVersion(ctx, poolAtScaleVersion, workflow.DefaultVersion, 1) >= 1
	p, err := newCapacityPool(ctx, in, atScale)
	if err != nil {
		return err
	}
	if err := workflow.SetQueryHandlerWithOptions(ctx, workflows.QueryStatus, func() (Status, error) { return p.Status(ctx), nil },
		workflow.QueryHandlerOptions{Description: "base and burst in use, the queue in admission order, allocations"}); err != nil {
		return err
	}
	signals := p.channels(ctx)
	p.flush(ctx)
	p.schedule(ctx)
	p.ShowDetails(ctx)
	check := workload.Timer(ctx, ownersCheckEvery, "look for holders that ended")
	for ctx.Err() == nil && !p.tooLong(ctx) {
		sel := workflow.NewSelector(ctx)
		workload.AddSignals(ctx, sel, signals)
		sel.AddFuture(check, func(workflow.Future) {
			p.checkOwners(ctx)
			check = workload.Timer(ctx, ownersCheckEvery, "look for holders that ended")
		})
		if p.atScale {
			sel.AddReceive(p.returned, func(workflow.ReceiveChannel, bool) { p.takeReturned() })
			sel.Select(ctx)
			workload.DrainSignals(ctx, signals)
			p.takeReturned()
		} else {
			sel.Select(ctx)
		}
		p.schedule(ctx)
		p.ShowDetails(ctx)
	}
	if ctx.Err() != nil {
		return temporal.NewCanceledError()
	}
	// Nothing sent to the pool may be lost across generations: take in
	// every signal already delivered, and (at scale) see every grant and
	// yield delivered, before handing the state on.
	if p.atScale {
		if err := p.settle(ctx, signals); err != nil {
			return err
		}
	} else {
		workload.DrainSignals(ctx, signals)
		p.schedule(ctx)
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	next := PoolInput{Config: p.state.Config, Carry: p.state.Carry(workflow.Now(ctx)), Unsent: p.outbox, Counts: p.counts, MaxHistory: p.maxHistory}
	next.Counts.Generation++
	return workflow.NewContinueAsNewError(ctx, workflows.CapacityPoolName, next)
}

// capacityPool is the pool workflow: its admission state, its totals,
// and what it has sent that is not delivered yet.
type capacityPool struct {
	state      *admission.State
	counts     PoolCounts
	maxHistory int
	atScale    bool
	// At scale: outbox holds grants and yields decided and not yet sent,
	// delivering counts those sent and not yet delivered, closing stops
	// sending at the end of a generation, checking says an owner check is
	// under way, and returned wakes the loop when work beside it changed
	// the state.
	outbox     []PoolMessage
	delivering int
	closing    bool
	checking   bool
	returned   workflow.Channel
	// detailsAt is when ShowDetails last refreshed the Web UI's details.
	detailsAt time.Time
}

func newCapacityPool(ctx workflow.Context, in PoolInput, atScale bool) (*capacityPool, error) {
	in.Config.Normalize()
	if err := in.Config.Validate(); err != nil {
		return nil, temporal.NewNonRetryableApplicationError("invalid pools file: "+err.Error(), "InvalidPoolConfig", nil)
	}
	p := &capacityPool{counts: in.Counts, maxHistory: in.MaxHistory, atScale: atScale, outbox: in.Unsent, returned: workflow.NewChannel(ctx)}
	switch {
	case in.Carry != nil:
		st, err := in.Carry.State(in.Config)
		if err != nil {
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidPoolCarry", nil)
		}
		p.state = st
	case in.State != nil:
		p.state = in.State
	default:
		p.state = admission.New(in.Config)
	}
	p.state.Rules = admission.OneNodeRules
	if atScale {
		p.state.Rules = admission.GangRules
		if workflow.GetVersion(ctx, poolMovesUnfilledGangsVersion, workflow.DefaultVersion, 1) >= 1 {
			p.state.Rules = admission.UnfilledGangRules
			if workflow.GetVersion(ctx, poolMovesUnfilledRunsVersion, workflow.DefaultVersion, 1) >= 1 {
				p.state.Rules = admission.UnfilledRules
			}
		}
	}
	if p.maxHistory <= 0 {
		p.maxHistory = DefaultPoolMaxHistory
	}
	workflow.GetLogger(ctx).Info("capacity pool open", "generation", p.counts.Generation,
		"base_machines", len(p.state.Nodes), "burst_pools", len(p.state.Config.Burst),
		"waiting", len(p.state.Waiting), "running", len(p.state.Running))
	return p, nil
}

// channels wires each signal of the protocol to its handler. The order is
// fixed, so replays take signals that arrived together in the same order.
func (p *capacityPool) channels(ctx workflow.Context) []workload.SignalHandler {
	log := workflow.GetLogger(ctx)
	ignore := func(what, id string, err error) {
		var nf *admission.NotFoundError
		if err != nil && !errors.As(err, &nf) {
			log.Warn("pool ignored a signal", "signal", what, "id", id, "error", err)
		}
	}
	return []workload.SignalHandler{
		workload.OnSignalOf(ctx, workflows.SignalPoolConfigure, func(ctx workflow.Context, cfg pool.Config) {
			cfg.Normalize()
			if err := cfg.Validate(); err != nil {
				log.Error("pools file refused; keeping the one in force", "error", err)
				return
			}
			p.state.Reconfigure(cfg)
		}),
		workload.OnSignalOf(ctx, workflows.SignalPoolRequest, func(ctx workflow.Context, r admission.Request) {
			p.request(ctx, r)
		}),
		workload.OnSignalOf(ctx, workflows.SignalPoolBind, func(ctx workflow.Context, b workflows.PoolBind) {
			ignore(workflows.SignalPoolBind, b.ID, p.state.BindNode(b.ID, b.Rank, b.Offering))
		}),
		workload.OnSignalOf(ctx, workflows.SignalPoolRelease, func(ctx workflow.Context, ref workflows.PoolRef) {
			p.Release(ref.ID)
		}),
		workload.OnSignalOf(ctx, workflows.SignalPoolYielded, func(ctx workflow.Context, ref workflows.PoolRef) {
			ignore(workflows.SignalPoolYielded, ref.ID, p.state.Requeue(ref.ID, workflow.Now(ctx)))
		}),
		workload.OnSignalOf(ctx, workflows.SignalPoolPriority, func(ctx workflow.Context, pr workflows.PoolPriority) {
			ignore(workflows.SignalPoolPriority, pr.ID, p.state.SetPriority(pr.ID, pr.Priority))
		}),
		workload.OnSignalOf(ctx, workflows.SignalPoolPause, func(ctx workflow.Context, ref workflows.PoolRef) {
			ignore(workflows.SignalPoolPause, ref.ID, p.state.Pause(ref.ID, workflow.Now(ctx)))
		}),
		workload.OnSignalOf(ctx, workflows.SignalPoolResume, func(ctx workflow.Context, ref workflows.PoolRef) {
			ignore(workflows.SignalPoolResume, ref.ID, p.state.Resume(ref.ID, workflow.Now(ctx)))
		}),
		workload.OnSignalOf(ctx, workflows.SignalPoolNode, func(ctx workflow.Context, ch NodeChange) {
			p.nodeChanged(ctx, ch)
		}),
	}
}

// nodeChanged takes a joined machine's new state: a ready one is a base
// machine; the runs on one draining, lost or gone are asked to move
// (from a lost one they recover from their checkpoints).
func (p *capacityPool) nodeChanged(ctx workflow.Context, ch NodeChange) {
	if ch.State == admission.NodeReady && !p.state.Config.Base.Join {
		workflow.GetLogger(ctx).Warn("a machine joined but the pools file lets none join (base.join); nothing is placed on it", "node", ch.Node.Name)
		return
	}
	reason := map[admission.NodeState]string{
		admission.NodeDraining: "base machine " + ch.Node.Name + " is draining",
		admission.NodeLost:     "base machine " + ch.Node.Name + " went silent (node-lost)",
		admission.NodeLeft:     "base machine " + ch.Node.Name + " left the pool",
	}[ch.State]
	for _, a := range p.state.SetJoined(ch.Node, ch.State) {
		p.Yield(ctx, a, reason, "")
	}
}

// request queues a request. One already running is granted again: its
// owner asks only when it holds nothing, so it lost the first grant.
func (p *capacityPool) request(ctx workflow.Context, r admission.Request) {
	if r.Owner == "" {
		r.Owner = r.ID
	}
	err := p.state.Enqueue(r, workflow.Now(ctx))
	var dup *admission.DuplicateError
	switch {
	case errors.As(err, &dup):
		for _, a := range p.state.Running {
			if a.Request.ID == r.ID && !a.Yielding {
				p.grant(ctx, a)
			}
		}
	case err != nil:
		workflow.GetLogger(ctx).Error("request refused", "id", r.ID, "error", err)
	case p.atScale && !p.state.Placeable(r):
		workflow.GetLogger(ctx).Warn("request can never be placed with this pools file; it waits for one that has room for it",
			"id", r.ID, "nodes", r.Resources.NodeCount(), "gpus", r.Resources.GPUs, "tier", r.Tier)
	}
}

// Release gives back what a request holds, or takes it out of the queue.
func (p *capacityPool) Release(id string) {
	if _, err := p.state.Release(id); err == nil {
		return
	}
	_ = p.state.Cancel(id)
}

// schedule admits what fits, asks lower-priority training to yield for
// what does not, moves burst training onto freed base, and takes back
// burst grants gangs did not fill in time.
func (p *capacityPool) schedule(ctx workflow.Context) {
	for {
		now := workflow.Now(ctx)
		granted := p.state.Admit(now, nil)
		if len(granted) == 0 {
			break
		}
		for _, a := range granted {
			r := a.Request
			telemetry.ObserveAdmissionWait(workflow.GetMetricsHandler(ctx), string(r.Kind), string(a.Layer), now.Sub(r.EnqueuedAt)-r.PausedFor)
			p.grant(ctx, a)
		}
	}
	p.preempt(ctx)
	for _, a := range p.state.Moves() {
		p.counts.Moves++
		p.Yield(ctx, a, "moving to base capacity that came free: burst is given back first", "")
	}
	for _, a := range p.state.Unready(workflow.Now(ctx)) {
		bound := 0
		for _, n := range a.Nodes {
			if n.Bound {
				bound++
			}
		}
		p.Yield(ctx, a, fmt.Sprintf("gang acquired %d of its %d nodes within %s: the grant goes back and the gang is requeued",
			bound, a.NodeCount(), p.state.Config.GangTimeoutOrDefault()), "")
	}
}

// preempt asks lower-priority training to yield for what Admit could not
// place. At scale one pass claims room request by request; before, each
// request counted capacity already yielding as its own.
func (p *capacityPool) preempt(ctx workflow.Context) {
	reason := func(r admission.Request) string {
		return fmt.Sprintf("preempted for %s (priority %d)", r.ID, r.Priority)
	}
	if p.atScale {
		for _, pr := range p.state.Preempt(workflow.Now(ctx), nil) {
			p.counts.Preemptions++
			p.Yield(ctx, pr.Victim, reason(pr.For), pr.For.ID)
		}
		return
	}
	// Each yield waits for its delivery, so time moves on between requests.
	for _, r := range p.state.Queue(workflow.Now(ctx)) {
		if r.Paused {
			continue
		}
		victims, ok := p.state.Victims(r, nil, workflow.Now(ctx))
		if !ok {
			continue
		}
		for _, v := range victims {
			p.counts.Preemptions++
			p.Yield(ctx, v, reason(r), r.ID)
		}
	}
}

// takeReturned takes every wake-up work beside the loop sent.
func (p *capacityPool) takeReturned() {
	var changed bool
	for p.returned.ReceiveAsync(&changed) {
	}
}

// releaseIf releases id if it is still the request of that sequence
// number: a request given back and made again since is a new one.
func (p *capacityPool) releaseIf(id string, seq int64) {
	for _, a := range p.state.Running {
		if a.Request.ID == id && a.Request.Seq == seq {
			p.Release(id)
			return
		}
	}
	for _, r := range p.state.Waiting {
		if r.ID == id && r.Seq == seq {
			p.Release(id)
			return
		}
	}
}

// settle waits until every grant and yield sent is delivered (the
// server delivers none a closed run sent), taking in signals meanwhile
// but deciding and sending nothing more: what is left unsent goes to the
// next generation, which sends it and decides first thing. So under a
// steady stream of signals a generation still ends, within the time the
// send window takes to deliver. An owner check under way is left behind;
// the next generation checks again.
func (p *capacityPool) settle(ctx workflow.Context, signals []workload.SignalHandler) error {
	pending := func() bool {
		for _, h := range signals {
			if h.Ch.Len() > 0 {
				return true
			}
		}
		return p.returned.Len() > 0
	}
	p.closing = true
	for {
		workload.DrainSignals(ctx, signals)
		p.takeReturned()
		if p.delivering == 0 {
			return nil
		}
		if err := workflow.Await(ctx, func() bool { return p.delivering == 0 || pending() }); err != nil {
			return err
		}
	}
}

// checkOwners gives back what owners that ended without saying so
// (terminated, or failed past their cleanup) still hold or wait for. At
// scale the check runs beside the pool, which goes on taking signals
// (one check at a time); what it finds is released only if the owner has
// not asked anew since.
func (p *capacityPool) checkOwners(ctx workflow.Context) {
	if p.checking {
		return
	}
	type held struct {
		id  string
		seq int64
	}
	byOwner := map[string][]held{}
	var owners []string
	add := func(owner, id string, seq int64) {
		if _, ok := byOwner[owner]; !ok {
			owners = append(owners, owner)
		}
		byOwner[owner] = append(byOwner[owner], held{id, seq})
	}
	for _, r := range p.state.Waiting {
		add(r.Owner, r.ID, r.Seq)
	}
	for _, a := range p.state.Running {
		add(a.Request.Owner, a.Request.ID, a.Request.Seq)
	}
	if len(owners) == 0 {
		return
	}
	actx := workload.Titled(workload.ControlOptions(ctx), "which of "+strconv.Itoa(len(owners))+" holders ended?")
	f := workflow.ExecuteActivity(actx, activities.EndedWorkflowsName, owners)
	apply := func(ctx workflow.Context) bool {
		var gone []string
		if err := f.Get(ctx, &gone); err != nil {
			workflow.GetLogger(ctx).Warn("cannot check the pool's holders", "error", err)
			return false
		}
		for _, owner := range gone {
			for _, h := range byOwner[owner] {
				workflow.GetLogger(ctx).Info("releasing capacity of an ended holder", "id", h.id, "owner", owner)
				p.releaseIf(h.id, h.seq)
			}
		}
		return len(gone) > 0
	}
	if !p.atScale {
		apply(ctx)
		return
	}
	p.checking = true
	workflow.Go(ctx, func(ctx workflow.Context) {
		released := apply(ctx)
		p.checking = false
		if released {
			p.returned.Send(ctx, true)
		}
	})
}

// tooLong reports whether this generation's history should end.
func (p *capacityPool) tooLong(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= p.maxHistory
}

func (p *capacityPool) Status(ctx workflow.Context) Status {
	now := workflow.Now(ctx)
	s := p.state
	st := Status{Waiting: []QueuedRequest{}, Running: s.Running, Preemptions: p.counts.Preemptions, Moves: p.counts.Moves,
		Generation: p.counts.Generation, History: int64(workflow.GetInfo(ctx).GetCurrentHistoryLength()), Delivering: p.delivering, Unsent: len(p.outbox)}
	if st.Running == nil {
		st.Running = []admission.Allocation{}
	}
	for _, r := range s.Queue(now) {
		st.Waiting = append(st.Waiting, QueuedRequest{Request: r, EffectivePriority: s.Effective(r, now)})
	}
	used := 0
	for _, a := range s.Running {
		if a.Layer == admission.BaseLayer {
			st.Base += a.NodeCount()
			used += a.GPUs() * a.NodeCount()
		} else {
			st.Burst += a.NodeCount()
		}
	}
	for _, n := range s.Nodes {
		st.BaseGPUs += n.GPUs
	}
	st.FreeBaseGPUs = st.BaseGPUs - used
	explainWaits(s, st)
	return st
}
