package tests

import (
	"context"
	"io"
	"testing"
	"time"

	"refuel/controlplane"
	"refuel/jobs"
	"refuel/pkg/autoscale"
	"refuel/pkg/capacity"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/spec"
	"refuel/workflows/inference"
)

// TestServiceWarmPoolIsStopped: an on-demand service with a warm pool of
// one, through the AWS SDK on the simulated cloud. Its warm entry is an
// instance acquired and then stopped (StopInstances), paid for its
// volume, which starter cost shows as volume hours. Scaling out starts
// it (StartInstances) and it serves; stopping the service leaves no
// instance, running or stopped.
func TestServiceWarmPoolIsStopped(t *testing.T) {
	parallel(t)
	s := startAWSStack(t, map[string][]int{"us-west-2a": {0}}, sim.Quotas{}, func(c *controlplane.Config) {
		c.Sim.StartTime = 2 * time.Second
	})
	ctx := context.Background()
	wctx, cancel := context.WithTimeout(ctx, 50*time.Second)
	defer cancel()
	ss := spec.ServiceSpec{
		ID: "chat-warm", Team: "serving", Priority: 60, MinReplicas: 1, MaxReplicas: 2, WarmPool: 1,
		Target: spec.ScalingTarget{QPS: 10}, Placement: spec.PlacementOnDemand, ModelLoad: spec.Duration(time.Second),
		LeadTime: "10s", Resources: spec.Resources{Zones: []string{"us-west-2a"}},
	}
	svc, err := jobs.StartService(ctx, s.Client, ss)
	if err != nil {
		t.Fatal(err)
	}
	before := waitService(t, wctx, s, ss.ID, func(st inference.Status) bool { return st.Ready == 1 && stoppedReplica(st) != nil })
	warm := stoppedReplica(before)
	if before.Warm != 1 || warm.Instance == nil || warm.Instance.Market != string(capacity.OnDemand) || warm.StoppedPricePerHour <= 0 ||
		warm.StoppedPricePerHour >= warm.Instance.PricePerHour {
		t.Fatalf("warm entry %+v (%d warm); want one on-demand instance, stopped at its volume's price", warm, before.Warm)
	}
	if st, err := s.Sim.Status(warm.Instance.ID); err != nil || st.State != capacity.StateStopped {
		t.Fatalf("the cloud has warm instance %s %s (%v); want stopped", warm.Instance.ID, st.State, err)
	}
	time.Sleep(time.Second) // some stopped time to book
	rep, err := jobs.Costs(ctx, s.Client, `WorkflowId = "`+ss.ID+`"`, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Jobs) != 1 || rep.Jobs[0].Cost.VolumeHours <= 0 || len(rep.Rollup) == 0 || rep.Rollup[0].VolumeHours <= 0 {
		t.Fatalf("cost report %+v; want the service's stopped time as volume hours", rep)
	}

	// 1.5 replicas' load, reported every second (the forecaster keeps
	// one sample per 10 s) until the service stops.
	rctx, stopReports := context.WithCancel(wctx)
	defer stopReports()
	go func() {
		for rctx.Err() == nil {
			_ = jobs.ReportLoad(rctx, s.Client, ss.ID, autoscale.Metrics{At: time.Now(), QPS: 15})
			select {
			case <-rctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	after := waitService(t, wctx, s, ss.ID, func(st inference.Status) bool {
		for _, r := range st.Replicas {
			if r.ID == warm.ID && r.State == inference.ReplicaReady {
				return st.Ready == 2
			}
		}
		return false
	})
	var decided time.Time
	for _, d := range after.Decisions {
		if d.Replicas == 2 && decided.IsZero() {
			decided = d.Time
		}
	}
	for _, r := range after.Replicas {
		if r.ID != warm.ID {
			continue
		}
		if r.Instance.ID != warm.Instance.ID {
			t.Errorf("promoted %s runs on %s; want its stopped instance %s started", r.ID, r.Instance.ID, warm.Instance.ID)
		}
		t.Logf("the stopped warm entry served %v after the scale-out was decided (start time 2s, model load 1s)", r.ReadyAt.Sub(decided).Round(100*time.Millisecond))
	}
	if st, _ := s.Sim.Status(warm.Instance.ID); st.State != capacity.StateRunning {
		t.Errorf("promoted instance %s is %s; want running", warm.Instance.ID, st.State)
	}
	// The pool refills with a stopped entry.
	waitService(t, wctx, s, ss.ID, func(st inference.Status) bool { return stoppedReplica(st) != nil })

	stopReports()
	if err := jobs.StopService(ctx, s.Client, ss.ID); err != nil {
		t.Fatal(err)
	}
	_ = svc.Get(wctx, nil)
	if left, _ := s.Provider.List(ctx, nil); len(left) != 0 {
		t.Errorf("instances running after the service stopped: %v", left)
	}
	if left, _ := s.Sim.ListStopped(ctx, nil); len(left) != 0 {
		t.Errorf("instances stopped after the service stopped: %v", left)
	}
	recordHistory(t, s.Client, ss.ID, "inference-service-warm-stopped")
}

// stoppedReplica is the service's first warm-pool entry whose instance
// is stopped, or nil.
func stoppedReplica(st inference.Status) *inference.ReplicaStatus {
	for i, r := range st.Replicas {
		if r.State == inference.ReplicaStopped {
			return &st.Replicas[i]
		}
	}
	return nil
}
