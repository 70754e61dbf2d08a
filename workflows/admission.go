package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/pkg/admission"
	"refuel/pkg/capacity"
)

// capacityPoolVersion marks runs that ask the capacity pool for capacity;
// runs recorded before it acquire on their own.
const capacityPoolVersion = "capacity-pool"

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

// joinPool asks the capacity pool to queue the run. Without a pool (the
// signal finds no such workflow) the run acquires on its own.
func (r *run) joinPool(ctx workflow.Context) {
	if workflow.GetVersion(ctx, capacityPoolVersion, workflow.DefaultVersion, 1) < 1 {
		return
	}
	if err := r.requestCapacity(ctx); err != nil {
		workflow.GetLogger(ctx).Info("no capacity pool; acquiring directly", "reason", err.Error())
		return
	}
	r.inPool = true
	r.status.Admission = &AdmissionStatus{}
}

func (r *run) requestCapacity(ctx workflow.Context) error {
	req := admission.Request{
		ID: r.id, Kind: admission.Training, Owner: r.id, Team: r.spec.Team,
		Priority: r.status.Priority, Tier: r.spec.Tier, Resources: r.spec.Resources,
	}
	if err := workflow.SignalExternalWorkflow(ctx, PoolWorkflowID, "", SignalPoolRequest, req).Get(ctx, nil); err != nil {
		return err
	}
	r.requested = true
	return nil
}

// admit waits until the pool grants the run capacity. A pause while
// queued holds the request in the queue; resuming lets it be admitted.
func (r *run) admit(ctx workflow.Context) error {
	if !r.inPool || r.grant != nil {
		return nil
	}
	if !r.requested {
		if err := r.requestCapacity(ctx); err != nil {
			return err
		}
	}
	r.setState(ctx, StateQueued)
	for r.grant == nil {
		if r.paused != r.heldInQueue {
			signal := SignalPoolResume
			if r.paused {
				signal = SignalPoolPause
				r.setState(ctx, StatePaused)
			} else {
				r.setState(ctx, StateQueued)
			}
			r.heldInQueue = r.paused
			r.tellPool(ctx, signal, PoolRef{ID: r.id})
		}
		if err := workflow.Await(ctx, func() bool { return r.grant != nil || r.paused != r.heldInQueue }); err != nil {
			return err
		}
	}
	return nil
}

// onGranted records what the pool granted.
func (r *run) onGranted(a admission.Allocation) {
	if !r.inPool || a.Request.ID != r.id {
		return
	}
	r.grant = &a
}

// onYield asks the run to give its capacity back: the trainer stops at a
// checkpoint, and the loop releases the instance and requeues.
func (r *run) onYield(y YieldRequest) {
	if !r.inPool || r.grant == nil || r.done {
		return
	}
	r.yield = &y
	if r.stopTraining != nil {
		r.stopTraining()
	}
}

// yieldCapacity completes a yield once the instance is given back.
func (r *run) yieldCapacity(ctx workflow.Context) {
	y := r.yield
	r.yield = nil
	if r.grant == nil {
		return
	}
	info := &YieldInfo{Time: workflow.Now(ctx), Reason: y.Reason, For: y.For, AtStep: r.status.Step}
	if c := r.status.LastCheckpoint; c != nil {
		info.CheckpointStep = c.Step
	}
	r.status.Admission.Yields++
	r.status.Admission.LastYield = info
	r.grant = nil
	r.recovering = true // the next instance resumes from the checkpoint: status shows it as a recovery
	workflow.GetLogger(ctx).Info("yielded capacity to the pool", "reason", y.Reason, "for", y.For, "step", info.AtStep, "checkpoint", info.CheckpointStep)
	r.tellPool(ctx, SignalPoolYielded, PoolRef{ID: r.id})
}

// leavePool gives the run's request or grant back for good.
func (r *run) leavePool(ctx workflow.Context) {
	if !r.inPool || !r.requested {
		return
	}
	r.requested, r.grant, r.heldInQueue = false, nil, false
	r.tellPool(ctx, SignalPoolRelease, PoolRef{ID: r.id})
}

// admissionStatus is the run's place with the pool as status shows it:
// what it holds comes from its grant.
func (r *run) admissionStatus() *AdmissionStatus {
	if r.status.Admission == nil {
		return nil
	}
	a := *r.status.Admission
	a.Queued = r.requested && r.grant == nil
	a.Layer, a.Node, a.Pool = "", "", ""
	if g := r.grant; g != nil {
		a.Layer, a.Node, a.Pool = string(g.Layer), g.Node, g.Pool
	}
	return &a
}

// grantedOfferings are what the run may acquire under its grant, in
// order: the base machine, or its own offerings within the burst pool's
// (the pool's list when the two do not meet).
func (r *run) grantedOfferings() []capacity.Offering {
	g := r.grant
	if g.Layer == admission.BaseLayer {
		return g.Offerings
	}
	var both []capacity.Offering
	for _, o := range r.offerings {
		for _, p := range g.Offerings {
			if o.Key() == p.Key() {
				both = append(both, o)
				break
			}
		}
	}
	if len(both) == 0 {
		both = g.Offerings
	}
	return capacity.Order(both, r.spec.Tier, r.avoidZone)
}

// grantTags are the tags an instance acquired under the grant carries.
func (r *run) grantTags() map[string]string {
	tags := map[string]string{capacity.TagTeam: r.spec.Team, capacity.TagPool: "burst"}
	if r.grant != nil && r.grant.Layer == admission.BaseLayer {
		tags[capacity.TagPool], tags[capacity.TagNode] = "base", r.grant.Node
	}
	return tags
}

// bindGrant tells the pool which burst offering the run acquired.
func (r *run) bindGrant(ctx workflow.Context, o capacity.Offering) {
	if r.grant != nil && r.grant.Layer == admission.BurstLayer {
		r.tellPool(ctx, SignalPoolBind, PoolBind{ID: r.id, Offering: o})
	}
}

// tellPool signals the pool; a pool that is gone is logged, not fatal:
// the run goes on with what it holds.
func (r *run) tellPool(ctx workflow.Context, name string, arg any) {
	if err := workflow.SignalExternalWorkflow(ctx, PoolWorkflowID, "", name, arg).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("capacity pool not told", "signal", name, "error", err)
	}
}
