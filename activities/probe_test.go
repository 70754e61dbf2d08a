package activities_test

import (
	"log/slog"
	"testing"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/trace"
)

// A probe acquires spot through the provider for the gang's nodes and
// lets go at once: it has what the pool's stock allows, nothing where
// the pool is out, and leaves nothing running.
func TestProbeHasWhatTheStockAllowsAndLetsGo(t *testing.T) {
	stock := func(n int) *trace.Trace { return &trace.Trace{Gap: 10 * time.Minute, Points: []int{n}} }
	cloud, err := sim.New(sim.Config{Pools: []sim.PoolConfig{
		{Pool: sim.Pool{Zone: "us-west-2a", InstanceType: "p3.2xlarge"}, Spot: stock(2)},
		{Pool: sim.Pool{Zone: "us-west-2b", InstanceType: "p3.2xlarge"}, Spot: stock(0)},
		{Pool: sim.Pool{Zone: "us-west-2c", InstanceType: "p3.2xlarge"}, Spot: stock(5)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cloud.Close() })
	spot := func(zone string) capacity.Offering {
		return capacity.Offering{Provider: sim.ProviderName, InstanceType: "p3.2xlarge", Zone: zone, Market: capacity.Spot}
	}
	caps := &activities.Capacity{Providers: []capacity.Provider{cloud}}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(caps.ProbeSpot)
	in := activities.ProbeInput{
		Request: capacity.Request{RunID: "probing", Identity: "0b3c", Tags: map[string]string{capacity.TagTeam: "ml"}},
		Probes:  []capacity.Offering{spot("us-west-2a"), spot("us-west-2b"), spot("us-west-2c")},
		Nodes:   3, Name: "p7",
	}
	probe := func() []int {
		t.Helper()
		val, err := env.ExecuteActivity(caps.ProbeSpot, in)
		if err != nil {
			t.Fatal(err)
		}
		var res activities.ProbeResult
		if err := val.Get(&res); err != nil {
			t.Fatal(err)
		}
		return res.Taken
	}
	if got := probe(); len(got) != 3 || got[0] != 2 || got[1] != 0 || got[2] != 3 {
		t.Errorf("a gang of 3 probed 2, 0 and 5 in stock: had %v; want [2 0 3]", got)
	}
	launched := cloud.Instances()
	if len(launched) != 5 {
		t.Errorf("%d instances launched; want 5, the nodes the probes had", len(launched))
	}
	for _, inst := range launched {
		if inst.State != capacity.StateTerminated || inst.Tags[capacity.TagProbe] == "" || inst.Tags[capacity.TagTeam] != "ml" || inst.Tags[capacity.TagRun] != "probing" {
			t.Errorf("probe instance %s: %s, tags %v; want terminated, tagged a probe of the run and its team", inst.ID, inst.State, inst.Tags)
		}
	}
	// Tried again (a retry), the pools the first try had all of hand back
	// its instances: nothing new is launched there.
	in.Probes = in.Probes[2:]
	if got := probe(); got[0] != 3 || len(cloud.Instances()) != 5 {
		t.Errorf("us-west-2c probed again had %v with %d instances launched in all; want the first try's 3 of 5", got, len(cloud.Instances()))
	}
	in.Probes = []capacity.Offering{{Provider: sim.ProviderName, InstanceType: "p3.2xlarge", Zone: "us-west-2a", Market: capacity.OnDemand}}
	if _, err := env.ExecuteActivity(caps.ProbeSpot, in); err == nil {
		t.Error("a probe of on-demand was made; want it refused: only spot is probed")
	}
}
