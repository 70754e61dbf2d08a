package tests

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"refuel/activities"
	"refuel/controlplane"
	"refuel/jobs"
	"refuel/pkg/capacity"
	awscloud "refuel/pkg/cloud/aws"
	"refuel/pkg/cloud/gce"
	"refuel/pkg/spec"
	"refuel/pkg/trainer"
	"refuel/workflows"
	"refuel/workflows/instances"
	"refuel/workflows/training"
)

// startCloudsStack runs the control plane on two public clouds at once,
// --provider aws,gce, each provider on its own wire protocol to the one
// simulated market: EC2's p3.2xlarge in us-west-2a (stock at every tick
// of a market standing still) beside Compute Engine's built-in market.
func startCloudsStack(t *testing.T) *controlplane.Stack {
	t.Helper()
	return startStack(t, func(c *controlplane.Config) {
		c.Provider = controlplane.ProviderAWS + "," + controlplane.ProviderGCE
		c.Sim = controlplane.SimConfig{Traces: market(t, map[string][]int{"us-west-2a": {1, 1}}), Speed: 0, Notice: 15 * time.Second,
			ServeEC2: "127.0.0.1:0", ServeGCE: "127.0.0.1:0"}
		c.AWS = awscloud.Config{
			Region: "us-west-2", AccessKeyID: "test", SecretAccessKey: "test",
			LaunchTemplate: awscloud.LaunchTemplate{Name: "refuel-node"}, PollInterval: 100 * time.Millisecond,
			InstanceTypes: []awscloud.InstanceType{{Name: "p3.2xlarge", GPUs: 1, OnDemandPrice: 3.06}},
		}
		c.GCE = gce.Config{Project: "refuel-test", Zones: []string{"us-central1-a"}, PollInterval: 100 * time.Millisecond}
	})
}

