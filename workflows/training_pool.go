package workflows

import (
	"strconv"
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/capacity"
)

// AdmissionStatus is a run's place with the capacity pool.
type AdmissionStatus struct {
	// Queued is set while the run waits for the pool to admit it.
	Queued bool `json:"queued"`
	// Layer, Node and Pool say what the pool granted: a base machine, or a
	// burst pool.
	Layer     string     `json:"layer,omitempty"`
	Node      string     `json:"node,omitempty"`
	Pool      string     `json:"pool,omitempty"`
	Yields    int        `json:"yields"`
	LastYield *YieldInfo `json:"last_yield,omitempty"`
	// Waiting says why a gang waits on its burst grant: what it needs,
	// and when the pool takes the grant back if the market has not
	// filled it ("needs 2 spot nodes in one zone; gives the grant back at
	// 14:20 UTC"). The pool moves it to base machines as soon as enough
	// are free.
	Waiting string `json:"waiting,omitempty"`
}

// YieldInfo describes the latest time the run gave its capacity back to
// the pool: it checkpointed, released its instance and was requeued.
type YieldInfo struct {
	Time           time.Time `json:"time"`
	Reason         string    `json:"reason"`
	For            string    `json:"for,omitempty"`
	AtStep         int64     `json:"at_step"`
	CheckpointStep int64     `json:"checkpoint_step"`
}

// poolGrant is the market of a run that goes through the capacity pool:
// the pool admits it, grants it a base machine or a burst pool, and may
// ask for the grant back (a yield) for a higher priority or to move the
// run onto base capacity that came free. The pool decides where its runs
// go, so they neither wait for spot nor move back to it on their own.
type poolGrant struct{}

// joinPool asks the capacity pool to queue the run, and reports whether
// it did. Without a pool (the signal finds no such workflow) the run
// acquires on its own.
func (r *run) joinPool(ctx workflow.Context) bool {
	if workflow.GetVersion(ctx, capacityPoolVersion, workflow.DefaultVersion, 1) < 1 {
		return false
	}
	r.Pool = &PoolPlace{Place: PlaceLeft}
	if err := r.requestCapacity(ctx); err != nil {
		workflow.GetLogger(ctx).Info("no capacity pool; acquiring directly", "reason", err.Error())
		r.Pool = nil
		return false
	}
	r.PoolYields = &PoolYields{}
	return true
}

// requestCapacity queues the run's request with the pool.
func (r *run) requestCapacity(ctx workflow.Context) error {
	req := admission.Request{
		ID: r.id, Kind: admission.Training, Owner: r.id, Team: r.spec.Team,
		Priority: r.Priority, Tier: r.spec.Tier, Resources: r.spec.Resources,
	}
	if err := workflow.SignalExternalWorkflow(ctx, PoolWorkflowID, "", SignalPoolRequest, req).Get(ctx, nil); err != nil {
		return err
	}
	r.Pool.Place = PlaceQueued
	return nil
}

// admit waits until the pool grants the run capacity. A paused run
// gives its place back and waits; a pause while queued holds the
// request in the queue instead, and resuming lets it be admitted.
func (poolGrant) admit(ctx workflow.Context, r *run) error {
	if err := r.holdWhilePaused(ctx); err != nil {
		return err
	}
	if r.Pool.Place == PlaceYielding {
		r.yielded(ctx)
	}
	p := r.Pool
	if p.Place == PlaceGranted {
		return nil
	}
	if p.Place == PlaceLeft {
		if err := r.requestCapacity(ctx); err != nil {
			return err
		}
	}
	r.enter(ctx, StateQueued)
	for p.Place != PlaceGranted {
		if r.Paused != (p.Place == PlaceHeld) {
			signal := SignalPoolResume
			if r.Paused {
				signal = SignalPoolPause
				r.enter(ctx, StatePaused)
				p.Place = PlaceHeld
			} else {
				r.enter(ctx, StateQueued)
				p.Place = PlaceQueued
			}
			r.tellPool(ctx, signal, PoolRef{ID: r.id})
		}
		if err := workflow.Await(ctx, func() bool { return p.Place == PlaceGranted || r.Paused != (p.Place == PlaceHeld) }); err != nil {
			return err
		}
	}
	return nil
}

