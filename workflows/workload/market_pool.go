package workload

import (
	"strconv"
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/capacity"
	"refuel/workflows"
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

// PoolGrant is the market of a workload that goes through the capacity
// pool: the pool admits it, grants it a base machine or a burst pool,
// and may ask for the grant back (a yield) for a higher priority or to
// move the workload onto base capacity that came free. The pool decides
// where its workloads go, so they neither wait for spot nor move back to
// it on their own.
type PoolGrant struct{}

// seat is a workload's place with the capacity pool (Holding.Pool): its
// request, its grant, a yield the pool asked for.
type seat struct{ w *Workload }

func (w *Workload) Seat() seat { return seat{w} }

// Join asks the capacity pool to queue the workload, and reports whether
// it did. Without a pool (the signal finds no such workflow) the
// workload acquires on its own.
func (s seat) Join(ctx workflow.Context) bool {
	w := s.w
	if workflow.GetVersion(ctx, capacityPoolVersion, workflow.DefaultVersion, 1) < 1 {
		return false
	}
	w.Held.Pool = &PoolPlace{Place: PlaceLeft}
	if err := s.request(ctx); err != nil {
		workflow.GetLogger(ctx).Info("no capacity pool; acquiring directly", "reason", err.Error())
		w.Held.Pool = nil
		return false
	}
	w.Counts.PoolYields = &PoolYields{}
	return true
}

// request queues the workload's request with the pool.
func (s seat) request(ctx workflow.Context) error {
	w := s.w
	req := admission.Request{
		ID: w.WorkflowID, Kind: w.Kind, Owner: w.WorkflowID, Team: w.Spec.Team,
		Priority: w.Host.CurrentPriority(), Tier: w.Spec.Tier, Resources: w.Spec.Resources,
	}
	if err := workflow.SignalExternalWorkflow(ctx, workflows.PoolWorkflowID, "", workflows.SignalPoolRequest, req).Get(ctx, nil); err != nil {
		return err
	}
	w.Held.Pool.Place = PlaceQueued
	return nil
}

// Admit waits until the pool grants the workload capacity. A paused
// workload gives its place back and waits; a pause while queued holds
// the request in the queue instead, and resuming lets it be admitted.
func (PoolGrant) Admit(ctx workflow.Context, w *Workload) error {
	if err := w.Host.HoldWhilePaused(ctx); err != nil {
		return err
	}
	s := w.Seat()
	if w.Held.Pool.Place == PlaceYielding {
		s.yielded(ctx)
	}
	p := w.Held.Pool
	if p.Place == PlaceGranted {
		return nil
	}
	if p.Place == PlaceLeft {
		if err := s.request(ctx); err != nil {
			return err
		}
	}
	w.Host.Enter(ctx, workflows.StateQueued)
	for p.Place != PlaceGranted {
		if paused := w.Host.OnHold(); paused != (p.Place == PlaceHeld) {
			signal := workflows.SignalPoolResume
			if paused {
				signal = workflows.SignalPoolPause
				w.Host.Enter(ctx, workflows.StatePaused)
				p.Place = PlaceHeld
			} else {
				w.Host.Enter(ctx, workflows.StateQueued)
				p.Place = PlaceQueued
			}
			s.tell(ctx, signal, workflows.PoolRef{ID: w.WorkflowID})
		}
		if err := workflow.Await(ctx, func() bool {
			return p.Place == PlaceGranted || w.Host.OnHold() != (p.Place == PlaceHeld) || w.Host.Ending()
		}); err != nil {
			return err
		}
		if w.Host.Ending() {
			return nil
		}
	}
	return nil
}

// Next is what the grant allows: the base machine, or the workload's own
// offerings within the burst pool's (the pool's list when the two do
// not meet), in the tier's order.
func (PoolGrant) Next(ctx workflow.Context, w *Workload) (*Ask, error) {
	if w.Host.MustStop(ctx) != GoOn {
		return nil, nil
	}
	g := w.Held.Pool.Grant
	if g == nil {
		return nil, nil // the grant went back meanwhile: admitted again first
	}
	if g.Layer == admission.BaseLayer {
		a := w.AskFor(g.Offerings)
		a.Layer, a.Node, a.Pool = admission.BaseLayer, g.Node, g.Pool
		return a, nil
	}
	a := w.AskFor(capacity.Order(capacity.Within(w.Held.Offerings, g.Offerings), w.Spec.Tier, w.Held.AvoidZone))
	a.Pool = g.Pool
	return a, nil
}

// Acquired tells the pool which burst offering each rank got.
func (PoolGrant) Acquired(ctx workflow.Context, w *Workload, l *Lease, rank int) {
	if g := w.Held.Pool.Grant; g != nil && g.Layer == admission.BurstLayer {
		w.Seat().tell(ctx, workflows.SignalPoolBind, workflows.PoolBind{ID: w.WorkflowID, Offering: l.Offering(), Rank: rank})
	}
}

// Failed: what the grant allows may come back; what never can ends
// the workload.
func (PoolGrant) Failed(ctx workflow.Context, w *Workload, a Ask, details []activities.FailureDetail, backoff *time.Duration) (bool, error) {
	if Permanent(details) {
		return false, CannotAcquire("no offering can ever be acquired", details)
	}
	w.Held.Pool.Why = w.Seat().GrantWhy(a)
	return w.backOff(ctx, details, backoff)
}

// Watch: the pool moves its workloads by asking them to yield.
func (PoolGrant) Watch(ctx workflow.Context, _ *Workload, a *Attempt) Move {
	end, err := a.await(ctx)
	return Move{End: end, Err: err}
}

func (PoolGrant) Ended(AttemptEnd, []NodeEnd, bool) *MarketEnd { return nil }

// WidthToAcquire: the pool grants a gang whole.
func (PoolGrant) WidthToAcquire(w *Workload) int { return w.Nodes() }

// Shrinks: a gang granted by the pool is given back whole and placed
// again.
func (PoolGrant) Shrinks() bool { return false }

// DefersRelease: the pool counts what its workloads hold.
func (PoolGrant) DefersRelease() bool             { return false }
func (PoolGrant) ContinuesAsNew() bool            { return true }
func (PoolGrant) Status() (*MarketStatus, string) { return nil, "" }

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

// GrantWhy says why a gang waits on a burst grant: the nodes it needs at
// once, of which market and where, and when the pool takes the grant
// back; "" for anything else.
func (s seat) GrantWhy(a Ask) string {
	w := s.w
	g := w.Held.Pool.Grant
	if g == nil || g.Layer != admission.BurstLayer || w.Nodes() < 2 {
		return ""
	}
	why := "needs " + strconv.Itoa(w.Nodes())
	if m, ok := oneMarket(a.Offerings); ok {
		why += " " + string(m)
	}
	why += " nodes"
	if w.Spec.Resources.OneZone() {
		why += " in one zone"
	}
	if !g.GiveBackAt.IsZero() {
		why += "; gives the grant back at " + g.GiveBackAt.UTC().Format("15:04") + " UTC"
	}
	return why
}

// Granted records what the pool granted. A grant for a request the
// workload withdrew is ignored: the pool heard of the withdrawal.
func (s seat) Granted(a admission.Allocation) {
	p := s.w.Held.Pool
	if p == nil || a.Request.ID != s.w.WorkflowID || p.Place == PlaceLeft {
		return
	}
	p.Grant, p.Place, p.Why = &a, PlaceGranted, ""
}

// Yield asks the workload to give its capacity back: the agent stops at a
// checkpoint, and the workload releases the instance and requeues.
// Nothing is asked of a workload that holds no grant or is done.
func (s seat) Yield(y workflows.YieldRequest, done bool) {
	p := s.w.Held.Pool
	if p == nil || p.Grant == nil || done {
		return
	}
	p.Place, p.Yield = PlaceYielding, &y
	if a := s.w.Attempt; a != nil {
		a.Stop()
	}
}

// YieldAsked reports whether the pool asked for the workload's grant back.
func (s seat) YieldAsked() bool { return s.w.Held.Pool != nil && s.w.Held.Pool.Place == PlaceYielding }

// yielded completes a yield once the instance is given back: the pool
// requeues the workload, which resumes from its checkpoint when granted
// again; status shows that as a recovery.
func (s seat) yielded(ctx workflow.Context) {
	w := s.w
	p := w.Held.Pool
	y := p.Yield
	info := &YieldInfo{Time: workflow.Now(ctx), Reason: y.Reason, For: y.For, AtStep: w.Counts.Step}
	if c := w.Counts.LastCheckpoint; c != nil {
		info.CheckpointStep = c.Step
	}
	w.Counts.PoolYields.Yields++
	w.Counts.PoolYields.LastYield = info
	p.Place, p.Grant, p.Yield, p.Why = PlaceQueued, nil, nil, ""
	w.Recover().begin(info.Time)
	workflow.GetLogger(ctx).Info("yielded capacity to the pool", "reason", y.Reason, "for", y.For, "step", info.AtStep, "checkpoint", info.CheckpointStep)
	s.tell(ctx, workflows.SignalPoolYielded, workflows.PoolRef{ID: w.WorkflowID})
}

// Leave gives the workload's request or grant back for good.
func (s seat) Leave(ctx workflow.Context) {
	p := s.w.Held.Pool
	if p == nil || p.Place == PlaceLeft {
		return
	}
	p.Place, p.Grant, p.Yield = PlaceLeft, nil, nil
	s.tell(ctx, workflows.SignalPoolRelease, workflows.PoolRef{ID: s.w.WorkflowID})
}

// CurrentPriority tells the pool the workload's new priority, while it holds a
// place there.
func (s seat) CurrentPriority(ctx workflow.Context, priority int) {
	if p := s.w.Held.Pool; p != nil && p.Place != PlaceLeft {
		s.tell(ctx, workflows.SignalPoolPriority, workflows.PoolPriority{ID: s.w.WorkflowID, Priority: priority})
	}
}

// Admission is the workload's place with the pool as status shows it:
// the yields it counts, and what it holds from its grant.
func (s seat) Admission() *AdmissionStatus {
	w := s.w
	y := w.Counts.PoolYields
	if y == nil {
		return nil
	}
	a := AdmissionStatus{Yields: y.Yields, LastYield: y.LastYield}
	p := w.Held.Pool
	a.Queued = p != nil && (p.Place == PlaceQueued || p.Place == PlaceHeld)
	if p != nil && p.Grant != nil {
		g := p.Grant
		a.Layer, a.Node, a.Pool = string(g.Layer), g.Node, g.Pool
		if w.Held.Lease == nil {
			a.Waiting = p.Why
		}
	}
	return &a
}

// tell signals the pool; a pool that is gone is logged, not fatal: the
// workload goes on with what it holds.
func (s seat) tell(ctx workflow.Context, name string, arg any) {
	if err := workflow.SignalExternalWorkflow(ctx, workflows.PoolWorkflowID, "", name, arg).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("capacity pool not told", "signal", name, "error", err)
	}
}