// A run starts on the cheapest spot of either cloud, EC2's p3.2xlarge
// ($0.97/h against Compute Engine's a2-highgpu-1g at $1.10/h); EC2 takes
// it back with notice and has nothing left in the zone, and the run
// continues on Compute Engine's spot from its final checkpoint, ending
// with the uninterrupted model. Its ledger holds a segment on each cloud
// and adds up; nothing is left running on either.
func TestRunMovesFromAWSSpotToGCESpot(t *testing.T) {
	parallel(t)
	s := startCloudsStack(t)
	ctx := context.Background()
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	js := quickJob("aws-to-gce", spec.TierFlexible)
	js.Work = spec.Duration(16 * time.Second)
	js.Resources.InstanceTypes = []string{"p3.2xlarge", "a2-highgpu-1g"}
	js.Resources.Zones = []string{"us-west-2a", "us-central1-a"}
	run, err := jobs.Submit(ctx, s.Client, js)
	if err != nil {
		t.Fatal(err)
	}
	st, err := jobs.WaitFor(wctx, s.Client, js.ID, func(st training.Status) bool { return st.LastCheckpoint != nil && st.Instance != nil })
	if err != nil {
		t.Fatal(err)
	}
	first := st.Instance
	if !strings.HasPrefix(first.Offering, "aws/p3.2xlarge/us-west-2a/spot") {
		t.Fatalf("first instance on %s; want the cheapest spot of both clouds, aws/p3.2xlarge/us-west-2a/spot", first.Offering)
	}
	if err := s.Sim.HoldStock(first.ID, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sim.Interrupt(first.ID, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	var final training.Status
	if err := run.Get(wctx, &final); err != nil {
		t.Fatal(err)
	}
	if final.Preemptions < 1 || final.LastPreemption == nil || !final.LastPreemption.WithNotice {
		t.Fatalf("preemptions %d last %+v; want a preemption with notice", final.Preemptions, final.LastPreemption)
	}
	if final.LastRecovery == nil || final.LastRecovery.ResumedFromStep < final.LastPreemption.CheckpointStep {
		t.Errorf("recovery %+v; want one resumed from the final checkpoint at %d", final.LastRecovery, final.LastPreemption.CheckpointStep)
	}
	want := trainer.Train(trainer.Config{Steps: final.TotalSteps, Seed: trainer.DefaultSeed}).Digest()
	if final.ModelDigest != want {
		t.Errorf("final model %s; want the uninterrupted %s", final.ModelDigest, want)
	}
	clouds := map[string]float64{}
	var segments float64
	for _, seg := range final.Ledger.Segments {
		if seg.End.IsZero() {
			t.Errorf("the ledger still pays for %s", seg.InstanceID)
			continue
		}
		cloud, _, _ := strings.Cut(seg.Offering, "/")
		clouds[cloud] += seg.USD(seg.End)
		segments += seg.USD(seg.End)
	}
	if clouds["aws"] <= 0 || clouds["gce"] <= 0 {
		t.Errorf("cost by cloud %v; want time paid on both aws and gce", clouds)
	}
	var byMarket float64
	for _, l := range final.Cost.ByMarket {
		byMarket += l.USD
	}
	for name, usd := range map[string]float64{"cost_usd": final.CostUSD, "segments": segments, "by market": byMarket} {
		if math.Abs(usd-final.Cost.TotalUSD) > 0.01 {
			t.Errorf("%s $%.4f; want the ledger's total $%.4f", name, usd, final.Cost.TotalUSD)
		}
	}
	for _, p := range s.Clouds {
		if left, _ := p.List(ctx, nil); len(left) != 0 {
			t.Errorf("%s: instances left running: %v", p.Name(), left)
		}
	}
}

// The janitor finds a leaked Compute Engine instance by its labels (a
// run that does not exist) and deletes it; another deployment's is left.
func TestJanitorDeletesALeakedGCEInstance(t *testing.T) {
	parallel(t)
	s := startCloudsStack(t)
	ctx := context.Background()
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var g capacity.Provider
	for _, p := range s.Clouds {
		if p.Name() == controlplane.ProviderGCE {
			g = p
		}
	}
	if g == nil {
		t.Fatalf("clouds %v: no gce", s.Clouds)
	}
	offerings, err := g.Offerings(ctx, spec.Resources{GPUs: 1, InstanceTypes: []string{"a2-highgpu-1g"}, Zones: []string{"us-central1-a"}})
	if err != nil || len(offerings) == 0 {
		t.Fatalf("offerings %v, %v", offerings, err)
	}
	leak := func(attempt int, deployment string) capacity.Instance {
		t.Helper()
		inst, err := g.Acquire(ctx, capacity.Request{RunID: "no-such-run", Attempt: attempt, Offerings: offerings[:1],
			Tags: map[string]string{capacity.TagManagedBy: capacity.ManagedBy, capacity.TagRun: "no-such-run", capacity.TagDeployment: deployment}})
		if err != nil {
			t.Fatal(err)
		}
		return inst
	}
	ghost, theirs := leak(1, activities.DefaultDeployment), leak(2, "other")
	t.Cleanup(func() { _ = g.Release(context.Background(), theirs.ID) })

	run, err := s.Client.ExecuteWorkflow(wctx, client.StartWorkflowOptions{ID: "janitor-gce", TaskQueue: workflows.TaskQueue}, workflows.JanitorName)
	if err != nil {
		t.Fatal(err)
	}
	var report instances.JanitorReport
	if err := run.Get(wctx, &report); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(report.Released, ghost.ID) || slices.Contains(report.Released, theirs.ID) {
		t.Errorf("janitor released %v; want %s and not the other deployment's %s", report.Released, ghost.ID, theirs.ID)
	}
	if _, _, err := g.Describe(ctx, ghost.ID); !capacity.IsNotFound(err) {
		t.Errorf("the leaked instance %s: %v; want it deleted", ghost.ID, err)
	}
	if _, state, err := g.Describe(ctx, theirs.ID); err != nil || state != capacity.StateRunning {
		t.Errorf("the other deployment's instance is %s (%v); want it left running", state, err)
	}
}

// The interruption drill on Compute Engine alone (the in-process sim
// behind the gce provider), for one node and for a gang of two on spot:
// the preempted VMs are replaced, the run resumes from the final
// checkpoint with the uninterrupted model, and nothing is left running.
func TestDrillOnGCE(t *testing.T) {
	t.Parallel() // its cases wait at the suite's gate
	for _, nodes := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d nodes", nodes), func(t *testing.T) {
			parallel(t)
			s := startStack(t, func(c *controlplane.Config) {
				c.Provider = controlplane.ProviderGCE
				c.Sim = controlplane.SimConfig{Speed: 0, ServeGCE: "127.0.0.1:0"}
				c.GCE = gce.Config{Project: "refuel-test", Zones: []string{"us-central1-a"}, PollInterval: 100 * time.Millisecond}
			})
			ctx := context.Background()
			rep, err := jobs.Drill(ctx, s.Client, jobs.DrillOptions{
				Work: 6 * time.Second, Interval: time.Second, NoticeGrace: 30 * time.Second, Timeout: 3 * time.Minute,
				Nodes: nodes, Progress: testWriter{t},
			})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Passed || !rep.FinalIdentical {
				t.Fatalf("drill failed: %s", rep.Reason)
			}
			if rep.ResumedFromStep < rep.CheckpointStep {
				t.Errorf("resumed from %d, before the checkpoint at %d", rep.ResumedFromStep, rep.CheckpointStep)
			}
			st, err := jobs.Status(ctx, s.Client, rep.WorkflowID)
			if err != nil {
				t.Fatal(err)
			}
			if st.Instance != nil || len(st.Ledger.Segments) == 0 {
				t.Fatalf("status after the drill: instance %+v, %d ledger segments", st.Instance, len(st.Ledger.Segments))
			}
			for _, seg := range st.Ledger.Segments {
				if !strings.HasPrefix(seg.Offering, "gce/") || seg.Market != string(capacity.Spot) {
					t.Errorf("segment on %s (%s); want Compute Engine's spot", seg.Offering, seg.Market)
				}
			}
			if left, _ := s.Provider.List(ctx, nil); len(left) != 0 {
				t.Errorf("instances still running after the drill: %v", left)
			}
		})
	}
}
