package inference

import (
	"errors"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/serving"
	"refuel/pkg/spec"
	"refuel/workflows"
	"refuel/workflows/workload"
)

// ServiceReplica is one replica of a service that runs a model server.
// It is a workload as a training run and a development environment are:
// it finds capacity through the capacity pool's one queue (base first,
// burst overflow) or on its own, runs the server through the node agent
// as an attempt, and recovers through the same recovery when it loses
// its instance or its server fails. It tells its service (SignalReplica)
// when it starts, when it is ready (where, and how long the model took
// to load), when it drains and when it is gone. It drains on its
// service's SignalReplicaDrain (scale-in) and on an interruption notice:
// the service shows it draining, so the balancer sends it nothing new,
// and what it holds finishes within drain_timeout, or the notice's grace.
// One started warm is a warm-pool entry until promoted (replica_warm.go).
//
// carried is nil on a first start; continue-as-new hands the state on.
func (w *Replicas) ServiceReplica(ctx workflow.Context, in ReplicaInput, carried *ReplicaWorkState) (ReplicaReport, error) {
	r, err := w.startReplica(ctx, in, carried)
	if err != nil {
		return ReplicaReport{ID: in.ID, State: replicaGone}, err
	}
	defer r.ReleaseAll(ctx)
	if carried == nil {
		if err := r.open(ctx); err != nil {
			return r.end(ctx, err)
		}
	}
	if t := r.Training; t != nil {
		// The previous run handed on the server under way: attach to it.
		r.Training = nil
		a := r.Launch(ctx, r.attemptInput(), t.Started)
		a.Attached()
		v, err := r.Follow(ctx, a)
		if err == nil {
			err = r.settle(ctx, v)
		}
		if err != nil {
			return r.end(ctx, err)
		}
	}
	for !r.Draining {
		if r.Lease == nil {
			if err := r.Admit(ctx); err != nil {
				return r.end(ctx, err)
			}
			lease, err := r.Acquire(ctx)
			if err != nil {
				return r.end(ctx, err)
			}
			if lease == nil {
				continue // draining, or asked to yield
			}
		}
		if r.Warm {
			if err := r.holdWarm(ctx); err != nil {
				return r.end(ctx, err)
			}
			continue
		}
		v, err := r.serve(ctx)
		if err == nil {
			err = r.settle(ctx, v)
		}
		if err != nil {
			return r.end(ctx, err)
		}
		if r.HandOn {
			return r.end(ctx, r.ContinueAsNew(ctx))
		}
	}
	return r.end(ctx, nil)
}

// Replicas are service replicas with the options they run under, a
// training run's (see registry.Workflows).
type Replicas struct{ Options workload.RunOptions }

// ReplicaInput is a ServiceReplica's input: its service's spec, its id
// (the workflow ID) and its service's workflow ID. Warm starts it as a
// warm-pool entry, which serves once promoted.
type ReplicaInput struct {
	Service spec.ServiceSpec `json:"service"`
	ID      string           `json:"id"`
	Parent  string           `json:"parent"`
	Warm    bool             `json:"warm,omitempty"`
}

// ReplicaWorkState is a ServiceReplica's whole state, handed on as it is
// when it continues as new.
type ReplicaWorkState struct {
	Options *workload.RunOptions `json:"options,omitempty"`
	workload.Holding
	workload.Record
	// State is the replica's as its service shows it (serving.Replica*).
	State    string `json:"state"`
	Endpoint string `json:"endpoint,omitempty"`
	// Draining is set once the replica drains for good (scale-in): it
	// runs no new attempt and ends once what it held has finished.
	Draining bool `json:"draining,omitempty"`
	// DrainUntil is when a replica draining for scale-in stops its
	// server.
	DrainUntil time.Time `json:"drain_until,omitzero"`
	// Priority is the service's, for the pool's queue.
	Priority int `json:"priority"`
	// Warm is set while the replica is a warm-pool entry: it holds its
	// instance, Stopped (costing StoppedPricePerHour) where its provider
	// could stop it, and runs no server. Promoted is set once its service
	// takes it into service; FromWarm until its first ready after that,
	// whose start-up StartedIn (starting its instance) is part of.
	Warm                bool          `json:"warm,omitempty"`
	Promoted            bool          `json:"promoted,omitempty"`
	Stopped             bool          `json:"stopped,omitempty"`
	StoppedPricePerHour float64       `json:"stopped_price_per_hour,omitempty"`
	FromWarm            bool          `json:"from_warm,omitempty"`
	StartedIn           time.Duration `json:"started_in,omitempty"`
}

