package workflows

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/autoscale"
	"refuel/pkg/capacity"
	"refuel/pkg/cost"
	"refuel/pkg/spec"
)

// InferenceService is the durable life of one inference service. It
// keeps as many replicas serving as the autoscaler decides from the
// metrics signal, the scheduled windows and the lead time it learns,
// between min_replicas and max_replicas; places each through the
// capacity pool (dedicated base first, then burst), or on the public
// offerings itself when no pool runs; keeps a warm pool of prepared
// instances; gives capacity back burst and most expensive first; and
// continues as new, carrying all of it, before its history grows long.
//
// Its input is one ServiceSpec (design section 3). carry is nil on a
// first start: a client that passes only the spec, from any SDK, leaves
// it out, and the Go SDK decodes a missing trailing argument as its zero
// value. Continue-as-new hands the service's state on in it. A Go client
// starting the workflow by function rather than by its name must pass
// nil explicitly, as the SDK checks the argument count of a function.
func InferenceService(ctx workflow.Context, ss spec.ServiceSpec, carry *ServiceCarry) (ServiceStatus, error) {
	s, err := newService(ctx, ss, carry)
	if err != nil {
		return ServiceStatus{}, err
	}
	s.resume(ctx)
	return s.end(ctx, s.serve(ctx))
}

// ServiceCarry is everything a service hands on to its next run.
type ServiceCarry struct {
	Autoscaler autoscale.Autoscaler `json:"autoscaler"`
	// Replicas are the replicas and warm-pool instances, in request order.
	Replicas []*ServiceReplica `json:"replicas"`
	Ledger   cost.Ledger       `json:"ledger"`
	// EarlierCostUSD is what instances given back in earlier runs cost:
	// their ledger segments are folded into it, so the carry stays small
	// however long the service runs.
	EarlierCostUSD float64 `json:"earlier_cost_usd"`
	// NextReplica numbers replica ids, never reused; NextAttempt numbers
	// acquisitions, which providers deduplicate on.
	NextReplica int `json:"next_replica"`
	NextAttempt int `json:"next_attempt"`
	// Offerings are the public offerings, listed once, the first time a
	// replica is placed without a pool.
	Offerings []capacity.Offering `json:"offerings,omitempty"`
	// HoldUntil stops acquisitions until then after a failure; Backoff is
	// the latest hold after a failure that waiting does not cure.
	HoldUntil   time.Time          `json:"hold_until,omitzero"`
	Backoff     time.Duration      `json:"backoff,omitempty"`
	Desired     autoscale.Decision `json:"desired"`
	LastMetrics *autoscale.Metrics `json:"last_metrics,omitempty"`
	Decisions   []DecisionRecord   `json:"decisions"`
	Failures    []Failure          `json:"failures"`
	StartedAt   time.Time          `json:"started_at"`
	// ReplicasLost counts replicas whose instance the cloud took back.
	ReplicasLost int `json:"replicas_lost,omitempty"`
}

// ServiceReplica is one replica, or one warm-pool instance, of a service.
type ServiceReplica struct {
	ID    string       `json:"id"`
	State ReplicaState `json:"state"`
	// Placer is who finds its capacity; empty until the pool was asked.
	Placer   Placer                `json:"placer,omitempty"`
	Grant    *admission.Allocation `json:"grant,omitempty"`
	Layer    admission.Layer       `json:"layer,omitempty"`
	Instance *capacity.Instance    `json:"instance,omitempty"`

	RequestedAt  time.Time `json:"requested_at"`
	AcquiredAt   time.Time `json:"acquired_at,omitzero"`
	LoadingSince time.Time `json:"loading_since,omitzero"`
	ReadyAt      time.Time `json:"ready_at,omitzero"`
	// FromWarm is set for a replica taken from the warm pool already
	// prepared: only its model load remained.
	FromWarm      bool                     `json:"from_warm,omitempty"`
	ReleaseReason activities.ReleaseReason `json:"release_reason,omitempty"`

	// busy is set while a call made for the replica (asking the pool,
	// listing offerings, acquiring, binding) is under way. A release
	// waits for it, so what the call obtains is given back too. It is
	// never carried: continue-as-new waits until no call is under way.
	busy bool
}

