package controlplane

import (
	"context"
	"sync"
	"testing"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/gce"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/cloud/sim/gceapi"
	"refuel/pkg/spec"
)

// A spot VM on the sim's Compute Engine endpoint, preempted: not listed
// while its notice runs (its agent may still be writing the final
// checkpoint), listed once it is gone, with its tags, though Compute
// Engine deleted it; one of another deployment and one still running are
// never listed.
func TestGCEReclaimsListsPreemptedInstancesOnceGone(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2025, 10, 4, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	cfg, _, err := gceapi.AddMarket(sim.Config{}, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Now = clock
	cloud, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := gceapi.Start(cloud, "127.0.0.1:0", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Close()
		_ = cloud.Close()
	})
	ctx := context.Background()
	gcfg := gce.Config{Project: "demo", Endpoint: srv.Endpoint(), Zones: []string{"us-central1-a"}, PollInterval: time.Millisecond, Clock: clock}
	c, err := gce.New(ctx, gcfg)
	if err != nil {
		t.Fatal(err)
	}
	r := newGCEReclaims(c)
	offerings, err := c.Offerings(ctx, spec.Resources{GPUs: 1, InstanceTypes: []string{"a2-highgpu-1g"}})
	if err != nil {
		t.Fatal(err)
	}
	var spot capacity.Offering
	for _, o := range offerings {
		if o.Market == capacity.Spot {
			spot = o
		}
	}
	if spot.Market != capacity.Spot {
		t.Fatalf("offerings %v: no spot a2-highgpu-1g", offerings)
	}
	launch := func(run, deployment string) capacity.Instance {
		t.Helper()
		inst, err := c.Acquire(ctx, capacity.Request{RunID: run, Identity: run + "-id", Offerings: []capacity.Offering{spot},
			Tags: map[string]string{capacity.TagManagedBy: capacity.ManagedBy, capacity.TagRun: run, capacity.TagDeployment: deployment}})
		if err != nil {
			t.Fatal(err)
		}
		return inst
	}
	taken, other, running := launch("taken", "d"), launch("elsewhere", "other"), launch("running", "d")
	tags := map[string]string{capacity.TagManagedBy: capacity.ManagedBy, capacity.TagDeployment: "d"}
	reclaimed := func() []string {
		t.Helper()
		got, err := r.Reclaimed(ctx, tags)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, i := range got {
			ids = append(ids, i.ID+"/"+i.Tags[capacity.TagRun])
		}
		return ids
	}
	if got := reclaimed(); len(got) != 0 {
		t.Fatalf("before any preemption: %v", got)
	}
	for _, id := range []string{taken.ID, other.ID} {
		if _, err := cloud.Interrupt(id, gceapi.NoticeWindow); err != nil {
			t.Fatal(err)
		}
	}
	if got := reclaimed(); len(got) != 0 {
		t.Errorf("during the notice: %v; want none yet", got)
	}
	mu.Lock()
	now = now.Add(gceapi.NoticeWindow + time.Second)
	mu.Unlock()
	if _, _, err := c.Describe(ctx, taken.ID); !capacity.IsNotFound(err) {
		t.Errorf("Describe of the preempted VM: %v; want it deleted", err)
	}
	got := reclaimed()
	if want := taken.ID + "/taken"; len(got) != 1 || got[0] != want {
		t.Errorf("after the notice: %v; want only %s (not %s of another deployment, not the running %s)", got, want, other.ID, running.ID)
	}
}