// ReplicaReport is what a replica tells its service (SignalReplica),
// and its result.
type ReplicaReport struct {
	ID    string `json:"id"`
	State string `json:"state"` // serving.Replica*, or "gone"
	// Endpoint is host:port of its model server while it runs one.
	Endpoint string `json:"endpoint,omitempty"`
	// LoadSeconds is the model-load time measured by its agent: from
	// the server's start to its first ready probe; set with ready.
	LoadSeconds float64 `json:"load_seconds,omitempty"`
	// ProvisionSeconds is from the replica's request to its instance
	// running; set with ready.
	ProvisionSeconds float64 `json:"provision_seconds,omitempty"`
	// Instance is what it runs on, once it holds one.
	Instance *workload.InstanceRef `json:"instance,omitempty"`
	// Lost says the replica lost its instance without notice since its
	// last report; Message, with Failed, why its server failed (its last
	// lines).
	Lost    bool   `json:"lost,omitempty"`
	Failed  bool   `json:"failed,omitempty"`
	Message string `json:"message,omitempty"`
	// Stopped, with state warm, says its instance is stopped, costing
	// StoppedPricePerHour; a warm entry not stopped runs at full price.
	Stopped             bool    `json:"stopped,omitempty"`
	StoppedPricePerHour float64 `json:"stopped_price_per_hour,omitempty"`
	// Warm, with ready, says it was a warm-pool entry promoted: its
	// start-up was StartSeconds (starting its stopped instance, if it
	// was) and LoadSeconds, not a provision.
	Warm         bool    `json:"warm,omitempty"`
	StartSeconds float64 `json:"start_seconds,omitempty"`
	// CostUSD is what its instances cost so far.
	CostUSD float64   `json:"cost_usd"`
	At      time.Time `json:"at"`
}

// replicaGone is the state a replica reports when it has ended.
const replicaGone = "gone"

// replicaRun is one ServiceReplica: its state, its input, and the
// workload it shares with training runs and environments.
type replicaRun struct {
	ReplicaWorkState
	*workload.Workload
	in        ReplicaInput
	job       spec.JobSpec
	opts      workload.RunOptions
	requested time.Time
	signals   []workload.SignalHandler
}

func (w *Replicas) startReplica(ctx workflow.Context, in ReplicaInput, carried *ReplicaWorkState) (*replicaRun, error) {
	info := workflow.GetInfo(ctx)
	ss := in.Service
	ss.Normalize()
	r := &replicaRun{in: in, job: replicaJob(ss, in.ID), opts: w.Options, requested: info.WorkflowStartTime}
	r.Workload = &workload.Workload{WorkflowID: info.WorkflowExecution.ID, Identity: info.FirstRunID, Kind: admission.Service, Host: r, Market: workload.WallClock{}}
	r.Held, r.Counts, r.Workload.Spec, r.Workload.Opts = &r.Holding, &r.Record, &r.job, &r.opts
	if carried != nil {
		r.ReplicaWorkState = *carried
		if r.Options != nil {
			r.opts = r.Options.Filled()
		}
		if r.Pool != nil {
			r.Market = workload.PoolGrant{}
		}
		return r, r.registerHandlers(ctx)
	}
	if o := workload.RecordOptions(ctx, w.Options); o != nil {
		r.Options, r.opts = o, o.Filled()
	}
	r.ReplicaWorkState = ReplicaWorkState{Options: r.Options, State: serving.ReplicaStarting, Priority: ss.Priority,
		Record: workload.Record{Failures: []workload.Failure{}}, Warm: in.Warm}
	return r, r.registerHandlers(ctx)
}