// Placer is who finds a replica its capacity.
type Placer string

const (
	// PlacedByPool replicas are granted by the capacity pool, which must
	// hear when they are given back.
	PlacedByPool Placer = "pool"
	// PlacedBySelf replicas were requested while no pool ran: the service
	// acquires them on the public offerings itself.
	PlacedBySelf Placer = "self"
)

// ServiceOptions are the knobs of a service that are not in its spec.
type ServiceOptions struct {
	// DecisionInterval is how often the service decides when no metrics
	// arrive: schedules open and delays run out on the clock alone.
	DecisionInterval time.Duration
	// FailureBackoff is the first hold after an acquisition failure that
	// waiting does not cure (quota, spec mismatch, price); each further
	// one doubles it, up to MaxFailureBackoff.
	FailureBackoff    time.Duration
	MaxFailureBackoff time.Duration
	// MaxHistory continues as new past this many events, even before
	// the server suggests it.
	MaxHistory int
	// LossCheckInterval is how often the service asks the clouds whether
	// they took back a replica's instance (see goCheckForLoss); 0 never.
	LossCheckInterval time.Duration
}

// DefaultServiceOptions are the options every InferenceService uses.
var DefaultServiceOptions = ServiceOptions{
	DecisionInterval:  10 * time.Second,
	FailureBackoff:    time.Minute,
	MaxFailureBackoff: 15 * time.Minute,
	MaxHistory:        5000,
	LossCheckInterval: 30 * time.Second,
}

// service is the state of one InferenceService run; its methods are the
// steps.
type service struct {
	ServiceCarry
	spec  spec.ServiceSpec
	id    string // the workflow ID: owner of the replicas' requests and instances
	opts  ServiceOptions
	state State

	// inFlight counts calls and releases under way; continue-as-new and
	// the final cleanup wait until there are none.
	inFlight int
	// draining is set once the service continues as new: nothing new
	// starts, and the next run resumes what was left.
	draining bool
	// listing is set while the offerings are being listed; replicas
	// placing meanwhile wait for that one list.
	listing bool
	// checking is set while the replicas' instances are being checked.
	checking bool
}

func newService(ctx workflow.Context, ss spec.ServiceSpec, carry *ServiceCarry) (*service, error) {
	ss.Normalize()
	// Validation formats its messages with fmt, which workflowcheck cannot
	// prove deterministic; it only formats the spec's own values.
	//workflowcheck:ignore
	scaler, err := autoscale.NewAutoscaler(ss)
	if err != nil {
		//workflowcheck:ignore
		return nil, invalidServiceSpecError(err)
	}
	if carry == nil {
		carry = &ServiceCarry{Autoscaler: *scaler, StartedAt: workflow.Now(ctx)}
	}
	s := &service{
		ServiceCarry: *carry, spec: ss, id: workflow.GetInfo(ctx).WorkflowExecution.ID,
		opts: DefaultServiceOptions, state: StateRunning,
	}
	if err := s.registerHandlers(ctx); err != nil {
		return nil, err
	}
	err = workflow.UpsertTypedSearchAttributes(ctx,
		AttrTeam.ValueSet(ss.Team), AttrTier.ValueSet(string(ss.Placement.Tier())),
		AttrPriority.ValueSet(int64(ss.Priority)), AttrState.ValueSet(string(StateRunning)))
	return s, err
}

func invalidServiceSpecError(err error) error {
	var ve *spec.ValidationError
	if errors.As(err, &ve) {
		return temporal.NewNonRetryableApplicationError(ve.Error(), "InvalidServiceSpec", nil, ve.Fields)
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), "InvalidServiceSpec", nil)
}

// registerHandlers wires the status query and the set-priority update;
// the signals are taken in serve's loop.
func (s *service) registerHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (ServiceStatus, error) {
		return s.snapshot(ctx), nil
	}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdatePriority, s.setPriority,
		workflow.UpdateHandlerOptions{Validator: validatePriority})
}

