package aws

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/cloud/sim/ec2api"
	"refuel/pkg/trace"
)

// TestStopAndStartAgainstTheSimEndpoint stops an on-demand instance
// through StopInstances, finds it among the stopped and not among the
// running, starts it through StartInstances (pending for the sim's start
// time, then running), and is refused stopping a spot instance.
func TestStopAndStartAgainstTheSimEndpoint(t *testing.T) {
	ctx := context.Background()
	cloud, err := sim.New(sim.Config{Pools: []sim.PoolConfig{
		{Pool: sim.Pool{Zone: "us-east-1a", InstanceType: "g5.xlarge"}, Spot: &trace.Trace{Gap: 10 * time.Minute, Points: []int{1}}},
	}, StartTime: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ec2api.New(cloud, nil))
	t.Cleanup(func() {
		srv.Close()
		_ = cloud.Close()
	})
	c, err := New(ctx, Config{Region: "us-east-1", Endpoint: srv.URL, AccessKeyID: "test", SecretAccessKey: "test",
		LaunchTemplate: LaunchTemplate{Name: "refuel-node"}, MaxAttempts: 1, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tags := map[string]string{capacity.TagManagedBy: capacity.ManagedBy, capacity.TagRun: "svc"}
	launch := func(token string, m capacity.Market) string {
		st, err := cloud.Launch(ctx, sim.LaunchRequest{Token: token, Offers: []sim.Offer{{Pool: sim.Pool{Zone: "us-east-1a", InstanceType: "g5.xlarge"}, Market: m}}, Tags: tags, Wait: true})
		if err != nil {
			t.Fatal(err)
		}
		return st.ID
	}
	od, spot := launch("od", capacity.OnDemand), launch("spot", capacity.Spot)

	if err := c.Stop(ctx, od); err != nil {
		t.Fatal(err)
	}
	if _, st, _ := cloud.Describe(ctx, od); st != capacity.StateStopped {
		t.Errorf("after Stop the sim has it %s; want stopped", st)
	}
	stopped, err := c.ListStopped(ctx, nil)
	if err != nil || len(stopped) != 1 || stopped[0].ID != od {
		t.Errorf("stopped %v, %v; want only %s", stopped, err, od)
	}
	running, err := c.List(ctx, nil)
	if err != nil || len(running) != 1 || running[0].ID != spot {
		t.Errorf("running %v, %v; want only the spot instance %s", running, err, spot)
	}
	if p := c.StoppedPricePerHour(capacity.Offering{}); p != DefaultVolumePricePerHour {
		t.Errorf("stopped price %g; want the volume's %g", p, DefaultVolumePricePerHour)
	}

	began := time.Now()
	inst, err := c.Start(ctx, od)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); inst.ID != od || took < 300*time.Millisecond {
		t.Errorf("started %s after %s; want %s after the sim's start time of 300ms", inst.ID, took, od)
	}
	if _, st, _ := cloud.Describe(ctx, od); st != capacity.StateRunning {
		t.Errorf("after Start the sim has it %s; want running", st)
	}
	if stopped, _ := c.ListStopped(ctx, nil); len(stopped) != 0 {
		t.Errorf("still stopped after Start: %v", stopped)
	}

	var ns *capacity.NotStoppableError
	if err := c.Stop(ctx, spot); !errors.As(err, &ns) {
		t.Errorf("stopping a spot instance: %v; want a *capacity.NotStoppableError", err)
	}
	if err := c.Release(ctx, od); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(ctx, od); !capacity.IsNotFound(err) {
		t.Errorf("stopping a terminated instance: %v; want not found", err)
	}
}
