package activities_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/capacity"
	awscloud "refuel/pkg/cloud/aws"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/cloud/sim/ec2api"
	"refuel/pkg/trace"
	"refuel/workflows"
	"refuel/workflows/instances"
)

// A stopped instance (a warm-pool entry) that no run owns still costs its
// volume: the janitor lists it beside the running ones and releases it.
func TestJanitorReleasesAStoppedInstanceNoRunOwns(t *testing.T) {
	cloud, err := sim.New(sim.Config{Pools: []sim.PoolConfig{
		{Pool: sim.Pool{Zone: "us-west-2a", InstanceType: "g5.xlarge"}, Spot: &trace.Trace{Gap: 10 * time.Minute, Points: []int{4}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ec2api.New(cloud, nil))
	t.Cleanup(func() {
		srv.Close()
		_ = cloud.Close()
	})
	p, err := awscloud.New(context.Background(), awscloud.Config{
		Region: "us-west-2", Endpoint: srv.URL, AccessKeyID: "test", SecretAccessKey: "test",
		LaunchTemplate: awscloud.LaunchTemplate{Name: "refuel-node"}, PollInterval: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	caps := &activities.Capacity{Providers: []capacity.Provider{p}}
	jan := &activities.Janitor{Providers: []capacity.Provider{p}, Grace: time.Nanosecond}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	aenv := suite.NewTestActivityEnvironment()
	aenv.RegisterActivity(caps.Acquire)
	offering := capacity.Offering{Provider: awscloud.ProviderName, InstanceType: "g5.xlarge", Zone: "us-west-2a", Market: capacity.OnDemand, GPUs: 1, PricePerHour: 1.006}
	val, err := aenv.ExecuteActivity(caps.Acquire, capacity.Request{RunID: "svc", Attempt: 1, Offerings: []capacity.Offering{offering}})
	if err != nil {
		t.Fatal(err)
	}
	var inst capacity.Instance
	if err := val.Get(&inst); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(context.Background(), inst.ID); err != nil {
		t.Fatal(err)
	}

	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(instances.Janitor, workflow.RegisterOptions{Name: workflows.JanitorName})
	env.RegisterActivityWithOptions(jan.ListManagedInstances, activity.RegisterOptions{Name: activities.ListManagedName})
	env.RegisterActivityWithOptions(jan.RunOwnsInstance, activity.RegisterOptions{Name: activities.RunOwnsInstanceName})
	env.RegisterActivityWithOptions(caps.Release, activity.RegisterOptions{Name: activities.ReleaseName})
	env.OnActivity(activities.RunOwnsInstanceName, mock.Anything, mock.Anything).Return(false, nil)
	env.ExecuteWorkflow(workflows.JanitorName)
	var report instances.JanitorReport
	if err := env.GetWorkflowResult(&report); err != nil {
		t.Fatal(err)
	}
	if report.Checked != 1 || !slices.Equal(report.Released, []string{inst.ID}) {
		t.Errorf("the janitor checked %d and released %v; want the stopped %s", report.Checked, report.Released, inst.ID)
	}
	if st, _ := cloud.Status(inst.ID); st.State != capacity.StateTerminated {
		t.Errorf("the stopped instance is %s after the janitor; want terminated", st.State)
	}
}