// setPriority applies to replicas requested from now on; replicas still
// queued with the pool move in its queue at once. Granted replicas keep
// theirs: services are never preempted, so it would change nothing.
func (s *service) setPriority(ctx workflow.Context, p int) (int, error) {
	s.spec.Priority = p
	var queued []string
	for _, r := range s.Replicas {
		if r.Placer == PlacedByPool && r.Grant == nil && r.State != ReplicaReleasing {
			queued = append(queued, r.ID)
		}
	}
	for _, id := range queued {
		s.tellPool(ctx, SignalPoolPriority, PoolPriority{ID: id, Priority: p})
	}
	return p, workflow.UpsertTypedSearchAttributes(ctx, AttrPriority.ValueSet(int64(p)))
}

// resume restarts what the previous run left under way: bring-ups,
// model loads and releases.
func (s *service) resume(ctx workflow.Context) {
	for _, r := range s.Replicas {
		switch {
		case r.State == ReplicaReleasing:
			s.goGiveBack(ctx, r)
		case r.Instance == nil:
			s.goBringUp(ctx, r)
		case r.State == ReplicaStarting:
			workflow.Go(ctx, func(ctx workflow.Context) { s.loadModel(ctx, r) })
		}
	}
}

// signals are the channels the service listens on, in a fixed order so
// that signals arriving together are taken alike on replay.
func (s *service) signals(ctx workflow.Context) []signalHandler {
	return []signalHandler{
		onSignalOf(ctx, SignalMetrics, func(ctx workflow.Context, m autoscale.Metrics) {
			s.observe(ctx, m)
			s.decide(ctx)
		}),
		onSignalOf(ctx, SignalCapacityGranted, func(ctx workflow.Context, a admission.Allocation) {
			s.onGranted(ctx, a)
		}),
		onSignalOf(ctx, SignalYield, func(ctx workflow.Context, y YieldRequest) {
			s.onYield(ctx, y)
		}),
	}
}

// serve decides at once, then every DecisionInterval and on every
// metrics report, until the service is cancelled or its history is long
// enough to continue as new.
func (s *service) serve(ctx workflow.Context) error {
	signals := s.signals(ctx)
	s.decide(ctx)
	tick := workflow.NewTimer(ctx, s.opts.DecisionInterval)
	var check workflow.Future
	if s.watchesForLoss(ctx) {
		check = workflow.NewTimer(ctx, s.opts.LossCheckInterval)
	}
	for !s.historyLong(ctx) {
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(tick, func(f workflow.Future) {
			if f.Get(ctx, nil) != nil {
				return // cancelled
			}
			tick = workflow.NewTimer(ctx, s.opts.DecisionInterval)
			s.decide(ctx)
		})
		if check != nil {
			sel.AddFuture(check, func(f workflow.Future) {
				if f.Get(ctx, nil) != nil {
					return // cancelled
				}
				check = workflow.NewTimer(ctx, s.opts.LossCheckInterval)
				s.goCheckForLoss(ctx)
			})
		}
		addSignals(ctx, sel, signals)
		sel.Select(ctx)
		if ctx.Err() != nil {
			return temporal.NewCanceledError()
		}
	}
	return s.continueAsNew(ctx, signals)
}

// observe feeds a metrics report to the autoscaler. The workflow's clock
// orders reports: one without a time, from the future, or older than the
// last is taken as of now. A report that does not say how many replicas
// it covers covers the ready ones.
func (s *service) observe(ctx workflow.Context, m autoscale.Metrics) {
	now := workflow.Now(ctx)
	if m.At.IsZero() || m.At.After(now) || (s.LastMetrics != nil && m.At.Before(s.LastMetrics.At)) {
		m.At = now
	}
	if m.Replicas == 0 {
		m.Replicas = s.fleet().Ready
	}
	s.LastMetrics = &m
	s.Autoscaler.Observe(m)
}

// decide asks the autoscaler what the fleet should be and converges on
// it. Status keeps the decisions that changed the fleet, not every one.
func (s *service) decide(ctx workflow.Context) {
	now := workflow.Now(ctx)
	d := s.Autoscaler.Decide(now, s.fleet())
	if len(s.Decisions) == 0 || d.Replicas != s.Desired.Replicas || d.Warm != s.Desired.Warm {
		s.Decisions = append(s.Decisions, DecisionRecord{Time: now, Replicas: d.Replicas, Warm: d.Warm, Reason: d.Reason})
		if n := len(s.Decisions); n > maxDecisions {
			s.Decisions = s.Decisions[n-maxDecisions:]
		}
		workflow.GetLogger(ctx).Info("scaling", "replicas", d.Replicas, "warm", d.Warm, "reason", d.Reason)
	}
	s.Desired = d
	s.converge(ctx)
}

