package inference

import (
	"encoding/json"
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/autoscale"
	"refuel/pkg/cost"
	"refuel/pkg/serving"
	"refuel/pkg/spec"
	"refuel/workflows"
	"refuel/workflows/workload"
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
// Its input is one ServiceSpec (docs/contracts.md). carried is nil on a
// first start: a client that passes only the spec, from any SDK, leaves
// it out, and the Go SDK decodes a missing trailing argument as its zero
// value. Continue-as-new hands the service's state on in it. A Go client
// starting the workflow by function rather than by its name must pass
// nil explicitly, as the SDK checks the argument count of a function.
func (w *Services) InferenceService(ctx workflow.Context, input json.RawMessage, carried *ServiceState) (Status, error) {
	s, err := w.startService(ctx, input, carried)
	if err != nil {
		return Status{}, err
	}
	s.resume(ctx)
	return s.end(ctx, s.serve(ctx))
}

// Services are inference services with the options they run under (see
// Workflows).
type Services struct{ Options Options }

// service is one InferenceService: its state, and what it keeps while
// it runs.
type service struct {
	ServiceState
	spec  spec.ServiceSpec
	id    string  // the workflow ID: owner of the replicas' requests and instances
	opts  Options // the recorded options, or the worker's for older services
	state workflows.State

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
	// stoppedAt is when the service was stopped; zero while it runs.
	stoppedAt time.Time
}

func (w *Services) startService(ctx workflow.Context, input json.RawMessage, carried *ServiceState) (*service, error) {
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	// Decoding formats its messages with fmt and walks the input by
	// reflection, which workflowcheck cannot prove deterministic; it reads
	// only the input.
	//workflowcheck:ignore
	ss, err := spec.DecodeServiceSpecJSON(input)
	if err != nil {
		return nil, invalidServiceSpecError(err)
	}
	ss.Normalize()
	// Validation formats its messages with fmt, which workflowcheck cannot
	// prove deterministic; it only formats the spec's own values.
	//workflowcheck:ignore
	scaler, err := autoscale.NewAutoscaler(ss)
	if err != nil {
		return nil, invalidServiceSpecError(err)
	}
	if carried == nil {
		if ss.ID != id && workflow.GetVersion(ctx, workload.SpecIDVersion, workflow.DefaultVersion, 1) >= 1 {
			return nil, invalidServiceSpecError(spec.CheckWorkflowID("ServiceSpec", ss.ID, id))
		}
		carried = &ServiceState{Autoscaler: *scaler, StartedAt: workflow.Now(ctx), Options: workload.RecordOptions(ctx, w.Options)}
		if workflow.GetVersion(ctx, forecastScalerVersion, workflow.DefaultVersion, 1) >= 1 {
			if carried.ForecastScaler, err = newForecastScaler(ss); err != nil {
				return nil, invalidServiceSpecError(err)
			}
			carried.ForecastScaler.PricesFleetWarm = workflow.GetVersion(ctx, fleetWarmVersion, workflow.DefaultVersion, 1) >= 1
			if ss.Serves() {
				carried.ForecastScaler.StaffsForLatency = workflow.GetVersion(ctx, staffsForLatencyVersion, workflow.DefaultVersion, 1) >= 1
			}
		}
		if ss.Serves() {
			if workflow.GetVersion(ctx, servingReplicasVersion, workflow.DefaultVersion, 1) < 1 {
				return nil, invalidServiceSpecError(errors.New("this worker's workflows cannot run a service with a command"))
			}
			carried.ServesReplicas = true
		}
	}
	s := &service{
		ServiceState: *carried, spec: ss, id: id,
		opts: w.Options, state: workflows.StateRunning,
	}
	if s.Options != nil {
		s.opts = *s.Options
	}
	if err := s.registerHandlers(ctx); err != nil {
		return nil, err
	}
	err = workflow.UpsertTypedSearchAttributes(ctx,
		workflows.AttrTeam.ValueSet(ss.Team), workflows.AttrTier.ValueSet(string(ss.Placement.Tier())),
		workflows.AttrPriority.ValueSet(int64(ss.Priority)), workflows.AttrState.ValueSet(string(workflows.StateRunning)))
	return s, err
}

// newForecastScaler is the policy for a spec. Validation formats its
// messages with fmt, which workflowcheck cannot prove deterministic; it
// only formats the spec's own values.
//
//workflowcheck:ignore
func newForecastScaler(ss spec.ServiceSpec) (*autoscale.ForecastScaler, error) {
	return autoscale.NewForecastScaler(ss)
}

// invalidServiceSpecError fails the workflow as the spec's fault. Its message is the
// spec's own field errors, formatted with fmt, which workflowcheck cannot
// prove deterministic.
//
//workflowcheck:ignore
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
	if err := workflow.SetQueryHandlerWithOptions(ctx, workflows.QueryStatus, func() (Status, error) {
		return s.snapshot(ctx), nil
	}, workflow.QueryHandlerOptions{Description: "replicas, decisions, cost, failures"}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, workflows.UpdatePriority, s.setPriority,
		workflow.UpdateHandlerOptions{Validator: workload.ValidatePriority, Description: workflows.HandlerDescriptions[workflows.UpdatePriority]})
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
		s.tellPool(ctx, workflows.SignalPoolPriority, workflows.PoolPriority{ID: id, Priority: p})
	}
	return p, workflow.UpsertTypedSearchAttributes(ctx, workflows.AttrPriority.ValueSet(int64(p)))
}

