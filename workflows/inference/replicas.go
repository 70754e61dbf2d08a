package inference

import (
	"slices"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/autoscale"
	"refuel/pkg/capacity"
	"refuel/workflows"
	"refuel/workflows/workload"
)

// placement finds a replica its capacity, acquires its instance and
// loads the model on it.
type placement struct{ s *service }

func (s *service) placement() placement { return placement{s} }

func (s *service) request(ctx workflow.Context, st ReplicaState) {
	s.NextReplica++
	r := &Replica{ID: s.spec.ID + "/r" + strconv.Itoa(s.NextReplica), State: st, RequestedAt: workflow.Now(ctx)}
	s.Replicas = append(s.Replicas, r)
	if s.ServesReplicas {
		s.children().start(ctx, r)
		return
	}
	s.goBringUp(ctx, r)
}

func (s *service) goBringUp(ctx workflow.Context, r *Replica) {
	workflow.Go(ctx, func(ctx workflow.Context) { s.bringUp(ctx, r) })
}

// bringUp takes a replica from request to serving, or a warm-pool entry
// to prepared: it asks the pool, waits for the grant, acquires (again on
// later decisions while that fails) and loads the model. It stops
// early, leaving the replica as it is, when the replica is released, the
// service cancelled, or the service continues as new (the next run
// resumes it).
func (s *service) bringUp(ctx workflow.Context, r *Replica) {
	for r.Lease == nil {
		if !s.live(ctx, r) {
			return
		}
		switch {
		case r.Placer == "":
			s.placement().askPool(ctx, r)
		case r.Placer == PlacedByPool && r.Grant == nil:
			if workflow.Await(ctx, func() bool { return r.Grant != nil || !s.live(ctx, r) }) != nil {
				return
			}
		case workflow.Now(ctx).Before(s.HoldUntil):
			if _, err := workload.WaitFor(ctx, s.HoldUntil.Sub(workflow.Now(ctx)), "acquisitions held after failures", func() bool { return !s.live(ctx, r) }); err != nil {
				return
			}
		default:
			s.placement().Acquire(ctx, r)
		}
	}
	// A warm instance taken while its bring-up was finishing loads in
	// the coroutine scaleOut started for it.
	switch {
	case r.State == ReplicaStarting && !r.FromWarm:
		s.placement().loadModel(ctx, r)
	case r.State == ReplicaWarm:
		s.placement().stopWarm(ctx, r)
	}
}

// live reports whether work for the replica should go on.
func (s *service) live(ctx workflow.Context, r *Replica) bool {
	return ctx.Err() == nil && !s.draining && r.State != ReplicaReleasing
}

// askPool queues the replica with the capacity pool. When no pool runs
// (the signal finds no such workflow), the service places the replica
// itself, on the public offerings.
func (p placement) askPool(ctx workflow.Context, r *Replica) {
	s := p.s
	req := admission.Request{
		ID: r.ID, Kind: admission.Service, Owner: s.id, Team: s.spec.Team, Priority: s.spec.Priority,
		Tier: s.spec.Placement.Tier(), Resources: s.spec.Resources,
	}
	err := s.call(ctx, r, func(ctx workflow.Context) error {
		return workflow.SignalExternalWorkflow(ctx, workflows.PoolWorkflowID, "", workflows.SignalPoolRequest, req).Get(ctx, nil)
	})
	if err != nil {
		workflow.GetLogger(ctx).Info("no capacity pool; placing the replica on public offerings", "replica", r.ID, "reason", err.Error())
		r.Placer = PlacedBySelf
		return
	}
	r.Placer = PlacedByPool
}

// onGranted records what the pool allocated to a replica. A grant for a
// replica already given back (the release and the grant crossed) goes
// straight back; a second grant for one is ignored.
func (s *service) onGranted(ctx workflow.Context, a admission.Allocation) {
	r := s.replica(a.Request.ID)
	switch {
	case r == nil:
		s.tellPool(ctx, workflows.SignalPoolRelease, workflows.PoolRef{ID: a.Request.ID})
	case r.Grant == nil && r.Lease == nil && r.State != ReplicaReleasing:
		r.Grant, r.Layer = &a, a.Layer
	}
}