// next is what the grant allows: the base machine, or the run's own
// offerings within the burst pool's (the pool's list when the two do
// not meet), in the tier's order.
func (poolGrant) next(ctx workflow.Context, r *run) (*ask, error) {
	if r.mustStop(ctx) != goOn {
		return nil, nil
	}
	g := r.Pool.Grant
	if g == nil {
		return nil, nil // the grant went back meanwhile: admitted again first
	}
	if g.Layer == admission.BaseLayer {
		a := r.askFor(g.Offerings)
		a.layer, a.node, a.pool = admission.BaseLayer, g.Node, g.Pool
		return a, nil
	}
	a := r.askFor(capacity.Order(capacity.Within(r.Offerings, g.Offerings), r.spec.Tier, r.AvoidZone))
	a.pool = g.Pool
	return a, nil
}

// acquired tells the pool which burst offering the run got.
func (poolGrant) acquired(ctx workflow.Context, r *run, l *Lease) {
	if g := r.Pool.Grant; g != nil && g.Layer == admission.BurstLayer {
		r.tellPool(ctx, SignalPoolBind, PoolBind{ID: r.id, Offering: l.Offering()})
	}
}

// failed: what the grant allows may come back; what never can ends
// the run.
func (poolGrant) failed(ctx workflow.Context, r *run, a ask, details []activities.FailureDetail, backoff *time.Duration) (bool, error) {
	if permanent(details) {
		return false, cannotAcquire("no offering can ever be acquired", details)
	}
	r.Pool.Why = r.grantWhy(a)
	return r.backOff(ctx, details, backoff)
}

// oneMarket is the market every offering is sold on, if they share one.
func oneMarket(offerings []capacity.Offering) (capacity.Market, bool) {
	if len(offerings) == 0 {
		return "", false
	}
	for _, o := range offerings[1:] {
		if o.Market != offerings[0].Market {
			return "", false
		}
	}
	return offerings[0].Market, true
}

// grantWhy says why a gang waits on a burst grant: the nodes it needs at
// once, of which market and where, and when the pool takes the grant
// back; "" for anything else.
func (r *run) grantWhy(a ask) string {
	g := r.Pool.Grant
	if g == nil || g.Layer != admission.BurstLayer || r.nodes() < 2 {
		return ""
	}
	why := "needs " + strconv.Itoa(r.nodes())
	if m, ok := oneMarket(a.offerings); ok {
		why += " " + string(m)
	}
	why += " nodes"
	if r.spec.Resources.OneZone() {
		why += " in one zone"
	}
	if !g.GiveBackAt.IsZero() {
		why += "; gives the grant back at " + g.GiveBackAt.UTC().Format("15:04") + " UTC"
	}
	return why
}

func (poolGrant) ended(attemptEnd, []nodeEnd, bool) *marketEnd { return nil }

// widthToAcquire: the pool grants a gang whole.
func (poolGrant) widthToAcquire(r *run) int { return r.nodes() }

// shrinks: a gang granted by the pool is given back whole and placed
// again.
func (poolGrant) shrinks() bool { return false }

// defersRelease: the pool counts what its runs hold.
func (poolGrant) defersRelease() bool  { return false }
func (poolGrant) continuesAsNew() bool { return true }

func (poolGrant) status(*run) (*MarketStatus, string) { return nil, "" }

// watch: the pool moves its runs by asking them to yield.
func (poolGrant) watch(ctx workflow.Context, r *run) move {
	end, err := r.awaitAttempt(ctx)
	return move{end: end, err: err}
}

// onGranted records what the pool granted. A grant for a request the
// run withdrew is ignored: the pool heard of the withdrawal.
func (r *run) onGranted(a admission.Allocation) {
	if r.Pool == nil || a.Request.ID != r.id || r.Pool.Place == PlaceLeft {
		return
	}
	r.Pool.Grant, r.Pool.Place, r.Pool.Why = &a, PlaceGranted, ""
}

