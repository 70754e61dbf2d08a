package inference

import (
	"fmt"
	"strconv"

	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/internal/telemetry"
	"refuel/pkg/capacity"
	"refuel/workflows/workload"
)

// lossWatch asks the clouds whether they took back a replica's instance.
type lossWatch struct{ s *service }

func (s *service) lossWatch() lossWatch { return lossWatch{s} }

// watching reports whether this run of the service checks its
// replicas' instances.
func (l lossWatch) watching(ctx workflow.Context) bool {
	s := l.s
	return s.opts.LossCheckInterval > 0 && workflow.GetVersion(ctx, replicaLossVersion, workflow.DefaultVersion, 1) >= 1
}

// goCheck asks the clouds, in a coroutine of its own, whether they
// took back (or served a notice on) any replica's instance. A replica
// runs no activity on its machine that would fail when the machine goes,
// so this is how a service learns that spot stock ran out under it. Each
// lost replica is released (reason preempted) and counted, and the fleet
// converges again, which replaces it. One check runs at a time.
func (l lossWatch) goCheck(ctx workflow.Context) {
	s := l.s
	if s.checking || s.draining {
		return
	}
	var insts []capacity.Instance
	for _, r := range s.Replicas {
		if r.Lease != nil && r.State != ReplicaReleasing && !r.busy && !r.Stopped {
			insts = append(insts, r.Instance)
		}
	}
	if len(insts) == 0 {
		return
	}
	s.checking = true
	s.inFlight++
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer func() { s.checking, s.inFlight = false, s.inFlight-1 }()
		var lost []activities.LostInstance
		actx := workload.Titled(workload.ControlOptions(ctx), "did the clouds take back any of "+strconv.Itoa(len(insts))+" replicas' instances?")
		if err := workflow.ExecuteActivity(actx, activities.LostInstancesName, insts).Get(ctx, &lost); err != nil {
			workflow.GetLogger(ctx).Warn("could not check the replicas' instances; the next check tries again", "error", err)
			return
		}
		for _, gone := range lost {
			if r := l.holding(gone.ID); r != nil {
				l.onLost(ctx, r, gone.State)
			}
		}
		if len(lost) > 0 {
			s.converge(ctx)
		}
	})
}

// holding is the replica, not being released, that holds the instance.
func (l lossWatch) holding(instanceID string) *Replica {
	s := l.s
	for _, r := range s.Replicas {
		if r.Lease != nil && r.Instance.ID == instanceID && r.State != ReplicaReleasing {
			return r
		}
	}
	return nil
}

// onLost records that the cloud took back a replica's instance and
// releases the replica. One served a notice is let go at once rather
// than when the notice runs out: its replacement starts sooner.
func (l lossWatch) onLost(ctx workflow.Context, r *Replica, state capacity.State) {
	s := l.s
	o := r.Instance.Offering
	s.ReplicasLost++
	s.AddFailure(ctx, string(capacity.InstanceLost), o.Key(), fmt.Sprintf("the cloud took back replica %s's instance %s (%s)", r.ID, r.Instance.ID, state))
	workflow.GetMetricsHandler(ctx).WithTags(telemetry.OfferingTags(o)).Counter(telemetry.PreemptionsTotal).Inc(1)
	s.Release(ctx, r, activities.ReleasePreempted)
}