// onYield: the pool preempts training, never services, so a yield means
// it wants the capacity back for a reason of its own. The service gives
// the replica back and converging requests a replacement at once.
func (s *service) onYield(ctx workflow.Context, y workflows.YieldRequest) {
	r := s.replica(y.ID)
	if r == nil || r.State == ReplicaReleasing {
		return
	}
	workflow.GetLogger(ctx).Warn("the capacity pool asked a service replica to yield; releasing it and requesting a replacement",
		"replica", r.ID, "reason", y.Reason, "for", y.For)
	s.Release(ctx, r, activities.ReleaseYielded)
	s.converge(ctx)
}

// Acquire tries once to get the replica an instance: on what its grant
// allows, or, placing itself, on the public offerings in the placement's
// order (spot first with on-demand fallback for spot-first).
func (p placement) Acquire(ctx workflow.Context, r *Replica) {
	s := p.s
	ask, err := s.placement().acquisition(ctx, r)
	var lease *workload.Lease
	if err == nil {
		err = s.call(ctx, r, func(ctx workflow.Context) (err error) {
			lease, err = s.Leases.Acquire(ctx, workload.Owner{WorkflowID: s.id, Identity: workflow.GetInfo(ctx).FirstRunID}, ask)
			return err
		})
	}
	if err != nil {
		if ctx.Err() == nil { // a cancelled service has no use for the failure
			s.placement().acquireFailed(ctx, err)
		}
		return
	}
	s.placement().Acquired(ctx, r, lease)
}

// acquisition is what the replica asks for.
func (p placement) acquisition(ctx workflow.Context, r *Replica) (workload.LeaseAsk, error) {
	s := p.s
	a := workload.LeaseAsk{Team: s.spec.Team, MaxPrice: s.spec.Resources.MaxPricePerHour}
	switch {
	case r.Grant == nil:
		if err := s.placement().ListOfferings(ctx, r); err != nil {
			return a, err
		}
		a.Offerings = capacity.Order(s.Offerings, s.spec.Placement.Tier(), "")
	case r.Grant.Layer == admission.BaseLayer:
		a.Offerings = r.Grant.Offerings[:min(1, len(r.Grant.Offerings))]
		a.Layer, a.Node, a.Pool = admission.BaseLayer, r.Grant.Node, r.Grant.Pool
	default:
		a.Offerings, a.Pool = r.Grant.Offerings, r.Grant.Pool
	}
	if len(a.Offerings) == 0 {
		return a, temporal.NewNonRetryableApplicationError(
			"no offering suits placement "+string(s.spec.Placement)+" for replica "+r.ID, string(capacity.SpecMismatch), nil)
	}
	return a, nil
}

// ListOfferings lists the public offerings, once for the service.
func (p placement) ListOfferings(ctx workflow.Context, r *Replica) error {
	s := p.s
	if err := workflow.Await(ctx, func() bool { return !s.listing }); err != nil {
		return err
	}
	if len(s.Offerings) > 0 {
		return nil
	}
	s.listing = true
	defer func() { s.listing = false }()
	var offerings []capacity.Offering
	in := activities.OfferingsInput{Resources: s.spec.Resources}
	err := s.call(ctx, r, func(ctx workflow.Context) error {
		return workflow.ExecuteActivity(workload.Titled(workload.ControlOptions(ctx), "list the public offerings"), activities.ListOfferingsName, in).Get(ctx, &offerings)
	})
	if err != nil {
		return err
	}
	if len(offerings) == 0 {
		return temporal.NewNonRetryableApplicationError(
			"no provider offers what resources asks for: check resources.gpus, instance_types, zones, providers and max_price_per_hour",
			string(capacity.SpecMismatch), nil)
	}
	s.Offerings = offerings
	return nil
}

// Acquired records a replica's instance, and tells the pool which burst
// offering it took.
func (p placement) Acquired(ctx workflow.Context, r *Replica, lease *workload.Lease) {
	s := p.s
	r.Lease = lease
	r.Layer = admission.BurstLayer
	if r.Grant != nil {
		r.Layer = r.Grant.Layer
	}
	s.HoldUntil, s.Backoff = time.Time{}, 0
	if r.Placer == PlacedByPool && r.Layer == admission.BurstLayer && r.State != ReplicaReleasing {
		_ = s.call(ctx, r, func(ctx workflow.Context) error {
			s.tellPool(ctx, workflows.SignalPoolBind, workflows.PoolBind{ID: r.ID, Offering: lease.Offering()})
			return nil
		})
	}
}