// replicaJob is the JobSpec a replica's attempts run: the service's
// server as the command, its resources and priority, its placement's
// tier, on one node, with no end of its own.
func replicaJob(ss spec.ServiceSpec, id string) spec.JobSpec {
	return spec.JobSpec{
		ID: strings.ReplaceAll(id, "/", "-"), Team: ss.Team, Priority: ss.Priority, Tier: ss.Placement.Tier(),
		Work: spec.Duration(spec.MaxWork), Resources: ss.Resources, Command: ss.Command, Env: ss.Env, Workdir: ss.Workdir,
		Policy: spec.DefaultPolicy,
	}
}

// open lists what the replica may acquire and chooses how it finds
// capacity: through the capacity pool, or on its own.
func (r *replicaRun) open(ctx workflow.Context) error {
	if err := r.ListOfferings(ctx); err != nil {
		return err
	}
	if r.Seat().Join(ctx) {
		r.Market = workload.PoolGrant{}
	}
	return nil
}

// serve runs the model server on the instance held until the attempt
// ends, and returns the verdict its end comes to.
func (r *replicaRun) serve(ctx workflow.Context) (workload.Verdict, error) {
	if r.MustStop(ctx) != workload.GoOn {
		return workload.Verdict{Ending: workload.EndStopped}, nil
	}
	r.Enter(ctx, workflows.StateRunning)
	return r.Follow(ctx, r.Launch(ctx, r.attemptInput(), workflow.Now(ctx)))
}

// attemptInput is what the agent runs: the server as a development
// environment's command whose files are scratch, ready at its probe. On
// a notice it runs on for drain_timeout (the agent keeps at most half the
// window), so the requests it holds finish.
func (r *replicaRun) attemptInput() activities.TrainingInput {
	l := r.Lease
	rd := r.in.Service.Readiness
	if rd == nil {
		rd = &spec.Readiness{}
	}
	return activities.TrainingInput{
		Spec: r.job, Attempt: l.Attempt, InstanceID: l.Instance.ID, RunIdentity: r.Identity,
		StopGrace: r.opts.StopGrace,
		Dev: &activities.DevInput{
			Host: l.Instance.Address, NoticeGrace: r.in.Service.DrainTimeout.D(),
			Ready: &activities.ReadyInput{Path: rd.Path, InitialDelay: rd.InitialDelay.D(), Period: rd.Period.D(), Timeout: rd.Timeout.D()},
		},
	}
}

// settle acts once on an attempt's verdict: a server that failed (exited,
// or never ready) or an instance lost is the recovery's, as a run's; a
// stop gives the instance back.
func (r *replicaRun) settle(ctx workflow.Context, v workload.Verdict) error {
	r.Endpoint = ""
	switch v.Ending {
	case workload.EndCompleted, workload.EndTrainerFailed:
		msg := v.Message
		if msg == "" {
			msg = v.End.Res.Message
		}
		r.report(ctx, serving.ReplicaStarting, func(p *ReplicaReport) { p.Failed, p.Message = true, msg })
		if v.Ending == workload.EndCompleted {
			v.Ending = workload.EndTrainerFailed // a server ends only when stopped
		}
		return r.Recover().Run(ctx, r.Recover().LossOf(ctx, v))
	case workload.EndLost, workload.EndTaken, workload.EndCheckpointsFailed:
		l := r.Recover().LossOf(ctx, v)
		r.report(ctx, serving.ReplicaStarting, func(p *ReplicaReport) { p.Lost = !l.Noticed() })
		return r.Recover().Run(ctx, l)
	}
	reason := activities.ReleaseScaledIn
	if r.MustStop(ctx) == workload.StopYield {
		reason = activities.ReleaseYielded
		r.report(ctx, serving.ReplicaStarting, nil)
	}
	r.Release(ctx, reason)
	return nil
}

