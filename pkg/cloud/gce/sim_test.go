package gce_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/option"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/gce"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/cloud/sim/gceapi"
	"refuel/pkg/spec"
)

// simCloud serves a still market of the built-in GCP trace at tick (no
// agents: instances run at once) and returns it with its endpoint.
func simCloud(t *testing.T, tick int, quotas sim.Quotas, opts ...gceapi.Option) (*sim.Cloud, *gceapi.Server) {
	t.Helper()
	cfg, _, err := gceapi.AddMarket(sim.Config{}, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.StartTick, cfg.Quotas = tick, quotas
	cloud, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cloud.Close() })
	srv, err := gceapi.Start(cloud, "127.0.0.1:0", nil, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return cloud, srv
}

func provider(t *testing.T, srv *gceapi.Server, project string, zones ...string) *gce.Cloud {
	t.Helper()
	c, err := gce.New(t.Context(), gce.Config{Project: project, Zones: zones, Endpoint: srv.Endpoint(), PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func request(run string, attempt int, offerings ...capacity.Offering) capacity.Request {
	return capacity.Request{RunID: run, Identity: run + "-first", Attempt: attempt, Offerings: offerings,
		Tags: map[string]string{capacity.TagPool: "gpu", capacity.TagDeployment: "test"}}
}

func TestOfferingsFromZonesMachineTypes(t *testing.T) {
	_, srv := simCloud(t, 0, sim.Quotas{})
	c := provider(t, srv, "any-project", "us-central1-a", "us-east4-a")
	got, err := c.Offerings(t.Context(), spec.Resources{GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]float64{}
	for _, o := range got {
		keys[o.Key()] = o.PricePerHour
	}
	for key, price := range map[string]float64{
		"gce/a3-highgpu-1g/us-central1-a/spot":      2.3724,
		"gce/a3-highgpu-1g/us-central1-a/on-demand": 10.3157,
		"gce/a3-highgpu-1g/us-east4-a/spot":         1.8567,
		"gce/a2-highgpu-1g/us-central1-a/spot":      1.1020,
		"gce/g2-standard-4/us-central1-a/on-demand": 0.7068,
	} {
		if p, ok := keys[key]; !ok || p != price {
			t.Errorf("offering %s: price %v (offered %v), want %v", key, p, ok, price)
		}
	}
	if _, ok := keys["gce/a2-highgpu-1g/us-east4-a/spot"]; ok {
		t.Error("us-east4-a offers a2-highgpu-1g, which its machineTypes do not list")
	}
}

func TestAcquireIsIdempotentAndListedByLabel(t *testing.T) {
	cloud, srv := simCloud(t, 0, sim.Quotas{})
	c := provider(t, srv, "p1", "us-central1-a")
	spot := capacity.Offering{Provider: "gce", InstanceType: "a3-highgpu-1g", Zone: "us-central1-a", Market: capacity.Spot, GPUs: 1, PricePerHour: 2.3724}
	req := request("Train/Run.1", 1, spot)
	inst, err := c.Acquire(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if inst.ID != gce.InstanceName(req) || inst.Offering != spot || inst.TaskQueue != "refuel-node-"+inst.ID {
		t.Errorf("acquired %+v", inst)
	}
	again, err := c.Acquire(t.Context(), req)
	if err != nil || again.ID != inst.ID {
		t.Fatalf("a retried attempt got %s (%v), want %s", again.ID, err, inst.ID)
	}
	if n := len(cloud.Instances()); n != 1 {
		t.Errorf("the market holds %d instances after a retried acquire, want 1", n)
	}
	// A second provider (a restarted control plane) finds it by label,
	// with the run's ID as it was, not as the label sanitized it.
	fresh := provider(t, srv, "p1")
	listed, err := fresh.List(t.Context(), map[string]string{capacity.TagRun: "Train/Run.1", capacity.TagDeployment: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].ID != inst.ID || listed[0].Tags[capacity.TagRun] != "Train/Run.1" || listed[0].Offering.Market != capacity.Spot {
		t.Fatalf("listed %+v", listed)
	}
	if other, _ := fresh.List(t.Context(), map[string]string{capacity.TagRun: "train-run-1"}); len(other) != 0 {
		t.Errorf("a run whose ID sanitizes alike listed %d instances", len(other))
	}
	if other, _ := provider(t, srv, "p2").List(t.Context(), nil); len(other) != 0 {
		t.Errorf("another project lists %d instances", len(other))
	}
	_, state, err := fresh.Describe(t.Context(), inst.ID)
	if err != nil || state != capacity.StateRunning {
		t.Fatalf("describe: %s %v", state, err)
	}
	if err := fresh.Release(t.Context(), inst.ID); err != nil {
		t.Fatal(err)
	}
	if err := fresh.Release(t.Context(), inst.ID); !capacity.IsNotFound(err) {
		t.Errorf("releasing twice: %v, want not found", err)
	}
	if _, state, err := fresh.Describe(t.Context(), inst.ID); !capacity.IsNotFound(err) || state != capacity.StateTerminated {
		t.Errorf("describe after release: %s %v", state, err)
	}
}

func TestSpotAndOnDemandScheduling(t *testing.T) {
	_, srv := simCloud(t, 0, sim.Quotas{})
	c := provider(t, srv, "p", "us-central1-a")
	svc, err := compute.NewService(t.Context(), option.WithEndpoint(srv.Endpoint()), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []capacity.Market{capacity.Spot, capacity.OnDemand} {
		o := capacity.Offering{Provider: "gce", InstanceType: "g2-standard-4", Zone: "us-central1-a", Market: m, GPUs: 1}
		inst, err := c.Acquire(t.Context(), request("sched-"+string(m), 1, o))
		if err != nil {
			t.Fatal(err)
		}
		got, err := svc.Instances.Get("p", "us-central1-a", inst.ID).Do()
		if err != nil {
			t.Fatal(err)
		}
		s := got.Scheduling
		spot := s.ProvisioningModel == "SPOT" && s.InstanceTerminationAction == "DELETE"
		if spot != (m == capacity.Spot) || s.OnHostMaintenance != "TERMINATE" {
			t.Errorf("%s: scheduling %+v", m, s)
		}
		if got.Labels[gce.LabelRun] != "sched-"+string(m) || got.Labels[gce.LabelPool] != "gpu" || got.Labels[gce.LabelDeployment] != "test" {
			t.Errorf("%s: labels %v", m, got.Labels)
		}
	}
}

func TestStockOutFallsThroughAndErrorsAreClassified(t *testing.T) {
	// At tick 8 the us-central1-a H100 trace holds no spot VM.
	_, srv := simCloud(t, 8, sim.Quotas{SpotInstances: 1})
	c := provider(t, srv, "p", "us-central1-a")
	spot := capacity.Offering{Provider: "gce", InstanceType: "a3-highgpu-1g", Zone: "us-central1-a", Market: capacity.Spot, GPUs: 1}
	onDemand := spot
	onDemand.Market = capacity.OnDemand
	inst, err := c.Acquire(t.Context(), request("stock", 1, spot, onDemand))
	if err != nil {
		t.Fatal(err)
	}
	if inst.Offering.Market != capacity.OnDemand {
		t.Errorf("launched on %s, want on-demand after the spot stock-out", inst.Offering.Key())
	}
	_, err = c.Acquire(t.Context(), request("stock-only-spot", 1, spot))
	fs := capacity.Failures(err)
	if len(fs) != 1 || fs[0].Class != capacity.NoCapacity || fs[0].Code != gce.CodeResourcePoolExhausted {
		t.Fatalf("spot in a zone without stock: %v", err)
	}
	// The spot quota of one: the first spot VM elsewhere launches, the
	// second is over quota.
	g2 := capacity.Offering{Provider: "gce", InstanceType: "g2-standard-4", Zone: "us-central1-a", Market: capacity.Spot, GPUs: 1}
	if _, err := c.Acquire(t.Context(), request("quota-1", 1, g2)); err != nil {
		t.Fatal(err)
	}
	_, err = c.Acquire(t.Context(), request("quota-2", 1, g2))
	if fs := capacity.Failures(err); len(fs) != 1 || fs[0].Class != capacity.Quota || fs[0].Code != gce.CodeQuotaExceeded {
		t.Fatalf("over the spot quota: %v", err)
	}
}

func TestPreemptionIsSeenInStateAndOperations(t *testing.T) {
	cloud, srv := simCloud(t, 0, sim.Quotas{})
	c := provider(t, srv, "p", "us-central1-a")
	o := capacity.Offering{Provider: "gce", InstanceType: "a3-highgpu-1g", Zone: "us-central1-a", Market: capacity.Spot, GPUs: 1}
	inst, err := c.Acquire(t.Context(), request("preempt", 1, o))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := compute.NewService(t.Context(), option.WithEndpoint(srv.Endpoint()), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Instances.SimulateMaintenanceEvent("p", "us-central1-a", inst.ID).Do(); err != nil {
		t.Fatal(err)
	}
	if _, state, err := c.Describe(t.Context(), inst.ID); err != nil || state != capacity.StateInterrupted {
		t.Errorf("under notice: %s %v, want interrupted", state, err)
	}
	ops, err := svc.ZoneOperations.List("p", "us-central1-a").Filter(`operationType = "compute.instances.preempted"`).Do()
	if err != nil {
		t.Fatal(err)
	}
	if len(ops.Items) != 1 || !strings.HasSuffix(ops.Items[0].TargetLink, "/instances/"+inst.ID) {
		t.Fatalf("preempted operations: %+v", ops.Items)
	}
	got, err := c.Preemptions(t.Context(), nil, time.Now().Add(-time.Minute))
	if err != nil || len(got) != 1 || got[0].Instance != inst.ID || got[0].Zone != "us-central1-a" {
		t.Errorf("preemptions: %+v %v", got, err)
	}
	if later, _ := c.Preemptions(t.Context(), nil, time.Now().Add(time.Minute)); len(later) != 0 {
		t.Errorf("preemptions since a later time: %+v", later)
	}
	// The notice runs out: with DELETE the VM is gone.
	if _, err := cloud.Interrupt(inst.ID, 0); err != nil {
		t.Fatal(err)
	}
	if _, state, err := c.Describe(t.Context(), inst.ID); !capacity.IsNotFound(err) || state != capacity.StateTerminated {
		t.Errorf("after the notice: %s %v, want gone", state, err)
	}
}

func TestWrongProjectNamesTheSetting(t *testing.T) {
	_, srv := simCloud(t, 0, sim.Quotas{}, gceapi.WithProjects("right"))
	c := provider(t, srv, "wrong")
	_, err := c.Offerings(t.Context(), spec.Resources{GPUs: 1})
	if err == nil || !strings.Contains(err.Error(), "--gce-project") || capacity.ClassOf(err) != capacity.Config {
		t.Fatalf("offerings in a project that does not exist: %v (class %s)", err, capacity.ClassOf(err))
	}
	if _, err := c.List(t.Context(), nil); err == nil || !strings.Contains(err.Error(), "--gce-project") {
		t.Errorf("list: %v", err)
	}
	o := capacity.Offering{Provider: "gce", InstanceType: "a3-highgpu-1g", Zone: "us-central1-a", Market: capacity.Spot, GPUs: 1}
	_, err = c.Acquire(t.Context(), request("wrong-project", 1, o))
	if capacity.ClassOf(err) != capacity.Config || !strings.Contains(err.Error(), "--gce-project") {
		t.Errorf("acquire: %v (class %s), want config naming --gce-project", err, capacity.ClassOf(err))
	}
}

func TestThrottledAcquireLeavesTheRetryToTheActivity(t *testing.T) {
	cloud, srv := simCloud(t, 0, sim.Quotas{})
	c := provider(t, srv, "p", "us-central1-a")
	cloud.ThrottleNext(1)
	o := capacity.Offering{Provider: "gce", InstanceType: "a3-highgpu-1g", Zone: "us-central1-a", Market: capacity.Spot, GPUs: 1}
	_, err := c.Acquire(context.Background(), request("throttled", 1, o))
	if capacity.ClassOf(err) != capacity.Throttled {
		t.Fatalf("throttled: %v", err)
	}
	var failure *capacity.Error
	if !errors.As(err, &failure) || failure.Code != gce.ReasonRateLimitExceeded {
		t.Fatalf("throttled: %v, want code %s", err, gce.ReasonRateLimitExceeded)
	}
	if n := len(cloud.Instances()); n != 0 {
		t.Errorf("%d instances after a throttled call", n)
	}
}

func TestAttachedGPUsNeedTheZonesAcceleratorType(t *testing.T) {
	_, srv := simCloud(t, 0, sim.Quotas{})
	// Machine types that attach their GPUs (N1 with guestAccelerators):
	// the sim's zones list nvidia-h100-80gb, not nvidia-tesla-t4.
	c, err := gce.New(t.Context(), gce.Config{Project: "p", Zones: []string{"us-central1-a"}, Endpoint: srv.Endpoint(), PollInterval: 10 * time.Millisecond,
		MachineTypes: []gce.MachineType{
			{Name: "a3-highgpu-1g", Accelerator: "nvidia-h100-80gb", GPUs: 1},
			{Name: "g2-standard-4", Accelerator: "nvidia-tesla-t4", GPUs: 1},
		}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Offerings(t.Context(), spec.Resources{GPUs: 1, Providers: []string{"gce"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].InstanceType != "a3-highgpu-1g" || got[1].InstanceType != "a3-highgpu-1g" {
		t.Fatalf("offerings %v, want a3-highgpu-1g's two markets only", got)
	}
	inst, err := c.Acquire(t.Context(), request("attached", 1, got[0]))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := compute.NewService(t.Context(), option.WithEndpoint(srv.Endpoint()), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	vm, err := svc.Instances.Get("p", "us-central1-a", inst.ID).Do()
	if err != nil {
		t.Fatal(err)
	}
	if a := vm.GuestAccelerators; len(a) != 1 || a[0].AcceleratorCount != 1 || !strings.HasSuffix(a[0].AcceleratorType, "/acceleratorTypes/nvidia-h100-80gb") {
		t.Errorf("guestAccelerators %+v", a)
	}
}
