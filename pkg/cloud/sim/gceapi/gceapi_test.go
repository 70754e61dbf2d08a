package gceapi_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/gce"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/cloud/sim/ec2api"
	"refuel/pkg/cloud/sim/gceapi"
	"refuel/pkg/spec"
)

// market is the EC2 default market and the built-in Compute Engine one
// in one still sim, opening at tick, served over Compute Engine's API.
func market(t *testing.T, tick int) (*sim.Cloud, *compute.Service) {
	t.Helper()
	ec2, _, err := sim.DefaultMarket(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := gceapi.AddMarket(ec2, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.StartTick = tick
	cloud, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cloud.Close() })
	srv, err := gceapi.Start(cloud, "127.0.0.1:0", nil, ec2api.New(cloud, nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	svc, err := compute.NewService(t.Context(), option.WithEndpoint(srv.Endpoint()), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	return cloud, svc
}

func spotVM(name, machineType string) *compute.Instance {
	return &compute.Instance{Name: name, MachineType: "zones/us-central1-a/machineTypes/" + machineType,
		Labels:     map[string]string{gce.LabelRun: "r"},
		Scheduling: &compute.Scheduling{ProvisioningModel: "SPOT", InstanceTerminationAction: "DELETE"}}
}

func TestMarketPreemptsWithComputeEnginesNotice(t *testing.T) {
	// us-central1-a's H100 trace holds 8 at tick 7 and none at tick 8.
	cloud, svc := market(t, 7)
	if _, err := svc.Instances.Insert("p", "us-central1-a", spotVM("vm-1", "a3-highgpu-1g")).Do(); err != nil {
		t.Fatal(err)
	}
	var pools, ec2Pools int
	for _, ps := range cloud.Market().Pools {
		pools++
		if ps.Zone == "us-west-2a" {
			ec2Pools++
		}
	}
	if ec2Pools == 0 || pools == ec2Pools {
		t.Fatalf("one market should hold both clouds' pools: %d pools, %d of EC2's us-west-2a", pools, ec2Pools)
	}
	cloud.Advance(1)
	st, err := cloud.Status("vm-1")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != capacity.StateInterrupted || st.InterruptAt.Sub(cloud.Now()) > gceapi.NoticeWindow || st.InterruptAt.Sub(cloud.Now()) < gceapi.NoticeWindow-5*time.Second {
		t.Fatalf("after the stock fell: %s, taken at %s (now %s), want a notice of %s", st.State, st.InterruptAt, cloud.Now(), gceapi.NoticeWindow)
	}
	inst, err := svc.Instances.Get("p", "us-central1-a", "vm-1").Do()
	if err != nil || inst.Status != "STOPPING" {
		t.Fatalf("under notice: %+v %v", inst, err)
	}
	ops, err := svc.ZoneOperations.List("p", "us-central1-a").Filter(`operationType eq ".*preempted"`).Do()
	if err != nil || len(ops.Items) != 1 || ops.Items[0].TargetId != inst.Id {
		t.Fatalf("preempted operations: %+v %v", ops, err)
	}
	if _, err := svc.Instances.Insert("p", "us-central1-a", spotVM("vm-2", "a3-highgpu-1g")).Do(); err != nil {
		t.Fatal(err)
	}
	op, err := svc.ZoneOperations.List("p", "us-central1-a").Filter(`operationType = "insert"`).Do()
	if err != nil || len(op.Items) != 2 || op.Items[1].Error == nil || op.Items[1].Error.Errors[0].Code != gce.CodeResourcePoolExhausted {
		t.Fatalf("a spot VM where the trace holds none: %+v %v", op, err)
	}
}

func TestInsertIsIdempotentInRequestIDAndName(t *testing.T) {
	cloud, svc := market(t, 0)
	first, err := svc.Instances.Insert("p", "us-central1-a", spotVM("vm-1", "g2-standard-4")).RequestId("8a7ad5de-9d83-4d8e-9c52-0d3c5b1ff0c1").Do()
	if err != nil {
		t.Fatal(err)
	}
	again, err := svc.Instances.Insert("p", "us-central1-a", spotVM("vm-1", "g2-standard-4")).RequestId("8a7ad5de-9d83-4d8e-9c52-0d3c5b1ff0c1").Do()
	if err != nil || again.Name != first.Name {
		t.Fatalf("the same requestId again: %v %v, want operation %s", again, err, first.Name)
	}
	_, err = svc.Instances.Insert("p", "us-central1-a", spotVM("vm-1", "g2-standard-4")).Do()
	var ge *googleapi.Error
	if !errors.As(err, &ge) || ge.Code != http.StatusConflict {
		t.Fatalf("the same name again: %v, want 409", err)
	}
	_, err = svc.Instances.Insert("p", "us-central1-a", spotVM("vm-3", "n9-nothing")).Do()
	if !errors.As(err, &ge) || ge.Code != http.StatusBadRequest {
		t.Fatalf("a machine type the zone does not sell: %v, want 400", err)
	}
	if n := len(cloud.Instances()); n != 1 {
		t.Errorf("%d instances, want 1", n)
	}
}

func TestBulkInsertAllOrNothing(t *testing.T) {
	cloud, svc := market(t, 0)
	props := &compute.InstanceProperties{MachineType: "g2-standard-4", Scheduling: &compute.Scheduling{ProvisioningModel: "SPOT"}}
	op, err := svc.Instances.BulkInsert("p", "us-central1-a", &compute.BulkInsertInstanceResource{Count: 2, NamePattern: "gang-#", InstanceProperties: props}).Do()
	if err != nil || op.Error != nil {
		t.Fatalf("bulk insert: %+v %v", op, err)
	}
	list, err := svc.Instances.List("p", "us-central1-a").Filter(`name eq "gang-.*"`).Do()
	if err != nil || len(list.Items) != 2 || list.Items[0].Name != "gang-1" || list.Items[1].Name != "gang-2" {
		t.Fatalf("listed %+v %v", list, err)
	}
	// 16 in stock: 14 more fit, a gang of 15 does not, and none of it stays.
	op, err = svc.Instances.BulkInsert("p", "us-central1-a", &compute.BulkInsertInstanceResource{Count: 15, NamePattern: "big-##", InstanceProperties: props}).Do()
	if err != nil || op.Error == nil || op.Error.Errors[0].Code != gce.CodeResourcePoolExhausted {
		t.Fatalf("a gang beyond the stock: %+v %v", op, err)
	}
	live := 0
	for _, st := range cloud.Instances() {
		if st.State != capacity.StateTerminated {
			live++
		}
	}
	if live != 2 {
		t.Errorf("%d instances run after a failed bulk insert, want the first gang's 2", live)
	}
}

func TestEC2DoesNotListComputeEngineInstances(t *testing.T) {
	cloud, svc := market(t, 0)
	if _, err := svc.Instances.Insert("p", "us-central1-a", spotVM("vm-1", "g2-standard-4")).Do(); err != nil {
		t.Fatal(err)
	}
	ec2 := httptest.NewServer(ec2api.New(cloud, nil))
	defer ec2.Close()
	resp, err := http.PostForm(ec2.URL, url.Values{"Action": {"DescribeInstances"}, "Version": {ec2api.Version}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || strings.Contains(string(body), "vm-1") || !strings.Contains(string(body), "DescribeInstancesResponse") {
		t.Errorf("EC2's DescribeInstances (%d) lists a Compute Engine instance or fails:\n%s", resp.StatusCode, body)
	}
	// Nor does the sim's own provider sell or list them.
	if listed, err := cloud.List(t.Context(), map[string]string{gce.LabelRun: "r"}); err != nil || len(listed) != 0 {
		t.Errorf("the sim provider lists %v (%v)", listed, err)
	}
	offered, err := cloud.Offerings(t.Context(), spec.Resources{GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offered {
		if strings.HasPrefix(o.Zone, "us-central1") {
			t.Errorf("the sim provider offers %s", o.Key())
		}
	}
}

func TestControlsInterruptWithThePoolsNotice(t *testing.T) {
	cloud, svc := market(t, 0)
	if _, err := svc.Instances.Insert("p", "us-central1-a", spotVM("vm-1", "a3-highgpu-1g")).Do(); err != nil {
		t.Fatal(err)
	}
	controls := httptest.NewServer(cloud.ControlHandler())
	defer controls.Close()
	resp, err := http.PostForm(controls.URL+"/sim/interrupt", url.Values{"instance": {"vm-1"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	st, err := cloud.Status("vm-1")
	if err != nil {
		t.Fatal(err)
	}
	if left := st.InterruptAt.Sub(cloud.Now()); st.State != capacity.StateInterrupted || left > gceapi.NoticeWindow || left < gceapi.NoticeWindow-5*time.Second {
		t.Errorf("/sim/interrupt of a Compute Engine VM: %s, taken in %s, want Compute Engine's %s", st.State, left, gceapi.NoticeWindow)
	}
}
