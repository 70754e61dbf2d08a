package workflows

import (
	"strconv"
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/capacity"
)

// AdmissionStatus is a workload's place with the capacity pool.
type AdmissionStatus struct {
	// Queued is set while the workload waits for the pool to admit it.
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

// YieldInfo describes the latest time the workload gave its capacity back to
// the pool: it checkpointed, released its instance and was requeued.
type YieldInfo struct {
	Time           time.Time `json:"time"`
	Reason         string    `json:"reason"`
	For            string    `json:"for,omitempty"`
	AtStep         int64     `json:"at_step"`
	CheckpointStep int64     `json:"checkpoint_step"`
}

// poolGrant is the market of a workload that goes through the capacity
// pool: the pool admits it, grants it a base machine or a burst pool,
// and may ask for the grant back (a yield) for a higher priority or to
// move the workload onto base capacity that came free. The pool decides
// where its workloads go, so they neither wait for spot nor move back to
// it on their own.
type poolGrant struct{}

// seat is a workload's place with the capacity pool (Holding.Pool): its
// request, its grant, a yield the pool asked for.
type seat struct{ w *workload }

func (w *workload) seat() seat { return seat{w} }

// join asks the capacity pool to queue the workload, and reports whether
// it did. Without a pool (the signal finds no such workflow) the
// workload acquires on its own.
func (s seat) join(ctx workflow.Context) bool {
	w := s.w
	if workflow.GetVersion(ctx, capacityPoolVersion, workflow.DefaultVersion, 1) < 1 {
		return false
	}
	w.h.Pool = &PoolPlace{Place: PlaceLeft}
	if err := s.request(ctx); err != nil {
		workflow.GetLogger(ctx).Info("no capacity pool; acquiring directly", "reason", err.Error())
		w.h.Pool = nil
		return false
	}
	w.rec.PoolYields = &PoolYields{}
	return true
}

// request queues the workload's request with the pool.
func (s seat) request(ctx workflow.Context) error {
	w := s.w
	req := admission.Request{
		ID: w.id, Kind: w.kind, Owner: w.id, Team: w.spec.Team,
		Priority: w.host.priority(), Tier: w.spec.Tier, Resources: w.spec.Resources,
	}
	if err := workflow.SignalExternalWorkflow(ctx, PoolWorkflowID, "", SignalPoolRequest, req).Get(ctx, nil); err != nil {
		return err
	}
	w.h.Pool.Place = PlaceQueued
	return nil
}

// admit waits until the pool grants the workload capacity. A paused
// workload gives its place back and waits; a pause while queued holds
// the request in the queue instead, and resuming lets it be admitted.
func (poolGrant) admit(ctx workflow.Context, w *workload) error {
	if err := w.host.holdWhilePaused(ctx); err != nil {
		return err
	}
	s := w.seat()
	if w.h.Pool.Place == PlaceYielding {
		s.yielded(ctx)
	}
	p := w.h.Pool
	if p.Place == PlaceGranted {
		return nil
	}
	if p.Place == PlaceLeft {
		if err := s.request(ctx); err != nil {
			return err
		}
	}
	w.host.enter(ctx, StateQueued)
	for p.Place != PlaceGranted {
		if paused := w.host.paused(); paused != (p.Place == PlaceHeld) {
			signal := SignalPoolResume
			if paused {
				signal = SignalPoolPause
				w.host.enter(ctx, StatePaused)
				p.Place = PlaceHeld
			} else {
				w.host.enter(ctx, StateQueued)
				p.Place = PlaceQueued
			}
			s.tell(ctx, signal, PoolRef{ID: w.id})
		}
		if err := workflow.Await(ctx, func() bool {
			return p.Place == PlaceGranted || w.host.paused() != (p.Place == PlaceHeld) || w.host.ending()
		}); err != nil {
			return err
		}
		if w.host.ending() {
			return nil
		}
	}
	return nil
}

// next is what the grant allows: the base machine, or the workload's own
// offerings within the burst pool's (the pool's list when the two do
// not meet), in the tier's order.
func (poolGrant) next(ctx workflow.Context, w *workload) (*ask, error) {
	if w.host.mustStop(ctx) != goOn {
		return nil, nil
	}
	g := w.h.Pool.Grant
	if g == nil {
		return nil, nil // the grant went back meanwhile: admitted again first
	}
	if g.Layer == admission.BaseLayer {
		a := w.askFor(g.Offerings)
		a.layer, a.node, a.pool = admission.BaseLayer, g.Node, g.Pool
		return a, nil
	}
	a := w.askFor(capacity.Order(capacity.Within(w.h.Offerings, g.Offerings), w.spec.Tier, w.h.AvoidZone))
	a.pool = g.Pool
	return a, nil
}

// acquired tells the pool which burst offering each rank got.
func (poolGrant) acquired(ctx workflow.Context, w *workload, l *Lease, rank int) {
	if g := w.h.Pool.Grant; g != nil && g.Layer == admission.BurstLayer {
		w.seat().tell(ctx, SignalPoolBind, PoolBind{ID: w.id, Offering: l.Offering(), Rank: rank})
	}
}

// failed: what the grant allows may come back; what never can ends
// the workload.
func (poolGrant) failed(ctx workflow.Context, w *workload, a ask, details []activities.FailureDetail, backoff *time.Duration) (bool, error) {
	if permanent(details) {
		return false, cannotAcquire("no offering can ever be acquired", details)
	}
	w.h.Pool.Why = w.seat().grantWhy(a)
	return w.backOff(ctx, details, backoff)
}

// watch: the pool moves its workloads by asking them to yield.
func (poolGrant) watch(ctx workflow.Context, _ *workload, a *attempt) move {
	end, err := a.await(ctx)
	return move{end: end, err: err}
}

func (poolGrant) ended(attemptEnd, []nodeEnd, bool) *marketEnd { return nil }

// widthToAcquire: the pool grants a gang whole.
func (poolGrant) widthToAcquire(w *workload) int { return w.nodes() }

// shrinks: a gang granted by the pool is given back whole and placed
// again.
func (poolGrant) shrinks() bool { return false }

// defersRelease: the pool counts what its workloads hold.
func (poolGrant) defersRelease() bool             { return false }
func (poolGrant) continuesAsNew() bool            { return true }
func (poolGrant) status() (*MarketStatus, string) { return nil, "" }

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
func (s seat) grantWhy(a ask) string {
	w := s.w
	g := w.h.Pool.Grant
	if g == nil || g.Layer != admission.BurstLayer || w.nodes() < 2 {
		return ""
	}
	why := "needs " + strconv.Itoa(w.nodes())
	if m, ok := oneMarket(a.offerings); ok {
		why += " " + string(m)
	}
	why += " nodes"
	if w.spec.Resources.OneZone() {
		why += " in one zone"
	}
	if !g.GiveBackAt.IsZero() {
		why += "; gives the grant back at " + g.GiveBackAt.UTC().Format("15:04") + " UTC"
	}
	return why
}

// granted records what the pool granted. A grant for a request the
// workload withdrew is ignored: the pool heard of the withdrawal.
func (s seat) granted(a admission.Allocation) {
	p := s.w.h.Pool
	if p == nil || a.Request.ID != s.w.id || p.Place == PlaceLeft {
		return
	}
	p.Grant, p.Place, p.Why = &a, PlaceGranted, ""
}

// yield asks the workload to give its capacity back: the agent stops at a
// checkpoint, and the workload releases the instance and requeues.
// Nothing is asked of a workload that holds no grant or is done.
func (s seat) yield(y YieldRequest, done bool) {
	p := s.w.h.Pool
	if p == nil || p.Grant == nil || done {
		return
	}
	p.Place, p.Yield = PlaceYielding, &y
	if a := s.w.attempt; a != nil {
		a.stop()
	}
}

// yieldAsked reports whether the pool asked for the workload's grant back.
func (s seat) yieldAsked() bool { return s.w.h.Pool != nil && s.w.h.Pool.Place == PlaceYielding }

// yielded completes a yield once the instance is given back: the pool
// requeues the workload, which resumes from its checkpoint when granted
// again; status shows that as a recovery.
func (s seat) yielded(ctx workflow.Context) {
	w := s.w
	p := w.h.Pool
	y := p.Yield
	info := &YieldInfo{Time: workflow.Now(ctx), Reason: y.Reason, For: y.For, AtStep: w.rec.Step}
	if c := w.rec.LastCheckpoint; c != nil {
		info.CheckpointStep = c.Step
	}
	w.rec.PoolYields.Yields++
	w.rec.PoolYields.LastYield = info
	p.Place, p.Grant, p.Yield, p.Why = PlaceQueued, nil, nil, ""
	w.recovery().begin(info.Time)
	workflow.GetLogger(ctx).Info("yielded capacity to the pool", "reason", y.Reason, "for", y.For, "step", info.AtStep, "checkpoint", info.CheckpointStep)
	s.tell(ctx, SignalPoolYielded, PoolRef{ID: w.id})
}

// leave gives the workload's request or grant back for good.
func (s seat) leave(ctx workflow.Context) {
	p := s.w.h.Pool
	if p == nil || p.Place == PlaceLeft {
		return
	}
	p.Place, p.Grant, p.Yield = PlaceLeft, nil, nil
	s.tell(ctx, SignalPoolRelease, PoolRef{ID: s.w.id})
}

// priority tells the pool the workload's new priority, while it holds a
// place there.
func (s seat) priority(ctx workflow.Context, priority int) {
	if p := s.w.h.Pool; p != nil && p.Place != PlaceLeft {
		s.tell(ctx, SignalPoolPriority, PoolPriority{ID: s.w.id, Priority: priority})
	}
}

// admission is the workload's place with the pool as status shows it:
// the yields it counts, and what it holds from its grant.
func (s seat) admission() *AdmissionStatus {
	w := s.w
	y := w.rec.PoolYields
	if y == nil {
		return nil
	}
	a := AdmissionStatus{Yields: y.Yields, LastYield: y.LastYield}
	p := w.h.Pool
	a.Queued = p != nil && (p.Place == PlaceQueued || p.Place == PlaceHeld)
	if p != nil && p.Grant != nil {
		g := p.Grant
		a.Layer, a.Node, a.Pool = string(g.Layer), g.Node, g.Pool
		if w.h.Lease == nil {
			a.Waiting = p.Why
		}
	}
	return &a
}

// tell signals the pool; a pool that is gone is logged, not fatal: the
// workload goes on with what it holds.
func (s seat) tell(ctx workflow.Context, name string, arg any) {
	if err := workflow.SignalExternalWorkflow(ctx, PoolWorkflowID, "", name, arg).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("capacity pool not told", "signal", name, "error", err)
	}
}