// converge requests and releases until the replicas and the warm pool
// are what was decided. Scaling out takes from the warm pool first; the
// warm pool is then refilled.
func (s *service) converge(ctx workflow.Context) {
	if s.draining || ctx.Err() != nil {
		return
	}
	d := s.Desired
	serving := s.inState(ReplicaStarting, ReplicaReady)
	for n := len(serving); n < d.Replicas; n++ {
		s.scaleOut(ctx)
	}
	s.scaleIn(ctx, serving, d.Replicas)
	warm := s.inState(ReplicaWarm)
	for n := len(warm); n < d.Warm; n++ {
		s.request(ctx, ReplicaWarm)
	}
	s.scaleIn(ctx, warm, d.Warm)
}

// scaleOut adds a serving replica: a prepared warm instance if there is
// one, with only its model left to load; else a warm-pool entry still
// on its way, which is further along than a new request; else a new one.
func (s *service) scaleOut(ctx workflow.Context) {
	warm := s.inState(ReplicaWarm)
	slices.SortStableFunc(warm, func(a, b *ServiceReplica) int {
		return cmp.Compare(placedRank(b), placedRank(a))
	})
	if len(warm) == 0 {
		s.request(ctx, ReplicaStarting)
		return
	}
	w := warm[0]
	w.State = ReplicaStarting
	if w.Instance != nil {
		w.FromWarm = true
		workflow.Go(ctx, func(ctx workflow.Context) { s.loadModel(ctx, w) })
	} // else its bring-up goes on, and now ends serving
}

// scaleIn releases from rs all but keep, in releaseOrder.
func (s *service) scaleIn(ctx workflow.Context, rs []*ServiceReplica, keep int) {
	if len(rs) <= keep {
		return
	}
	for _, r := range releaseOrder(rs)[:len(rs)-keep] {
		s.release(ctx, r, activities.ReleaseScaledIn)
	}
}

// releaseOrder is the order to give replicas back in when scaling in.
// Replicas holding no instance yet go first: releasing one costs no
// serving capacity and saves its acquisition. The rest follow
// admission.ReleaseOrder: burst before base (already paid for), the most
// expensive first, spot before on-demand at equal price, the most
// recently acquired first, so a replica still loading its model goes
// before a serving one like it.
func releaseOrder(rs []*ServiceReplica) []*ServiceReplica {
	allocs := make([]admission.Allocation, len(rs))
	for i, r := range rs {
		allocs[i] = r.allocation()
	}
	out := make([]*ServiceReplica, 0, len(rs))
	for _, a := range admission.ReleaseOrder(allocs) {
		i := slices.IndexFunc(rs, func(r *ServiceReplica) bool { return r.ID == a.Request.ID })
		out = append(out, rs[i])
	}
	slices.SortStableFunc(out, func(a, b *ServiceReplica) int { return cmp.Compare(placedRank(a), placedRank(b)) })
	return out
}

// allocation describes the replica as the pool would, for ReleaseOrder.
func (r *ServiceReplica) allocation() admission.Allocation {
	a := admission.Allocation{Request: admission.Request{ID: r.ID}, Layer: r.Layer, AdmittedAt: r.AcquiredAt}
	if r.Instance != nil {
		a.Offerings = []capacity.Offering{r.Instance.Offering}
	}
	return a
}

// placedRank is 1 for a replica holding an instance, 0 otherwise.
func placedRank(r *ServiceReplica) int {
	if r.Instance != nil {
		return 1
	}
	return 0
}

// request adds a replica, or a warm-pool entry, and starts bringing it up.
func (s *service) request(ctx workflow.Context, st ReplicaState) {
	s.NextReplica++
	r := &ServiceReplica{ID: s.spec.ID + "/r" + strconv.Itoa(s.NextReplica), State: st, RequestedAt: workflow.Now(ctx)}
	s.Replicas = append(s.Replicas, r)
	s.goBringUp(ctx, r)
}

