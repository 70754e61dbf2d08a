package inference

import (
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/workflow"

	"refuel/pkg/autoscale"
	"refuel/pkg/capacity"
	"refuel/pkg/serving"
	"refuel/workflows"
)

// A service with a command serves: each replica is a ServiceReplica
// child running the model server, one balancer endpoint (or several,
// each in a worker) learns the ready replicas from status, and the
// balancers' traffic reports drive the autoscaler.

// children are the service's ServiceReplica children: started, drained,
// heard from and forgotten.
type children struct{ s *service }

func (s *service) children() children { return children{s} }

// balancers are the balancers in front of the service: what they report
// of its traffic, and what they are told to enforce.
type balancers struct{ s *service }

func (s *service) balancers() balancers { return balancers{s} }

// trafficStale is how long a balancer that stopped reporting still
// counts: three of its report intervals.
const trafficStale = 3 * serving.ReportEvery

// start starts the replica's ServiceReplica. The child is
// abandoned when this run closes: it outlives continue-as-new and
// reports to the service's workflow ID, whichever run is current; a
// cancelled service cancels its children itself (end).
func (c children) start(ctx workflow.Context, r *Replica) {
	s := c.s
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:        r.ID,
		ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON,
		StaticSummary:     "replica " + r.ID + " of " + s.id,
	})
	f := workflow.ExecuteChildWorkflow(cctx, workflows.ServiceReplicaName, ReplicaInput{Service: s.spec, ID: r.ID, Parent: s.id, Warm: r.State == ReplicaWarm})
	s.inFlight++ // continue-as-new waits until the child has started
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer func() { s.inFlight-- }()
		if err := f.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
			s.AddFailure(ctx, string(capacity.Unknown), "", "replica "+r.ID+" did not start: "+err.Error())
			c.forget(ctx, r)
		}
	})
}

// retire drains a replica for good: status shows it draining at once,
// so balancers send it nothing new, and its ServiceReplica gives its
// instance back once what it holds has finished.
func (c children) retire(ctx workflow.Context, r *Replica) {
	s := c.s
	if r.Retiring {
		return
	}
	r.Retiring, r.State = true, ReplicaDraining
	s.ShowDetails(ctx)
	s.inFlight++
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer func() { s.inFlight-- }()
		if err := workflow.SignalExternalWorkflow(ctx, r.ID, "", workflows.SignalReplicaDrain, nil).Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("replica not told to drain", "replica", r.ID, "error", err)
		}
	})
}

// promote takes a warm-pool replica into service: its ServiceReplica
// starts its instance, if stopped, and runs the model server. One not
// yet holding its instance serves once it does.
func (c children) promote(ctx workflow.Context, r *Replica) {
	s := c.s
	s.ShowDetails(ctx)
	s.inFlight++
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer func() { s.inFlight-- }()
		if err := workflow.SignalExternalWorkflow(ctx, r.ID, "", workflows.SignalReplicaPromote, nil).Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("warm replica not told to serve", "replica", r.ID, "error", err)
		}
	})
}

// onReport folds in what a replica reports: its state and endpoint; on
// its first ready, its start-up (the measured model-load time) for the
// learned lead time; a server that failed or an instance lost without
// notice, counted; a replica gone, forgotten, and replaced if it was
// still wanted.
func (c children) onReport(ctx workflow.Context, p ReplicaReport) {
	s := c.s
	r := s.replica(p.ID)
	if r == nil {
		return
	}
	if p.Lost {
		s.ReplicasLost++
	}
	if p.Failed && p.Message != "" {
		s.ReplicaFailures++
		offering := ""
		if p.Instance != nil {
			offering = p.Instance.Offering
		}
		s.AddFailure(ctx, string(capacity.TrainerFault), offering, r.ID+": "+p.Message)
	}
	r.Endpoint, r.RunsOn, r.CostUSD = p.Endpoint, p.Instance, p.CostUSD
	now := workflow.Now(ctx)
	switch p.State {
	case replicaGone:
		s.EarlierCostUSD += p.CostUSD
		c.forget(ctx, r)
		return
	case string(ReplicaWarm):
		if r.State == ReplicaWarm {
			r.Stopped, r.StoppedPricePerHour = p.Stopped, p.StoppedPricePerHour
		}
	case serving.ReplicaReady:
		if r.State == ReplicaStarting {
			r.State, r.ReadyAt = ReplicaReady, now
			s.policy().Started(autoscale.Startup{Load: seconds(p.LoadSeconds), Provision: seconds(p.ProvisionSeconds), Init: seconds(p.StartSeconds), Warm: p.Warm})
		}
	case serving.ReplicaDraining:
		r.State = ReplicaDraining
	case serving.ReplicaStarting:
		// A warm entry reports starting while it acquires its instance:
		// it stays warm until promoted.
		if !r.Retiring && r.State != ReplicaWarm {
			r.State = ReplicaStarting
		}
	}
	s.ShowDetails(ctx)
}

// forget drops a replica that has ended, and converges: one still
// wanted is replaced.
func (c children) forget(ctx workflow.Context, r *Replica) {
	s := c.s
	s.Replicas = slices.DeleteFunc(s.Replicas, func(x *Replica) bool { return x == r })
	s.converge(ctx)
	s.ShowDetails(ctx)
}

// onReport keeps a balancer's report and feeds the service's traffic
// across its balancers to the autoscaler: the rate, the queue and the
// requests held (in flight and queued) for a concurrency target.
func (b balancers) onReport(ctx workflow.Context, rep serving.Report) {
	s := b.s
	s.Traffic = serving.Keep(s.Traffic, rep, trafficStale)
	t := serving.Total(s.Traffic)
	// The requests finished and missed are this report's alone: the
	// other balancers' latest were counted when they came.
	m := autoscale.Metrics{
		At: rep.At, QPS: t.RPS, QueueLength: float64(t.Queued), InFlight: float64(t.InFlight + t.Queued),
		Serving: t.Serving, Requests: float64(rep.Requests), Missed: float64(rep.Missed()),
	}
	if l := s.LastMetrics; l != nil {
		m.GPUUtilization = l.GPUUtilization // from the metrics signal, if an external source sends it
	}
	s.observe(ctx, m)
	s.decide(ctx)
}

// endpoint is where clients reach the service: the balancer that
// reported last.
func (b balancers) endpoint() string {
	s := b.s
	var at time.Time
	out := ""
	for _, r := range s.Traffic {
		if !r.At.Before(at) {
			at, out = r.At, r.Balancer
		}
	}
	return out
}

// traffic is the service's traffic across its balancers; nil before any
// reported.
func (b balancers) traffic() *serving.Traffic {
	s := b.s
	if len(s.Traffic) == 0 {
		return nil
	}
	t := serving.Total(s.Traffic)
	return &t
}

// settings are what a balancer enforces for the service; nil for a
// capacity-only service.
func (b balancers) settings() *serving.Settings {
	s := b.s
	if !s.spec.Serves() {
		return nil
	}
	st := &serving.Settings{
		MaxConcurrency: s.spec.MaxConcurrency, QueueTimeoutSeconds: s.spec.QueueTimeout.D().Seconds(),
		DrainTimeoutSeconds: s.spec.DrainTimeout.D().Seconds(),
	}
	if s.spec.SLO != nil {
		st.SLOLatencySeconds = s.spec.SLO.Latency.D().Seconds()
	}
	return st
}

func seconds(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }

// cost is what the ServiceReplicas still running cost so far, as
// they last reported.
func (c children) cost() float64 {
	s := c.s
	usd := 0.0
	for _, r := range s.Replicas {
		usd += r.CostUSD
	}
	return usd
}
