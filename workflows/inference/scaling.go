package inference

import (
	"cmp"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/autoscale"
	"refuel/pkg/capacity"
)

func (s *service) observe(ctx workflow.Context, m autoscale.Metrics) {
	now := workflow.Now(ctx)
	if m.At.IsZero() || m.At.After(now) || (s.LastMetrics != nil && m.At.Before(s.LastMetrics.At)) {
		m.At = now
	}
	if m.Replicas == 0 {
		m.Replicas = s.fleet().Ready
	}
	s.LastMetrics = &m
	s.policy().Observe(m)
}

// policy is what the service scales by: the ForecastScaler, or for a
// service started before it, the Autoscaler.
func (s *service) policy() autoscale.Policy {
	if s.ForecastScaler != nil {
		return s.ForecastScaler
	}
	return &s.Autoscaler
}

// leadTime is how far ahead the policy plans.
func (s *service) leadTime() time.Duration {
	if s.ForecastScaler != nil {
		return s.ForecastScaler.Lead.Estimate()
	}
	return s.Autoscaler.Lead.Estimate()
}

// decide asks the autoscaler what the fleet should be and converges on
// it. Status keeps the decisions that changed the fleet, not every one.
func (s *service) decide(ctx workflow.Context) {
	now := workflow.Now(ctx)
	// Services recorded before options were decide as they did: their
	// latest report counts for ever.
	if s.Options != nil {
		s.Autoscaler.StaleAfter = s.opts.MetricsStaleAfter
	}
	if s.ForecastScaler != nil {
		s.ForecastScaler.StaleAfter = s.opts.MetricsStaleAfter
	}
	d := s.policy().Decide(now, s.fleet())
	if len(s.Decisions) == 0 || d.Replicas != s.Desired.Replicas || d.Warm != s.Desired.Warm {
		s.Decisions = append(s.Decisions, DecisionRecord{Time: now, Replicas: d.Replicas, Warm: d.Warm, Reason: d.Reason, Explanation: d.Explanation})
		if n := len(s.Decisions); n > maxDecisions {
			s.Decisions = s.Decisions[n-maxDecisions:]
		}
		workflow.GetLogger(ctx).Info("scaling", "replicas", d.Replicas, "warm", d.Warm, "reason", d.Reason)
	}
	s.Desired, s.DecidedAt = d, now
	s.converge(ctx)
	s.ShowDetails(ctx)
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
	for n := len(warm); n < d.Warm && s.keepsWarm(ctx); n++ {
		s.request(ctx, ReplicaWarm)
	}
	s.scaleIn(ctx, warm, d.Warm)
}

// scaleOut adds a serving replica: a prepared warm instance if there is
// one, with only its start (a stopped one) and its model left to load;
// else a warm-pool entry still
// on its way, which is further along than a new request; else a new one.
func (s *service) scaleOut(ctx workflow.Context) {
	warm := s.inState(ReplicaWarm)
	slices.SortStableFunc(warm, func(a, b *Replica) int {
		return cmp.Compare(placedRank(b), placedRank(a))
	})
	if len(warm) == 0 {
		s.request(ctx, ReplicaStarting)
		return
	}
	w := warm[0]
	w.State = ReplicaStarting
	if s.ServesReplicas {
		w.FromWarm, w.Stopped = true, false
		s.children().promote(ctx, w)
		return
	}
	if w.Lease != nil {
		w.FromWarm = true
		workflow.Go(ctx, func(ctx workflow.Context) { s.placement().promote(ctx, w) })
	} // else its bring-up goes on, and now ends serving
}

// keepsWarm reports whether the service keeps warm-pool entries: a
// serving service keeps them as ServiceReplica children started warm
// since servingWarmVersion; before it, it kept none.
func (s *service) keepsWarm(ctx workflow.Context) bool {
	return !s.ServesReplicas || workflow.GetVersion(ctx, servingWarmVersion, workflow.DefaultVersion, 1) >= 1
}