// resume restarts what the previous run left under way: bring-ups,
// model loads and releases.
func (s *service) resume(ctx workflow.Context) {
	for _, r := range s.Replicas {
		switch {
		case s.ServesReplicas:
			// Its replicas are workflows of their own: they went on.
		case r.State == ReplicaReleasing:
			s.goGiveBack(ctx, r)
		case r.Lease == nil:
			s.goBringUp(ctx, r)
		case r.State == ReplicaStarting:
			workflow.Go(ctx, func(ctx workflow.Context) { s.placement().promote(ctx, r) })
		case r.State == ReplicaWarm:
			// One handed on running (its run ended before it was stopped,
			// or before entries were) is stopped now where it can be.
			workflow.Go(ctx, func(ctx workflow.Context) { s.placement().stopWarm(ctx, r) })
		}
	}
}

// signals are the channels the service listens on, in a fixed order so
// that signals arriving together are taken alike on replay.
func (s *service) signals(ctx workflow.Context) []workload.SignalHandler {
	return []workload.SignalHandler{
		workload.OnSignalOf(ctx, workflows.SignalMetrics, func(ctx workflow.Context, m autoscale.Metrics) {
			s.observe(ctx, m)
			s.decide(ctx)
		}),
		workload.OnSignalOf(ctx, workflows.SignalCapacityGranted, func(ctx workflow.Context, a admission.Allocation) {
			s.onGranted(ctx, a)
		}),
		workload.OnSignalOf(ctx, workflows.SignalYield, func(ctx workflow.Context, y workflows.YieldRequest) {
			s.onYield(ctx, y)
		}),
		workload.OnSignalOf(ctx, workflows.SignalReplica, s.children().onReport),
		workload.OnSignalOf(ctx, serving.SignalTraffic, s.balancers().onReport),
	}
}

// serve decides at once, then every DecisionInterval and on every
// metrics report, until the service is cancelled or its history is long
// enough to continue as new.
func (s *service) serve(ctx workflow.Context) error {
	signals := s.signals(ctx)
	s.decide(ctx)
	tick := workload.Timer(ctx, s.opts.DecisionInterval, "decide the fleet again")
	var check workflow.Future
	if s.lossWatch().watching(ctx) {
		check = workload.Timer(ctx, s.opts.LossCheckInterval, "check the replicas' instances")
	}
	for !s.historyLong(ctx) {
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(tick, func(f workflow.Future) {
			if f.Get(ctx, nil) != nil {
				return // cancelled
			}
			tick = workload.Timer(ctx, s.opts.DecisionInterval, "decide the fleet again")
			s.decide(ctx)
		})
		if check != nil {
			sel.AddFuture(check, func(f workflow.Future) {
				if f.Get(ctx, nil) != nil {
					return // cancelled
				}
				check = workload.Timer(ctx, s.opts.LossCheckInterval, "check the replicas' instances")
				s.lossWatch().goCheck(ctx)
			})
		}
		workload.AddSignals(ctx, sel, signals)
		sel.Select(ctx)
		if ctx.Err() != nil {
			return temporal.NewCanceledError()
		}
	}
	return s.ContinueAsNew(ctx, signals)
}

// observe feeds a metrics report to the autoscaler. The workflow's clock
// orders reports: one without a time, from the future, or older than the
// last is taken as of now. A report that does not say how many replicas

func (s *service) historyLong(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= s.opts.MaxHistory
}