// end gives back what the replica holds and tells its service it is
// gone; continue-as-new passes straight through.
func (r *replicaRun) end(ctx workflow.Context, err error) (ReplicaReport, error) {
	var next *workflow.ContinueAsNewError
	if errors.As(err, &next) {
		r.ReleaseNow(ctx)
		return ReplicaReport{ID: r.in.ID, State: r.State}, err
	}
	ctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	defer r.Seat().Leave(ctx)
	if a := r.Attempt; a != nil {
		a.Stop()
		r.ObserveResult(ctx, a.Wait(ctx))
	}
	reason := activities.ReleaseScaledIn
	if err != nil {
		reason = activities.ReleaseFailed
		var canceled *temporal.CanceledError
		if errors.As(err, &canceled) {
			reason, err = activities.ReleaseCleanup, nil
		}
	}
	r.Release(ctx, reason)
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	out := r.report(ctx, replicaGone, func(p *ReplicaReport) { p.Failed, p.Message = err != nil, msg })
	return out, err
}

// report sets the replica's state and tells its service, with what edit
// adds; it returns what it told.
func (r *replicaRun) report(ctx workflow.Context, state string, edit func(*ReplicaReport)) ReplicaReport {
	r.State = state
	now := workflow.Now(ctx)
	p := ReplicaReport{ID: r.in.ID, State: state, Endpoint: r.Endpoint, CostUSD: r.Held.Ledger.CostUSD(now), At: now}
	if state == serving.ReplicaStarting || state == replicaGone {
		p.Endpoint = ""
	}
	if l := r.Lease; l != nil {
		p.Instance = l.Ref()
	}
	if edit != nil {
		edit(&p)
	}
	if err := workflow.SignalExternalWorkflow(ctx, r.in.Parent, "", workflows.SignalReplica, p).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("the service was not told of its replica", "state", state, "error", err)
	}
	r.ShowDetails(ctx)
	return p
}

// drain takes the replica out of service for good: its service shows it
// draining at once, and the attempt stops once drain_timeout has passed,
// so what it holds finishes first.
func (r *replicaRun) drain(ctx workflow.Context) {
	if r.Draining {
		return
	}
	r.Draining = true
	r.DrainUntil = workflow.Now(ctx).Add(r.in.Service.DrainTimeout.D())
	r.report(ctx, serving.ReplicaDraining, nil)
	workflow.Go(ctx, func(ctx workflow.Context) {
		a := r.Attempt
		if a == nil {
			return
		}
		if _, err := workload.WaitFor(ctx, r.DrainUntil.Sub(workflow.Now(ctx)), "drain "+r.in.ID+" for drain_timeout", func() bool { return r.Attempt != a }); err != nil {
			return
		}
		if r.Attempt == a {
			a.Stop()
		}
	})
}

// The replica is its workload's host.

// Enter: the service sees a replica starting until its server is ready;
// a loss or a yield starts it again.
func (r *replicaRun) Enter(ctx workflow.Context, s workflows.State) {
	switch s {
	case workflows.StateAcquiring, workflows.StateWaiting, workflows.StateQueued, workflows.StatePreempted:
		if r.State != serving.ReplicaStarting && !r.Draining {
			r.report(ctx, serving.ReplicaStarting, nil)
		}
	}
}

// MustStop: a replica draining for good holds nothing more; one asked by
// the pool to yield moves.
func (r *replicaRun) MustStop(ctx workflow.Context, except ...workload.StopWhy) workload.StopWhy {
	switch {
	case r.Draining && !slices.Contains(except, workload.StopPause):
		return workload.StopPause
	case r.Seat().YieldAsked() && !slices.Contains(except, workload.StopYield):
		return workload.StopYield
	}
	return workload.GoOn
}

func (r *replicaRun) HoldWhilePaused(workflow.Context) error { return nil }
func (r *replicaRun) OnHold() bool                           { return r.Draining }
func (r *replicaRun) Ending() bool                           { return r.Draining }
func (r *replicaRun) CurrentPriority() int                   { return r.Priority }