// acquireFailed records why an acquisition failed and holds further
// ones: until the next decision when waiting may cure it (no capacity,
// throttling), with a growing backoff when it may not (quota, spec
// mismatch, price), so a service that cannot be placed does not spin.
// Prices move over hours, so price counts as lasting.
func (p placement) acquireFailed(ctx workflow.Context, err error) {
	s := p.s
	details := workload.FailureDetails(err)
	for _, d := range details {
		s.AddFailure(ctx, string(d.Class), d.Offering, d.Message)
	}
	hold := s.opts.DecisionInterval
	if !workload.CuredSoon(details) {
		s.Backoff = min(max(2*s.Backoff, s.opts.FailureBackoff), s.opts.MaxFailureBackoff)
		hold = s.Backoff
		workflow.GetLogger(ctx).Warn("acquisitions held: waiting will not cure this", "for", hold, "failures", workload.DescribeFailures(details))
	}
	if until := workflow.Now(ctx).Add(hold); until.After(s.HoldUntil) {
		s.HoldUntil = until
	}
}

// loadModel waits while the replica loads its model, then counts it as
// serving and tells the autoscaler how long its start-up took, so the
// learned lead time includes the real provision time (queueing for the
// pool and acquiring).
//
// The demo's replicas run no model server, so loading is a wait of the
// spec's model_load. A real replica would say when it serves (its node
// agent signalling once the server passes its health check), and that
// would end this wait.
func (p placement) loadModel(ctx workflow.Context, r *Replica) {
	s := p.s
	if r.LoadingSince.IsZero() {
		r.LoadingSince = workflow.Now(ctx)
	}
	if left := s.spec.ModelLoad.D() - workflow.Now(ctx).Sub(r.LoadingSince); left > 0 {
		if _, err := workload.WaitFor(ctx, left, r.ID+" loads its model", func() bool { return !s.live(ctx, r) }); err != nil {
			return
		}
	}
	if !s.live(ctx, r) {
		return
	}
	now := workflow.Now(ctx)
	r.State, r.ReadyAt = ReplicaReady, now
	s.ShowDetails(ctx)
	startup := autoscale.Startup{Init: r.StartedIn, Load: now.Sub(r.LoadingSince), Warm: r.FromWarm}
	if !r.FromWarm {
		startup.Provision = r.Since.Sub(r.RequestedAt)
	}
	s.policy().Started(startup)
}

// Release starts giving a replica back. While the service is continuing
// as new it only marks it: the next run gives it back.
func (s *service) Release(ctx workflow.Context, r *Replica, reason activities.ReleaseReason) {
	if s.ServesReplicas {
		s.children().retire(ctx, r)
		return
	}
	if r.State == ReplicaReleasing {
		return
	}
	r.State, r.ReleaseReason = ReplicaReleasing, reason
	if !s.draining {
		s.goGiveBack(ctx, r)
	}
}

func (s *service) goGiveBack(ctx workflow.Context, r *Replica) {
	s.inFlight++ // counted now, not when the coroutine first runs
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer func() { s.inFlight-- }()
		s.giveBack(ctx, r)
	})
}

// giveBack releases the replica's instance and tells the pool. It runs
// in a disconnected context, so it completes while the service is being
// cancelled too. A call under way for the replica ends first, so an
// instance it acquires is released as well.
func (s *service) giveBack(ctx workflow.Context, r *Replica) {
	ctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	_ = workflow.Await(ctx, func() bool { return !r.busy })
	if r.Lease != nil {
		s.Leases.Release(ctx, r.Lease, r.ReleaseReason)
	}
	if r.Placer == PlacedByPool {
		s.tellPool(ctx, workflows.SignalPoolRelease, workflows.PoolRef{ID: r.ID})
	}
	s.Replicas = slices.DeleteFunc(s.Replicas, func(x *Replica) bool { return x == r })
	s.ShowDetails(ctx)
}

// call runs f for the replica in a disconnected context, marked busy: a
// release of the replica waits for it, and so does continue-as-new. A
// call is seen through even if the service is cancelled meanwhile, so an
// instance launched is always recorded, and so released.
func (s *service) call(ctx workflow.Context, r *Replica, f func(workflow.Context) error) error {
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	r.busy = true
	s.inFlight++
	defer func() {
		r.busy = false
		s.inFlight--
	}()
	return f(dctx)
}

// tellPool signals the pool; a pool that is gone is logged: the service
// goes on with what it holds.
func (s *service) tellPool(ctx workflow.Context, name string, arg any) {
	if err := workflow.SignalExternalWorkflow(ctx, workflows.PoolWorkflowID, "", name, arg).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("capacity pool not told", "signal", name, "error", err)
	}
}