func (s *service) goBringUp(ctx workflow.Context, r *ServiceReplica) {
	workflow.Go(ctx, func(ctx workflow.Context) { s.bringUp(ctx, r) })
}

// bringUp takes a replica from request to serving, or a warm-pool entry
// to prepared: it asks the pool, waits for the grant, acquires (again on
// later decisions while that fails) and loads the model. It stops
// early, leaving the replica as it is, when the replica is released, the
// service cancelled, or the service continues as new (the next run
// resumes it).
func (s *service) bringUp(ctx workflow.Context, r *ServiceReplica) {
	for r.Instance == nil {
		if !s.live(ctx, r) {
			return
		}
		switch {
		case r.Placer == "":
			s.askPool(ctx, r)
		case r.Placer == PlacedByPool && r.Grant == nil:
			if workflow.Await(ctx, func() bool { return r.Grant != nil || !s.live(ctx, r) }) != nil {
				return
			}
		case workflow.Now(ctx).Before(s.HoldUntil):
			if _, err := workflow.AwaitWithTimeout(ctx, s.HoldUntil.Sub(workflow.Now(ctx)), func() bool { return !s.live(ctx, r) }); err != nil {
				return
			}
		default:
			s.acquire(ctx, r)
		}
	}
	// A warm instance taken while its bring-up was finishing loads in
	// the coroutine scaleOut started for it.
	if r.State == ReplicaStarting && !r.FromWarm {
		s.loadModel(ctx, r)
	}
}

// live reports whether work for the replica should go on.
func (s *service) live(ctx workflow.Context, r *ServiceReplica) bool {
	return ctx.Err() == nil && !s.draining && r.State != ReplicaReleasing
}