// AttemptStarted: a replica has no budget of its own to watch (its
// service's cost is its replicas'), and a drain asked before the attempt
// started stops it when it is due.
func (r *replicaRun) AttemptStarted(ctx workflow.Context, a *workload.Attempt) {
	if r.Draining {
		workflow.Go(ctx, func(ctx workflow.Context) {
			if _, err := workload.WaitFor(ctx, r.DrainUntil.Sub(workflow.Now(ctx)), "drain "+r.in.ID, func() bool { return r.Attempt != a }); err == nil && r.Attempt == a {
				a.Stop()
			}
		})
	}
}

// OnProgress folds the agent's report in: the record's, the server's
// endpoint, its first ready probe (with the model-load time, which feeds
// the service's lead time), and an interruption notice, on which the
// replica drains within the notice's grace.
func (r *replicaRun) OnProgress(ctx workflow.Context, p activities.Progress) {
	r.Workload.OnProgress(ctx, p)
	a := r.Attempt
	if a == nil || p.Attempt != a.Number() {
		return
	}
	if p.Kind == activities.ProgressNotice && r.State != serving.ReplicaDraining {
		r.report(ctx, serving.ReplicaDraining, nil)
		return
	}
	d := p.Dev
	if d == nil {
		return
	}
	r.Endpoint = d.Endpoint
	if d.Serving && p.Kind == activities.ProgressServing && r.State == serving.ReplicaStarting && !r.Draining {
		r.report(ctx, serving.ReplicaReady, func(rp *ReplicaReport) { r.startup(rp, d.LoadSeconds) })
	}
}

func (r *replicaRun) registerHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandlerWithOptions(ctx, workflows.QueryStatus, func() (ReplicaWorkState, error) {
		return r.ReplicaWorkState, nil
	}, workflow.QueryHandlerOptions{Description: "the replica's state, endpoint, instance, losses and failures"}); err != nil {
		return err
	}
	r.signals = []workload.SignalHandler{
		workload.OnSignal(ctx, workflows.SignalReplicaDrain, func(ctx workflow.Context, c workflow.ReceiveChannel) {
			c.Receive(ctx, nil)
			r.drain(ctx)
		}),
		workload.OnSignal(ctx, workflows.SignalReplicaPromote, func(ctx workflow.Context, c workflow.ReceiveChannel) {
			c.Receive(ctx, nil)
			r.promote()
		}),
		workload.OnSignalOf(ctx, workflows.SignalProgress, r.OnProgress),
		workload.OnSignalOf(ctx, workflows.SignalCapacityGranted, func(_ workflow.Context, a admission.Allocation) { r.Seat().Granted(a) }),
		workload.OnSignalOf(ctx, workflows.SignalYield, func(_ workflow.Context, y workflows.YieldRequest) { r.Seat().Yield(y, r.Draining) }),
		workload.OnSignalOf(ctx, workflows.SignalInstanceTaken, func(_ workflow.Context, t workflows.InstanceTaken) { r.Taken.Note(t) }),
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			sel := workflow.NewSelector(ctx)
			workload.AddSignals(ctx, sel, r.signals)
			sel.Select(ctx)
			if r.HistoryFull(ctx) && (r.Attempt == nil || r.Attempt.MayContinue) {
				r.HandOn = true
			}
		}
	})
	return nil
}

// ShowDetails keeps the Web UI's current details of the replica: its
// state, endpoint and instance.
func (r *replicaRun) ShowDetails(ctx workflow.Context) {
	line := "**" + r.State + "**"
	if r.Endpoint != "" && r.State != serving.ReplicaStarting {
		line += " at " + r.Endpoint
	}
	if l := r.Lease; l != nil {
		line += " on " + workload.OfferingPlace(l.Offering()) + " (" + l.Instance.ID + ")"
	}
	workflow.SetCurrentDetails(ctx, line+" · replica of "+r.in.Parent)
}

// ContinueAsNew hands the replica on to its next run, the attempt under
// way going on.
func (r *replicaRun) ContinueAsNew(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	workload.DrainSignals(ctx, r.signals)
	return workflow.NewContinueAsNewError(ctx, workflows.ServiceReplicaName, r.in, &r.ReplicaWorkState)
}
