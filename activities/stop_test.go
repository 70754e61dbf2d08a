package activities_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/spec"
	"refuel/pkg/trace"
)

// runningOnly is a provider that cannot stop instances.
type runningOnly struct{ capacity.Provider }

// StopInstance stops an on-demand instance where its provider can, and
// answers why not (the instance running on) elsewhere; StartInstance
// brings a stopped one back.
func TestStopAndStartInstance(t *testing.T) {
	cloud, err := sim.New(sim.Config{StartTime: time.Millisecond, VolumePricePerHour: 0.03, Pools: []sim.PoolConfig{
		{Pool: sim.Pool{Zone: "us-west-2a", InstanceType: "g5.xlarge"}, Spot: &trace.Trace{Gap: 10 * time.Minute, Points: []int{4}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cloud.Close() })
	offerings, err := cloud.Offerings(context.Background(), spec.Resources{GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	byMarket := map[capacity.Market]capacity.Offering{}
	for _, o := range offerings {
		byMarket[o.Market] = o
	}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	tests := []struct {
		name     string
		provider capacity.Provider
		market   capacity.Market
		want     activities.StopResult
	}{
		{"on-demand on a provider that stops", cloud, capacity.OnDemand, activities.StopResult{Stopped: true, PricePerHour: 0.03}},
		{"spot", cloud, capacity.Spot, activities.StopResult{Reason: "a spot instance is reclaimed, not stopped"}},
		{"a provider that cannot stop", runningOnly{cloud}, capacity.OnDemand, activities.StopResult{Reason: "provider sim cannot stop instances"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			caps := &activities.Capacity{Providers: []capacity.Provider{tt.provider}}
			aenv := suite.NewTestActivityEnvironment()
			aenv.RegisterActivity(caps.Acquire)
			aenv.RegisterActivity(caps.StopInstance)
			aenv.RegisterActivity(caps.StartInstance)
			val, err := aenv.ExecuteActivity(caps.Acquire, capacity.Request{RunID: "svc", Attempt: i + 1, Offerings: []capacity.Offering{byMarket[tt.market]}})
			if err != nil {
				t.Fatal(err)
			}
			var inst capacity.Instance
			if err := val.Get(&inst); err != nil {
				t.Fatal(err)
			}
			val, err = aenv.ExecuteActivity(caps.StopInstance, inst)
			if err != nil {
				t.Fatal(err)
			}
			var got activities.StopResult
			if err := val.Get(&got); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("stop: %+v; want %+v", got, tt.want)
			}
			wantState := capacity.StateRunning
			if got.Stopped {
				wantState = capacity.StateStopped
			}
			if st, _ := cloud.Status(inst.ID); st.State != wantState {
				t.Fatalf("instance %s after the stop; want %s", st.State, wantState)
			}
			if !got.Stopped {
				return
			}
			if _, err := aenv.ExecuteActivity(caps.StartInstance, inst); err != nil {
				t.Fatal(err)
			}
			if st, _ := cloud.Status(inst.ID); st.State != capacity.StateRunning {
				t.Errorf("instance %s after the start; want running", st.State)
			}
		})
	}
}
