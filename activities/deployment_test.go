package activities_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"refuel/workflows/instances"

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
)

// Two deployments share one cloud: one sim behind one EC2 endpoint, each
// deployment's AWS provider talking to it through the real SDK. Each
// instance carries its deployment's tag, and each deployment's janitor,
// told that no run owns anything (the worst case), releases its own
// instance and leaves the other's running.
func TestJanitorsOfTwoDeploymentsShareACloud(t *testing.T) {
	cloud, err := sim.New(sim.Config{Pools: []sim.PoolConfig{
		{Pool: sim.Pool{Zone: "us-west-2a", InstanceType: "p3.2xlarge"}, Spot: &trace.Trace{Gap: 10 * time.Minute, Points: []int{4}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ec2api.New(cloud, nil))
	t.Cleanup(func() {
		srv.Close()
		_ = cloud.Close()
	})
	offering := capacity.Offering{Provider: awscloud.ProviderName, InstanceType: "p3.2xlarge", Zone: "us-west-2a", Market: capacity.OnDemand, GPUs: 1, PricePerHour: 3.06}

	type deployment struct {
		caps *activities.Capacity
		jan  *activities.Janitor
		inst capacity.Instance
	}
	names := []string{"blue", "green"}
	deps := map[string]*deployment{}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	for _, name := range names {
		p, err := awscloud.New(context.Background(), awscloud.Config{
			Region: "us-west-2", Endpoint: srv.URL, AccessKeyID: "test", SecretAccessKey: "test",
			LaunchTemplate: awscloud.LaunchTemplate{Name: "refuel-node"}, PollInterval: time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		d := &deployment{
			caps: &activities.Capacity{Providers: []capacity.Provider{p}, Deployment: name},
			// A grace of a nanosecond: the janitor may release at once.
			jan: &activities.Janitor{Providers: []capacity.Provider{p}, Deployment: name, Grace: time.Nanosecond},
		}
		env := suite.NewTestActivityEnvironment()
		env.RegisterActivity(d.caps.Acquire)
		if name == "green" {
			// With blue's run and attempt, green's request carries blue's
			// client token: it must never be handed blue's instance.
			val, err := env.ExecuteActivity(d.caps.Acquire, capacity.Request{RunID: "blue-train", Attempt: 1, Offerings: []capacity.Offering{offering}})
			var got capacity.Instance
			if err == nil && val.Get(&got) == nil && got.ID == deps["blue"].inst.ID {
				t.Fatalf("green was handed blue's instance %s", got.ID)
			}
		}
		val, err := env.ExecuteActivity(d.caps.Acquire, capacity.Request{RunID: name + "-train", Attempt: 1, Offerings: []capacity.Offering{offering}})
		if err != nil {
			t.Fatalf("%s: Acquire = %v", name, err)
		}
		if err := val.Get(&d.inst); err != nil {
			t.Fatal(err)
		}
		st, err := cloud.Status(d.inst.ID)
		if err != nil || st.Tags[capacity.TagDeployment] != name {
			t.Fatalf("%s's instance %s carries tags %v (%v); want %s=%s", name, d.inst.ID, st.Tags, err, capacity.TagDeployment, name)
		}
		deps[name] = d
	}
	if deps["blue"].inst.ID == deps["green"].inst.ID {
		t.Fatalf("both deployments got instance %s", deps["blue"].inst.ID)
	}

	for i, name := range names {
		d := deps[name]
		env := suite.NewTestWorkflowEnvironment()
		env.RegisterWorkflowWithOptions(instances.Janitor, workflow.RegisterOptions{Name: workflows.JanitorName})
		env.RegisterActivityWithOptions(d.jan.ListManagedInstances, activity.RegisterOptions{Name: activities.ListManagedName})
		env.RegisterActivityWithOptions(d.jan.RunOwnsInstance, activity.RegisterOptions{Name: activities.RunOwnsInstanceName})
		env.RegisterActivityWithOptions(d.caps.Release, activity.RegisterOptions{Name: activities.ReleaseName})
		env.OnActivity(activities.RunOwnsInstanceName, mock.Anything, mock.Anything).Return(false, nil)
		env.ExecuteWorkflow(workflows.JanitorName)
		var report instances.JanitorReport
		if err := env.GetWorkflowResult(&report); err != nil {
			t.Fatalf("%s's janitor: %v", name, err)
		}
		if report.Checked != 1 || !slices.Equal(report.Released, []string{d.inst.ID}) {
			t.Errorf("%s's janitor checked %d and released %v; want 1 and its own %s", name, report.Checked, report.Released, d.inst.ID)
		}
		for j, other := range names {
			st, _ := cloud.Status(deps[other].inst.ID)
			if want := j > i; (st.State != capacity.StateTerminated) != want {
				t.Errorf("after %s's janitor, %s's instance is %s", name, other, st.State)
			}
		}
	}
}

func TestCheckDeployment(t *testing.T) {
	for name, ok := range map[string]bool{
		"default": true, "prod-us.1": true, "a": true,
		"": false, "Prod": false, "prod us": false, "-x": false, string(make([]byte, 65)): false,
	} {
		if err := activities.CheckDeployment(name); (err == nil) != ok {
			t.Errorf("CheckDeployment(%q) = %v; want ok %v", name, err, ok)
		}
	}
}