// ContinueAsNew hands everything on to a fresh run: nothing new starts,
// calls and handlers under way end, and every signal already delivered
// is taken in, until none is left.
func (s *service) ContinueAsNew(ctx workflow.Context, signals []workload.SignalHandler) error {
	s.draining = true
	for {
		if err := workflow.Await(ctx, func() bool { return s.inFlight == 0 && workflow.AllHandlersFinished(ctx) }); err != nil {
			return err
		}
		if !workload.DrainSignals(ctx, signals) {
			break
		}
	}
	s.foldReleasedCost(workflow.Now(ctx))
	return workflow.NewContinueAsNewError(ctx, workflows.InferenceServiceName, s.spec, &s.ServiceState)
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
func (s *service) end(ctx workflow.Context, err error) (Status, error) {
	var next *workflow.ContinueAsNewError
	if errors.As(err, &next) {
		return Status{}, err
	}
	ctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	reason := activities.ReleaseFailed
	s.state = workflows.StateFailed
	var canceled *temporal.CanceledError
	cancelled := errors.As(err, &canceled)
	if cancelled {
		reason, s.state = activities.ReleaseCleanup, workflows.StateStopped
		// A stopped service wants nothing more: status says so, and
		// since when.
		s.stoppedAt = workflow.Now(ctx)
		s.Desired = autoscale.Decision{Reason: "stopped"}
	}
	s.draining = false
	for _, r := range s.Replicas {
		if s.ServesReplicas {
			// Its ServiceReplica stops its server and gives its instance
			// back as it ends.
			if err := workflow.RequestCancelExternalWorkflow(ctx, r.ID, "").Get(ctx, nil); err != nil {
				workflow.GetLogger(ctx).Warn("replica not cancelled", "replica", r.ID, "error", err)
			}
			continue
		}
		s.Release(ctx, r, reason)
	}
	_ = workflow.Await(ctx, func() bool { return s.inFlight == 0 })
	st := s.snapshot(ctx)
	_ = workflow.UpsertTypedSearchAttributes(ctx, workflows.AttrState.ValueSet(string(s.state)), workflows.AttrCostUSD.ValueSet(st.CostUSD))
	if cancelled {
		// A cancelled workflow has no result: the final status travels
		// as the cancellation's details.
		return st, temporal.NewCanceledError(st)
	}
	return st, err
}

// snapshot is the status with cost brought up to now.
func (s *service) snapshot(ctx workflow.Context) Status {
	now := workflow.Now(ctx)
	f := s.fleet()
	st := Status{
		ID: s.spec.ID, Team: s.spec.Team, Tier: string(s.spec.Placement.Tier()), Priority: s.spec.Priority, State: s.state,
		MinReplicas: s.spec.MinReplicas, MaxReplicas: s.spec.MaxReplicas, Desired: s.Desired,
		Ready: f.Ready, Starting: f.Starting, Warm: f.Warm, Replicas: []ReplicaStatus{}, LastMetrics: s.LastMetrics,
		LeadTimeSeconds: s.leadTime().Seconds(),
		CostUSD:         s.EarlierCostUSD + s.Ledger.CostUSD(now) + s.children().cost(),
		Ledger:          s.Ledger,
		Failures:        append([]workload.Failure{}, s.Failures...), // [] rather than null for clients
		StockOuts:       s.StockOuts,
		Placement:       string(s.spec.Placement),
		Decisions:       append([]DecisionRecord{}, s.Decisions...),
		StartedAt:       s.StartedAt,
		ReplicasLost:    s.ReplicasLost,
		Mode:            ModeCapacityOnly,
		Serving:         s.balancers().settings(),
		ReplicaFailures: s.ReplicaFailures,
	}
	if s.spec.Serves() {
		st.Mode, st.Endpoint, st.Traffic = ModeServing, s.balancers().endpoint(), s.balancers().traffic()
		if st.State == workflows.StateStopped {
			st.Endpoint = ""
		}
	}
	for _, r := range s.Replicas {
		st.Replicas = append(st.Replicas, r.Status())
	}
	if why := s.Desired.Explanation; why != "" {
		st.Market = &ServiceMarket{Why: why, DecidedAt: s.DecidedAt}
	}
	if !s.stoppedAt.IsZero() {
		at := s.stoppedAt
		st.StoppedAt = &at
	}
	if s.Backoff > 0 && now.Before(s.HoldUntil) {
		until := s.HoldUntil
		st.AcquiringHeldUntil = &until
	}
	return st
}

func (s *service) replica(id string) *Replica {
	for _, r := range s.Replicas {
		if r.ID == id {
			return r
		}
	}
	return nil
}

func (s *service) AddFailure(ctx workflow.Context, class, offering, msg string) {
	s.Failures = workload.AddFailure(ctx, s.Failures, class, offering, msg)
	s.StockOuts = workload.AddStockOut(ctx, s.StockOuts, class, offering)
}
