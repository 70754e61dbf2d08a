package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"refuel/workflows/instances"
	"refuel/workflows/training"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/controlplane"
	"refuel/jobs"
	"refuel/pkg/capacity"
	awscloud "refuel/pkg/cloud/aws"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/devserver"
	"refuel/pkg/spec"
	"refuel/pkg/trainer"
	"refuel/workflows"
)

// market writes availability traces (one p3.2xlarge per zone and tick
// when the point is 1) into a directory for the simulated cloud.
func market(t *testing.T, zones map[string][]int) string {
	t.Helper()
	dir := t.TempDir()
	for zone, points := range zones {
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"gap_seconds": 600}, "data": points})
		if err := os.WriteFile(filepath.Join(dir, zone+"_v100_1.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// startAWSStack runs the control plane with the AWS provider talking
// EC2's wire protocol to the simulated cloud, whose market stands still
// until the test advances it.
func startAWSStack(t *testing.T, zones map[string][]int, quotas sim.Quotas, edits ...func(*controlplane.Config)) *controlplane.Stack {
	t.Helper()
	return startStack(t, func(c *controlplane.Config) {
		c.Provider = controlplane.ProviderAWS
		c.Sim = controlplane.SimConfig{Traces: market(t, zones), Speed: 0, Notice: 15 * time.Second, ServeEC2: "127.0.0.1:0", Quotas: quotas}
		c.AWS = awscloud.Config{
			Region: "us-west-2", AccessKeyID: "test", SecretAccessKey: "test",
			LaunchTemplate: awscloud.LaunchTemplate{Name: "refuel-node"}, PollInterval: 100 * time.Millisecond,
			InstanceTypes: []awscloud.InstanceType{{Name: "p3.2xlarge", GPUs: 1, OnDemandPrice: 3.06}},
		}
		for _, e := range edits {
			e(c) // after the defaults, so an edit may change them
		}
	})
}

// TestAWSPathPreemptionWithNotice runs a job through the AWS provider;
// the market's stock in its zone drops to zero, the sim serves an
// interruption notice, and the run resumes in the other zone from the
// final checkpoint, ending with the uninterrupted model.
func TestAWSPathPreemptionWithNotice(t *testing.T) {
	parallel(t)
	s := startAWSStack(t, map[string][]int{"us-west-2a": {1, 0, 0, 0}, "us-west-2b": {1, 1, 1, 1}}, sim.Quotas{})
	ctx := context.Background()
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	js := quickJob("aws-preempt", spec.TierFlexible)
	js.Work = spec.Duration(16 * time.Second) // still training when the notice comes, on a busy machine
	js.Resources.Zones = []string{"us-west-2a", "us-west-2b"}
	run, err := jobs.Submit(ctx, s.Client, js)
	if err != nil {
		t.Fatal(err)
	}
	st, err := jobs.WaitFor(wctx, s.Client, js.ID, func(st training.Status) bool { return st.LastCheckpoint != nil && st.Instance != nil })
	if err != nil {
		t.Fatal(err)
	}
	first := st.Instance
	// Take away the stock of the zone the run is in.
	if first.Zone == "us-west-2b" {
		t.Skip("the run started in the zone whose stock stays; the market gives no preemption to test")
	}
	s.Sim.Advance(1)
	var final training.Status
	if err := run.Get(wctx, &final); err != nil {
		t.Fatal(err)
	}
	if final.Preemptions < 1 || final.Recoveries < 1 || final.LastPreemption == nil || !final.LastPreemption.WithNotice {
		t.Fatalf("preemptions %d recoveries %d last %+v; want a preemption with notice and a recovery", final.Preemptions, final.Recoveries, final.LastPreemption)
	}
	if final.LastRecovery.ResumedFromStep < final.LastPreemption.CheckpointStep {
		t.Errorf("resumed from %d, before the checkpoint at %d", final.LastRecovery.ResumedFromStep, final.LastPreemption.CheckpointStep)
	}
	want := trainer.Train(trainer.Config{Steps: final.TotalSteps, Seed: trainer.DefaultSeed}).Digest()
	if final.ModelDigest != want {
		t.Errorf("final model %s; want the uninterrupted %s", final.ModelDigest, want)
	}
	if left, _ := s.Provider.List(ctx, nil); len(left) != 0 {
		t.Errorf("instances left running: %v", left)
	}
}

// TestAWSPathFailureClasses checks that each way a scale-out fails reaches
// the run's status with its class, and that impossible requests fail fast.
func TestAWSPathFailureClasses(t *testing.T) {
	t.Parallel() // its cases wait at the suite's gate
	p3a := sim.Pool{Zone: "us-west-2a", InstanceType: "p3.2xlarge"}
	cases := map[string]struct {
		zones  map[string][]int
		quotas sim.Quotas
		tier   spec.Tier
		edit   func(*spec.JobSpec)
		// before runs ahead of the submit; after runs once the run has met
		// no capacity, and must lead to class.
		before, after func(*testing.T, *controlplane.Stack)
		class         capacity.Class
		failsFast     bool
	}{
		"no capacity, then stock returns": {
			zones: map[string][]int{"us-west-2a": {0, 1}}, tier: spec.TierFlexible, class: capacity.NoCapacity,
		},
		"spot quota": {
			zones: map[string][]int{"us-west-2a": {2}}, quotas: sim.Quotas{SpotInstances: 1}, tier: spec.TierFlexible,
			before: func(t *testing.T, s *controlplane.Stack) { occupySpot(t, s) },
			class:  capacity.Quota, failsFast: true,
		},
		"on-demand vCPU quota": {
			zones: map[string][]int{"us-west-2a": {1}}, quotas: sim.Quotas{OnDemandVCPUs: 4}, tier: spec.TierCritical,
			class: capacity.Quota, failsFast: true,
		},
		"spot price above the cap": {
			zones: map[string][]int{"us-west-2a": {0, 1, 1}}, tier: spec.TierFlexible,
			edit: func(js *spec.JobSpec) { js.Resources.MaxPricePerHour = 1 },
			after: func(t *testing.T, s *controlplane.Stack) {
				if err := s.Sim.SetSpotPrice(p3a, 1.5); err != nil {
					t.Fatal(err)
				}
				s.Sim.Advance(1)
			},
			class: capacity.Price,
		},
		"initialisation failure": {
			zones: map[string][]int{"us-west-2a": {1}}, tier: spec.TierFlexible,
			before: func(_ *testing.T, s *controlplane.Stack) { s.Sim.FailNextInits(1) }, class: capacity.InitFailure,
		},
		"spec mismatch": {
			zones: map[string][]int{"us-west-2a": {1}}, tier: spec.TierFlexible,
			edit:  func(js *spec.JobSpec) { js.Resources.InstanceTypes = []string{"p9.mega"} },
			class: capacity.SpecMismatch, failsFast: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			parallel(t) // each case has a stack, cloud and data dir of its own
			s := startAWSStack(t, tc.zones, tc.quotas)
			ctx := context.Background()
			wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			defer cancel()
			js := quickJob("aws-"+strings.ToLower(strings.NewReplacer(" ", "-", ",", "").Replace(name)), tc.tier)
			if tc.edit != nil {
				tc.edit(&js)
			}
			if tc.before != nil {
				tc.before(t, s)
			}
			run, err := jobs.Submit(ctx, s.Client, js)
			if err != nil {
				t.Fatal(err)
			}
			if tc.failsFast {
				err := run.Get(wctx, nil)
				var app *temporal.ApplicationError
				if !errors.As(err, &app) || app.Type() != string(tc.class) {
					t.Fatalf("run ended with %v; want it to fail fast with class %s", err, tc.class)
				}
				return
			}
			if tc.after != nil {
				if _, err := jobs.WaitFor(wctx, s.Client, js.ID, hasFailure(capacity.NoCapacity)); err != nil {
					t.Fatal(err)
				}
				tc.after(t, s)
			}
			if st, err := jobs.WaitFor(wctx, s.Client, js.ID, hasFailure(tc.class)); err != nil {
				t.Fatalf("%v; failures %+v", err, st.Failures)
			}
			// Let the market recover so the run can finish.
			_ = s.Sim.SetSpotPrice(p3a, 0.9)
			s.Sim.Advance(1)
			if err := run.Get(wctx, nil); err != nil {
				t.Fatalf("run did not finish once the market recovered: %v", err)
			}
		})
	}
}

func hasFailure(class capacity.Class) func(training.Status) bool {
	return func(st training.Status) bool {
		for _, f := range st.Failures {
			if f.Class == string(class) {
				return true
			}
		}
		return false
	}
}

// occupySpot takes one spot instance for a run that does not exist.
func occupySpot(t *testing.T, s *controlplane.Stack) {
	t.Helper()
	offerings, err := s.Provider.Offerings(context.Background(), spec.Resources{GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	req := capacity.Request{RunID: "occupier", Attempt: 1, Offerings: capacity.OnlyMarket(offerings, capacity.Spot)}
	if _, err := s.Provider.Acquire(context.Background(), req); err != nil {
		t.Fatal(err)
	}
}

// acquireTwice runs the Acquire activity twice with the same request, as
// Temporal does when an attempt's result is lost.
func acquireTwice(ctx workflow.Context, req capacity.Request) ([]capacity.Instance, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: workflows.TaskQueue, StartToCloseTimeout: time.Minute})
	var out []capacity.Instance
	for range 2 {
		var inst capacity.Instance
		if err := workflow.ExecuteActivity(ctx, activities.AcquireName, req).Get(ctx, &inst); err != nil {
			return out, err
		}
		out = append(out, inst)
	}
	return out, nil
}

// TestAWSPathIdempotentAcquireUnderThrottling replays an Acquire attempt
// through a throttling storm: exactly one instance is launched, and the
// janitor later releases it since no run owns it.
func TestAWSPathIdempotentAcquireUnderThrottling(t *testing.T) {
	parallel(t) // a stack and data dir of its own; most of its time is spent waiting
	s := startAWSStack(t, map[string][]int{"us-west-2a": {1}}, sim.Quotas{})
	ctx := context.Background()
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()

	w := worker.New(s.Client, "acquire-twice", worker.Options{})
	w.RegisterWorkflow(acquireTwice)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	offerings, err := s.Provider.Offerings(ctx, spec.Resources{GPUs: 1})
	if err != nil || len(offerings) == 0 {
		t.Fatalf("offerings %v, %v", offerings, err)
	}
	s.Sim.ThrottleNext(12) // more than the SDK retries: Temporal's retry backs off too
	req := capacity.Request{RunID: "ghost-run", Attempt: 1, Offerings: capacity.Order(offerings, spec.TierFlexible, "")}
	run, err := s.Client.ExecuteWorkflow(wctx, client.StartWorkflowOptions{TaskQueue: "acquire-twice"}, acquireTwice, req)
	if err != nil {
		t.Fatal(err)
	}
	var got []capacity.Instance
	if err := run.Get(wctx, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != got[1].ID {
		t.Fatalf("acquired %v; want the same instance twice", got)
	}
	if n := len(s.Sim.Instances()); n != 1 {
		t.Fatalf("the sim launched %d instances; want exactly 1", n)
	}

	jan, err := s.Client.ExecuteWorkflow(wctx, client.StartWorkflowOptions{ID: "janitor-aws", TaskQueue: workflows.TaskQueue}, workflows.JanitorName)
	if err != nil {
		t.Fatal(err)
	}
	var report instances.JanitorReport
	if err := jan.Get(wctx, &report); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(report.Released) != fmt.Sprint([]string{got[0].ID}) {
		t.Errorf("janitor released %v; want the leaked %s", report.Released, got[0].ID)
	}
	if _, state, _ := s.Provider.Describe(ctx, got[0].ID); state != capacity.StateTerminated {
		t.Errorf("leaked instance is %s after the janitor; want terminated", state)
	}
}

// TestDrillOnTheAWSProvider runs `starter drill` against a worker on the
// AWS provider whose EC2 endpoint is a sim in another process (`worker
// ec2-sim`, its controls guarded by a token): the worker serves the
// drill's notice through the sim's controls with the token it was given,
// the agent saves the final checkpoint, and the run resumes on a
// replacement with the uninterrupted model.
func TestDrillOnTheAWSProvider(t *testing.T) {
	parallel(t)
	worker, starter := refuelBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	srv := startDevserver(ctx, t, devserver.Options{FrontendAddr: "127.0.0.1:0", SearchAttributes: workflows.SearchAttributeTypes})
	token := filepath.Join(t.TempDir(), "sim-token")
	if err := os.WriteFile(token, []byte("drill-on-the-aws-provider-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cloudAddr := freeAddr(t)
	cloudURL := "http://" + cloudAddr
	cloud := startProcess(t, "ec2-sim", cleanEnv(), worker, "ec2-sim", "--listen", cloudAddr,
		"--traces", market(t, map[string][]int{"us-west-2a": {4, 4}, "us-west-2b": {4, 4}}),
		"--speed", "0", "--temporal-address", srv.FrontendAddr(), "--control-token-file", token,
		"--data-dir", t.TempDir(), "--demo-step-time", demoStepTime.String(), "--report", "0", "--log-level", "warn")
	// Its controls want the token: readiness is an EC2 call.
	cloud.waitReady(t, cloudURL+"/?Action=DescribeAvailabilityZones&Version=2016-11-15", time.Minute)
	startAWSWorker(t, "worker", worker, srv.FrontendAddr(), cloudURL, "--sim-control-token-file", token)

	res := runCLI(t, t.TempDir(), starter, "drill", "--json", "--temporal-address", srv.FrontendAddr(),
		"--work", "6s", "--checkpoint-interval", "1s", "--notice", "10s", "--timeout", "3m")
	var rep jobs.DrillReport
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("starter drill --json printed %q (exit %d): %v\nstderr:\n%s", res.stdout, res.code, err, res.stderr)
	}
	if res.code != 0 || !rep.Passed || !rep.FinalIdentical || rep.ResumedFromStep < rep.CheckpointStep {
		t.Errorf("drill on the AWS provider: exit %d, report %+v\nstderr:\n%s", res.code, rep, res.stderr)
	}
}