// onYield asks the run to give its capacity back: the trainer stops at a
// checkpoint, and the loop releases the instance and requeues.
func (r *run) onYield(y YieldRequest) {
	if r.Pool == nil || r.Pool.Grant == nil || r.finished {
		return
	}
	r.Pool.Place, r.Pool.Yield = PlaceYielding, &y
	if r.attempt != nil {
		r.attempt.stop()
	}
}

// yieldAsked reports whether the pool asked for the run's grant back.
func (r *run) yieldAsked() bool { return r.Pool != nil && r.Pool.Place == PlaceYielding }

// yielded completes a yield once the instance is given back: the pool
// requeues the run, which resumes from its checkpoint when granted again.
func (r *run) yielded(ctx workflow.Context) {
	y := r.Pool.Yield
	info := &YieldInfo{Time: workflow.Now(ctx), Reason: y.Reason, For: y.For, AtStep: r.Step}
	if c := r.LastCheckpoint; c != nil {
		info.CheckpointStep = c.Step
	}
	r.PoolYields.Yields++
	r.PoolYields.LastYield = info
	r.Pool.Place, r.Pool.Grant, r.Pool.Yield, r.Pool.Why = PlaceQueued, nil, nil, ""
	r.Recovery = &Recovery{Since: info.Time} // the next instance resumes from the checkpoint: status shows it as a recovery
	workflow.GetLogger(ctx).Info("yielded capacity to the pool", "reason", y.Reason, "for", y.For, "step", info.AtStep, "checkpoint", info.CheckpointStep)
	r.tellPool(ctx, SignalPoolYielded, PoolRef{ID: r.id})
}

// holdWhilePaused blocks, holding nothing, while the run is paused or
// has spent its budget (which, holding nothing, it spends no more of).
func (r *run) holdWhilePaused(ctx workflow.Context) error {
	for {
		switch r.mustStop(ctx, stopYield) {
		case stopPause:
			r.leavePool(ctx) // a paused run holds no capacity; it asks again on resume
			r.enter(ctx, StatePaused)
			if err := workflow.Await(ctx, func() bool { return !r.Paused }); err != nil {
				return err
			}
		case stopBudget:
			r.leavePool(ctx)
			r.enter(ctx, StateOverBudget)
			_ = workflow.UpsertTypedSearchAttributes(ctx, AttrCostUSD.ValueSet(r.Ledger.CostUSD(workflow.Now(ctx))))
			if err := workflow.Await(ctx, func() bool { return r.Paused || !r.overBudget(workflow.Now(ctx)) }); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// leavePool gives the run's request or grant back for good.
func (r *run) leavePool(ctx workflow.Context) {
	if r.Pool == nil || r.Pool.Place == PlaceLeft {
		return
	}
	r.Pool.Place, r.Pool.Grant, r.Pool.Yield = PlaceLeft, nil, nil
	r.tellPool(ctx, SignalPoolRelease, PoolRef{ID: r.id})
}

// admissionStatus is the run's place with the pool as status shows it:
// the yields it counts, and what it holds from its grant.
func (r *run) admissionStatus() *AdmissionStatus {
	y := r.PoolYields
	if y == nil {
		return nil
	}
	a := AdmissionStatus{Yields: y.Yields, LastYield: y.LastYield}
	a.Queued = r.Pool != nil && (r.Pool.Place == PlaceQueued || r.Pool.Place == PlaceHeld)
	if r.Pool != nil && r.Pool.Grant != nil {
		g := r.Pool.Grant
		a.Layer, a.Node, a.Pool = string(g.Layer), g.Node, g.Pool
		if r.Lease == nil {
			a.Waiting = r.Pool.Why
		}
	}
	return &a
}

// tellPool signals the pool; a pool that is gone is logged, not fatal:
// the run goes on with what it holds.
func (r *run) tellPool(ctx workflow.Context, name string, arg any) {
	if err := workflow.SignalExternalWorkflow(ctx, PoolWorkflowID, "", name, arg).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("capacity pool not told", "signal", name, "error", err)
	}
}