// scaleIn releases from rs all but keep, in releaseOrder.
func (s *service) scaleIn(ctx workflow.Context, rs []*Replica, keep int) {
	if len(rs) <= keep {
		return
	}
	order := releaseOrder
	if s.ServesReplicas && workflow.GetVersion(ctx, servingReleaseOrderVersion, workflow.DefaultVersion, 1) < 1 {
		order = releaseOrderUnplaced
	}
	for _, r := range order(rs)[:len(rs)-keep] {
		s.Release(ctx, r, activities.ReleaseScaledIn)
	}
}

// releaseOrder is the order to give replicas back in when scaling in.
// Replicas holding no instance yet go first: releasing one costs no
// serving capacity and saves its acquisition. The rest follow
// admission.ReleaseOrder: burst before base (already paid for), the most
// expensive first, spot before on-demand at equal price, the most
// recently acquired first, so a replica still loading its model goes
// before a serving one like it.
func releaseOrder(rs []*Replica) []*Replica {
	return releaseOrderOf(rs, (*Replica).allocation)
}

// releaseOrderUnplaced is the order services with serving replicas
// recorded before servingReleaseOrderVersion used: it knew no replica's
// instance (a ServiceReplica child holds it), so it went by id alone.
func releaseOrderUnplaced(rs []*Replica) []*Replica {
	return releaseOrderOf(rs, func(r *Replica) admission.Allocation {
		a := admission.Allocation{Request: admission.Request{ID: r.ID}, Layer: r.Layer}
		if r.Lease != nil {
			a.AdmittedAt = r.Since
			a.Offerings = []capacity.Offering{r.Offering()}
		}
		return a
	})
}

func releaseOrderOf(rs []*Replica, allocation func(*Replica) admission.Allocation) []*Replica {
	allocs := make([]admission.Allocation, len(rs))
	for i, r := range rs {
		allocs[i] = allocation(r)
	}
	out := make([]*Replica, 0, len(rs))
	for _, a := range admission.ReleaseOrder(allocs) {
		i := slices.IndexFunc(rs, func(r *Replica) bool { return r.ID == a.Request.ID })
		out = append(out, rs[i])
	}
	slices.SortStableFunc(out, func(a, b *Replica) int { return cmp.Compare(placedRank(a), placedRank(b)) })
	return out
}

// allocation describes the replica as the pool would, for ReleaseOrder:
// from its lease, or, for a serving replica whose ServiceReplica child
// holds the lease, from the instance the child reported it runs on.
func (r *Replica) allocation() admission.Allocation {
	a := admission.Allocation{Request: admission.Request{ID: r.ID}, Layer: r.Layer}
	switch {
	case r.Lease != nil:
		a.AdmittedAt = r.Since
		a.Offerings = []capacity.Offering{r.Offering()}
	case r.RunsOn != nil:
		on := r.RunsOn
		a.AdmittedAt = on.Since
		a.Offerings = []capacity.Offering{{Market: capacity.Market(on.Market), Zone: on.Zone, PricePerHour: on.PricePerHour}}
		if a.Layer == "" {
			a.Layer = admission.BurstLayer
			if a.Offerings[0].Market == capacity.Base {
				a.Layer = admission.BaseLayer
			}
		}
	}
	return a
}

// placedRank is 1 for a replica holding an instance, 0 otherwise.
func placedRank(r *Replica) int {
	if r.Lease != nil || r.RunsOn != nil {
		return 1
	}
	return 0
}

func (s *service) fleet() autoscale.Fleet {
	var f autoscale.Fleet
	for _, r := range s.Replicas {
		switch {
		case r.State == ReplicaReady:
			f.Ready++
		case r.State == ReplicaStarting, r.State == ReplicaDraining && !r.Retiring:
			// A replica draining on a notice comes back on other capacity.
			f.Starting++
		case r.State == ReplicaWarm && (r.Lease != nil || r.RunsOn != nil):
			f.Warm++
		}
	}
	return f
}

// inState returns the replicas in any of the states, in request order.
func (s *service) inState(states ...ReplicaState) []*Replica {
	var out []*Replica
	for _, r := range s.Replicas {
		if slices.Contains(states, r.State) {
			out = append(out, r)
		}
	}
	return out
}
