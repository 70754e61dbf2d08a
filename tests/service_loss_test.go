package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	"refuel/workflows/inference"
	"refuel/workflows/registry"

	"refuel/controlplane"
	"refuel/jobs"
	"refuel/pkg/capacity"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/spec"
)

// TestServiceReplacesAReclaimedSpotReplica: a service's replica runs on
// spot in the one zone with stock, through the AWS SDK on the simulated
// cloud. The stock there runs out; the cloud serves a notice and takes
// the instance. The service finds the replica lost, releases it and
// brings up a replacement in the zone that now has stock.
func TestServiceReplacesAReclaimedSpotReplica(t *testing.T) {
	parallel(t)
	s := startAWSStack(t, map[string][]int{"us-west-2a": {1, 0, 0, 0}, "us-west-2b": {0, 1, 1, 1}}, sim.Quotas{}, func(c *controlplane.Config) {
		c.Workflows = registry.New()
		c.Workflows.Service.LossCheckInterval = time.Second
	})
	ctx := context.Background()
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	ss := spec.ServiceSpec{
		ID: "chat-spot", Team: "serving", Priority: 60, MinReplicas: 1, MaxReplicas: 1,
		Target: spec.ScalingTarget{QPS: 10}, Placement: spec.PlacementSpotFirst, ModelLoad: spec.Duration(time.Second),
		Resources: spec.Resources{Zones: []string{"us-west-2a", "us-west-2b"}},
	}
	svc, err := jobs.StartService(ctx, s.Client, ss)
	if err != nil {
		t.Fatal(err)
	}
	first := waitService(t, wctx, s, ss.ID, func(st inference.Status) bool { return st.Ready == 1 })
	if in := first.Replicas[0].Instance; in.Market != string(capacity.Spot) || in.Zone != "us-west-2a" {
		t.Fatalf("replica on %s in %s; want spot in us-west-2a, the zone with stock", in.Market, in.Zone)
	}
	s.Sim.Advance(1) // us-west-2a runs out; us-west-2b has stock

	after := waitService(t, wctx, s, ss.ID, func(st inference.Status) bool {
		return st.ReplicasLost == 1 && st.Ready == 1 && st.Replicas[0].ID != first.Replicas[0].ID
	})
	if in := after.Replicas[0].Instance; in.Market != string(capacity.Spot) || in.Zone != "us-west-2b" {
		t.Errorf("replacement on %s in %s; want spot in us-west-2b", in.Market, in.Zone)
	}
	lost := false
	for _, f := range after.Failures {
		lost = lost || (f.Class == "instance-lost" && strings.Contains(f.Message, first.Replicas[0].Instance.ID))
	}
	if !lost {
		t.Errorf("failures %+v; want the lost instance named", after.Failures)
	}
	if m := scrape(t, s.MetricsURL()); !strings.Contains(m, `reason="preempted"`) {
		t.Error(`/metrics lacks refuel_releases_total{reason="preempted"}`)
	}
	if err := jobs.StopService(ctx, s.Client, ss.ID); err != nil {
		t.Fatal(err)
	}
	_ = svc.Get(wctx, nil)
	if left, _ := s.Provider.List(ctx, nil); len(left) != 0 {
		t.Errorf("instances running after the service stopped: %v", left)
	}
	recordHistory(t, s.Client, ss.ID, "inference-service-replica-lost")
}