// askPool queues the replica with the capacity pool. When no pool runs
// (the signal finds no such workflow), the service places the replica
// itself, on the public offerings.
func (s *service) askPool(ctx workflow.Context, r *ServiceReplica) {
	req := admission.Request{
		ID: r.ID, Kind: admission.Service, Owner: s.id, Team: s.spec.Team, Priority: s.spec.Priority,
		Tier: s.spec.Placement.Tier(), Resources: s.spec.Resources,
	}
	err := s.call(ctx, r, func(ctx workflow.Context) error {
		return workflow.SignalExternalWorkflow(ctx, PoolWorkflowID, "", SignalPoolRequest, req).Get(ctx, nil)
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
		s.tellPool(ctx, SignalPoolRelease, PoolRef{ID: a.Request.ID})
	case r.Grant == nil && r.Instance == nil && r.State != ReplicaReleasing:
		r.Grant, r.Layer = &a, a.Layer
	}
}

// onYield: the pool preempts training, never services, so a yield means
// it wants the capacity back for a reason of its own. The service gives
// the replica back and converging requests a replacement at once.
func (s *service) onYield(ctx workflow.Context, y YieldRequest) {
	r := s.replica(y.ID)
	if r == nil || r.State == ReplicaReleasing {
		return
	}
	workflow.GetLogger(ctx).Warn("the capacity pool asked a service replica to yield; releasing it and requesting a replacement",
		"replica", r.ID, "reason", y.Reason, "for", y.For)
	s.release(ctx, r, activities.ReleaseYielded)
	s.converge(ctx)
}

// acquire tries once to get the replica an instance: on what its grant
// allows, or, placing itself, on the public offerings in the placement's
// order (spot first with on-demand fallback for spot-first).
func (s *service) acquire(ctx workflow.Context, r *ServiceReplica) {
	req, err := s.acquisition(ctx, r)
	var inst capacity.Instance
	if err == nil {
		err = s.call(ctx, r, func(ctx workflow.Context) error {
			return workflow.ExecuteActivity(acquireOptions(ctx), activities.AcquireName, req).Get(ctx, &inst)
		})
	}
	if err != nil {
		if ctx.Err() == nil { // a cancelled service has no use for the failure
			s.acquireFailed(ctx, err)
		}
		return
	}
	s.acquired(ctx, r, inst)
}

// acquisition is the request for the replica's instance.
func (s *service) acquisition(ctx workflow.Context, r *ServiceReplica) (capacity.Request, error) {
	tags := map[string]string{capacity.TagTeam: s.spec.Team, capacity.TagPool: string(admission.BurstLayer)}
	var offerings []capacity.Offering
	switch {
	case r.Grant == nil:
		if err := s.listOfferings(ctx, r); err != nil {
			return capacity.Request{}, err
		}
		offerings = capacity.Order(s.Offerings, s.spec.Placement.Tier(), "")
	case r.Grant.Layer == admission.BaseLayer:
		offerings = r.Grant.Offerings[:min(1, len(r.Grant.Offerings))]
		tags[capacity.TagPool], tags[capacity.TagNode] = string(admission.BaseLayer), r.Grant.Node
	default:
		offerings = r.Grant.Offerings
	}
	if len(offerings) == 0 {
		return capacity.Request{}, temporal.NewNonRetryableApplicationError(
			"no offering suits placement "+string(s.spec.Placement)+" for replica "+r.ID, string(capacity.SpecMismatch), nil)
	}
	s.NextAttempt++
	return capacity.Request{
		RunID: s.id, Attempt: s.NextAttempt, Offerings: offerings, Tags: tags,
		MaxPricePerHour: s.spec.Resources.MaxPricePerHour,
	}, nil
}

// listOfferings lists the public offerings, once for the service.
func (s *service) listOfferings(ctx workflow.Context, r *ServiceReplica) error {
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
		return workflow.ExecuteActivity(controlOptions(ctx), activities.ListOfferingsName, in).Get(ctx, &offerings)
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

// acquired records a replica's instance: it is paid for from now, and
// the pool learns which burst offering it took.
func (s *service) acquired(ctx workflow.Context, r *ServiceReplica, inst capacity.Instance) {
	now := workflow.Now(ctx)
	r.Instance, r.AcquiredAt = &inst, now
	r.Layer = admission.BurstLayer
	if r.Grant != nil {
		r.Layer = r.Grant.Layer
	}
	o := inst.Offering
	s.Ledger.Open(cost.Segment{
		InstanceID: inst.ID, Pool: o.Provider, Market: string(o.Market), Offering: o.Key(),
		PricePerHour: o.PricePerHour, Start: now,
	})
	s.HoldUntil, s.Backoff = time.Time{}, 0
	if r.Placer == PlacedByPool && r.Layer == admission.BurstLayer && r.State != ReplicaReleasing {
		_ = s.call(ctx, r, func(ctx workflow.Context) error {
			s.tellPool(ctx, SignalPoolBind, PoolBind{ID: r.ID, Offering: o})
			return nil
		})
	}
}

// acquireFailed records why an acquisition failed and holds further
// ones: until the next decision when waiting may cure it (no capacity,
// throttling), with a growing backoff when it may not (quota, spec
// mismatch, price), so a service that cannot be placed does not spin.
func (s *service) acquireFailed(ctx workflow.Context, err error) {
	details := failureDetails(err)
	for _, d := range details {
		s.addFailure(ctx, string(d.Class), d.Offering, d.Message)
	}
	hold := s.opts.DecisionInterval
	if !curedByWaiting(details) {
		s.Backoff = min(max(2*s.Backoff, s.opts.FailureBackoff), s.opts.MaxFailureBackoff)
		hold = s.Backoff
		workflow.GetLogger(ctx).Warn("acquisitions held: waiting will not cure this", "for", hold, "failures", describeFailures(details))
	}
	if until := workflow.Now(ctx).Add(hold); until.After(s.HoldUntil) {
		s.HoldUntil = until
	}
}

// curedByWaiting reports whether some failure may pass by the next
// decision: prices move over hours, so price counts as lasting.
func curedByWaiting(details []activities.FailureDetail) bool {
	return capacity.CuredWithin(capacity.Minutes, classes(details)...)
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
func (s *service) loadModel(ctx workflow.Context, r *ServiceReplica) {
	if r.LoadingSince.IsZero() {
		r.LoadingSince = workflow.Now(ctx)
	}
	if left := s.spec.ModelLoad.D() - workflow.Now(ctx).Sub(r.LoadingSince); left > 0 {
		if _, err := workflow.AwaitWithTimeout(ctx, left, func() bool { return !s.live(ctx, r) }); err != nil {
			return
		}
	}
	if !s.live(ctx, r) {
		return
	}
	now := workflow.Now(ctx)
	r.State, r.ReadyAt = ReplicaReady, now
	startup := autoscale.Startup{Load: now.Sub(r.LoadingSince), Warm: r.FromWarm}
	if !r.FromWarm {
		startup.Provision = r.AcquiredAt.Sub(r.RequestedAt)
	}
	s.Autoscaler.Started(startup)
}

// release starts giving a replica back. While the service is continuing
// as new it only marks it: the next run gives it back.
func (s *service) release(ctx workflow.Context, r *ServiceReplica, reason activities.ReleaseReason) {
	if r.State == ReplicaReleasing {
		return
	}
	r.State, r.ReleaseReason = ReplicaReleasing, reason
	if !s.draining {
		s.goGiveBack(ctx, r)
	}
}

func (s *service) goGiveBack(ctx workflow.Context, r *ServiceReplica) {
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
func (s *service) giveBack(ctx workflow.Context, r *ServiceReplica) {
	ctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	_ = workflow.Await(ctx, func() bool { return !r.busy })
	if r.Instance != nil {
		in := activities.ReleaseInput{Instance: *r.Instance, Reason: r.ReleaseReason}
		if err := workflow.ExecuteActivity(releaseOptions(ctx), activities.ReleaseName, in).Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Error("release failed; the janitor will reclaim the instance", "replica", r.ID, "instance", r.Instance.ID, "error", err)
		}
		s.Ledger.Close(r.Instance.ID, workflow.Now(ctx))
	}
	if r.Placer == PlacedByPool {
		s.tellPool(ctx, SignalPoolRelease, PoolRef{ID: r.ID})
	}
	s.Replicas = slices.DeleteFunc(s.Replicas, func(x *ServiceReplica) bool { return x == r })
}

// call runs f for the replica in a disconnected context, marked busy: a
// release of the replica waits for it, and so does continue-as-new. A
// call is seen through even if the service is cancelled meanwhile, so an
// instance launched is always recorded, and so released.
func (s *service) call(ctx workflow.Context, r *ServiceReplica, f func(workflow.Context) error) error {
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
	if err := workflow.SignalExternalWorkflow(ctx, PoolWorkflowID, "", name, arg).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("capacity pool not told", "signal", name, "error", err)
	}
}

// historyLong reports whether this run's history should end.
func (s *service) historyLong(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= s.opts.MaxHistory
}

// continueAsNew hands everything on to a fresh run: nothing new starts,
// calls and handlers under way end, and every signal already delivered
// is taken in, until none is left.
func (s *service) continueAsNew(ctx workflow.Context, signals []signalHandler) error {
	s.draining = true
	for {
		if err := workflow.Await(ctx, func() bool { return s.inFlight == 0 && workflow.AllHandlersFinished(ctx) }); err != nil {
			return err
		}
		if !drainSignals(ctx, signals) {
			break
		}
	}
	s.foldReleasedCost(workflow.Now(ctx))
	return workflow.NewContinueAsNewError(ctx, InferenceServiceName, s.spec, &s.ServiceCarry)
}

// foldReleasedCost moves the segments of instances already given back
// out of the ledger into EarlierCostUSD.
func (s *service) foldReleasedCost(now time.Time) {
	var open []cost.Segment
	for _, seg := range s.Ledger.Segments {
		if seg.End.IsZero() {
			open = append(open, seg)
			continue
		}
		s.EarlierCostUSD += seg.USD(now)
	}
	s.Ledger.Segments = open
}

// end gives every instance back when the service is cancelled (or, by
// some fault, fails) and returns its final status, which a cancellation
// carries in its details. Continue-as-new passes straight through: the
// next run holds everything.
func (s *service) end(ctx workflow.Context, err error) (ServiceStatus, error) {
	var next *workflow.ContinueAsNewError
	if errors.As(err, &next) {
		return ServiceStatus{}, err
	}
	ctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	reason := activities.ReleaseFailed
	s.state = StateFailed
	var canceled *temporal.CanceledError
	cancelled := errors.As(err, &canceled)
	if cancelled {
		reason, s.state = activities.ReleaseCleanup, StateCancelled
	}
	s.draining = false
	for _, r := range s.Replicas {
		s.release(ctx, r, reason)
	}
	_ = workflow.Await(ctx, func() bool { return s.inFlight == 0 })
	st := s.snapshot(ctx)
	_ = workflow.UpsertTypedSearchAttributes(ctx, AttrState.ValueSet(string(s.state)), AttrCostUSD.ValueSet(st.CostUSD))
	if cancelled {
		// A cancelled workflow has no result: the final status travels
		// as the cancellation's details.
		return st, temporal.NewCanceledError(st)
	}
	return st, err
}

// snapshot is the status with cost brought up to now.
func (s *service) snapshot(ctx workflow.Context) ServiceStatus {
	now := workflow.Now(ctx)
	f := s.fleet()
	st := ServiceStatus{
		ID: s.spec.ID, Team: s.spec.Team, Tier: string(s.spec.Placement.Tier()), Priority: s.spec.Priority, State: s.state,
		MinReplicas: s.spec.MinReplicas, MaxReplicas: s.spec.MaxReplicas, Desired: s.Desired,
		Ready: f.Ready, Starting: f.Starting, Warm: f.Warm, Replicas: []ReplicaStatus{}, LastMetrics: s.LastMetrics,
		LeadTimeSeconds: s.Autoscaler.Lead.Estimate().Seconds(),
		CostUSD:         s.EarlierCostUSD + s.Ledger.CostUSD(now),
		Ledger:          s.Ledger,
		Failures:        append([]Failure{}, s.Failures...), // [] rather than null for clients
		Decisions:       append([]DecisionRecord{}, s.Decisions...),
		StartedAt:       s.StartedAt,
		ReplicasLost:    s.ReplicasLost,
	}
	for _, r := range s.Replicas {
		st.Replicas = append(st.Replicas, r.status())
	}
	if s.Backoff > 0 && now.Before(s.HoldUntil) {
		until := s.HoldUntil
		st.AcquiringHeldUntil = &until
	}
	return st
}

func (r *ServiceReplica) status() ReplicaStatus {
	rs := ReplicaStatus{ID: r.ID, State: r.State, Layer: r.Layer, RequestedAt: r.RequestedAt}
	if i := r.Instance; i != nil {
		o := i.Offering
		rs.Instance = &InstanceRef{ID: i.ID, Offering: o.Key(), Market: string(o.Market), Zone: o.Zone, PricePerHour: o.PricePerHour, Since: r.AcquiredAt}
	}
	if !r.ReadyAt.IsZero() {
		at := r.ReadyAt
		rs.ReadyAt = &at
	}
	return rs
}

// fleet is the replicas as the autoscaler counts them: warm counts only
// prepared instances.
func (s *service) fleet() autoscale.Fleet {
	var f autoscale.Fleet
	for _, r := range s.Replicas {
		switch {
		case r.State == ReplicaReady:
			f.Ready++
		case r.State == ReplicaStarting:
			f.Starting++
		case r.State == ReplicaWarm && r.Instance != nil:
			f.Warm++
		}
	}
	return f
}

// inState returns the replicas in any of the states, in request order.
func (s *service) inState(states ...ReplicaState) []*ServiceReplica {
	var out []*ServiceReplica
	for _, r := range s.Replicas {
		if slices.Contains(states, r.State) {
			out = append(out, r)
		}
	}
	return out
}

func (s *service) replica(id string) *ServiceReplica {
	for _, r := range s.Replicas {
		if r.ID == id {
			return r
		}
	}
	return nil
}

func (s *service) addFailure(ctx workflow.Context, class, offering, msg string) {
	s.Failures = append(s.Failures, Failure{Class: class, Offering: offering, Message: msg, Time: workflow.Now(ctx)})
	if n := len(s.Failures); n > maxFailures {
		s.Failures = s.Failures[n-maxFailures:]
	}
}
