package tests

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"refuel/workflows/capacitypool"
	"refuel/workflows/training"

	"refuel/controlplane"
	"refuel/jobs"
	"refuel/pkg/admission"
	"refuel/pkg/capacity"
	"refuel/pkg/cloud/local"
	"refuel/pkg/pool"
	"refuel/pkg/spec"
	"refuel/pkg/trainer"
	"refuel/workflows"
)

// TestGangDrill is `starter drill --nodes 2`: a gang of two real agents
// and trainers checkpoints, rank 1's instance gets a notice, every rank
// stops at a final checkpoint, rank 1 alone is replaced while rank 0
// waits on its instance, and the gang ends with exactly the model of two
// nodes never interrupted.
func TestGangDrill(t *testing.T) {
	parallel(t)
	s := startStack(t, nil)
	ctx := context.Background()
	rep, err := jobs.Drill(ctx, s.Client, jobs.DrillOptions{
		Work: 6 * time.Second, Interval: time.Second, NoticeGrace: 30 * time.Second, Timeout: 3 * time.Minute,
		Nodes: 2, Progress: testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rep)
	t.Logf("drill report: %s", b)
	st, err := jobs.Status(ctx, s.Client, rep.WorkflowID)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Passed || !rep.FinalIdentical || rep.Nodes != 2 || rep.NodesReplaced != 1 {
		t.Fatalf("drill on a gang: passed %v (%s), identical %v, nodes %d, replaced %d; want passed with one node replaced\nfailures %+v\nledger %+v",
			rep.Passed, rep.Reason, rep.FinalIdentical, rep.Nodes, rep.NodesReplaced, st.Failures, st.Ledger.Segments)
	}
	if one := trainer.Train(trainer.Config{Steps: st.TotalSteps, Seed: trainer.DefaultSeed}).Digest(); rep.ReferenceDigest == one {
		t.Errorf("the gang's reference is the one-node model %s; want two nodes' own", short(one))
	}
	// One new instance for the lost node: the gang's two and one more.
	held := map[string]bool{}
	for _, seg := range st.Ledger.Segments {
		held[seg.InstanceID] = true
	}
	if len(held) != 3 || st.Preemptions != 1 || st.NodeReplacements != 1 {
		t.Errorf("%d instances held (%v), %d preemptions, %d node replacements; want the gang's 2 and one replacement, after one preemption\nfailures %+v\nledger %+v",
			len(held), held, st.Preemptions, st.NodeReplacements, st.Failures, st.Ledger.Segments)
	}
	// With a notice every rank checkpointed the step it stopped at: no
	// work lost, only the replacement's start paid for.
	if st.LostWorkSecs != 0 || st.Cost.RecoveryUSD <= 0 {
		t.Errorf("lost work %.2fs, recovery $%.6f; want none lost and the replacement's start counted", st.LostWorkSecs, st.Cost.RecoveryUSD)
	}
	if !strings.Contains(scrape(t, s.MetricsURL()), "refuel_node_replacements_total") {
		t.Error("/metrics lacks refuel_node_replacements_total")
	}
	if left, _ := s.Cloud.List(ctx, nil); len(left) != 0 {
		t.Errorf("instances still running after the run ended: %v", left)
	}
	recordHistory(t, s.Client, rep.WorkflowID, "training-run-gang-drill")
}

// TestGangNodeReplacementBeatsWholeGangRestart measures, in one run of a
// gang of three, the time from one node's notice to the gang training
// again (the two others kept) against a whole-gang restart (paused, every
// node given back, resumed on three new ones), and checks the model is
// still exactly the uninterrupted one after both.
func TestGangNodeReplacementBeatsWholeGangRestart(t *testing.T) {
	parallel(t)
	s := startStack(t, nil)
	ctx := context.Background()
	wctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	js := quickJob("gang-3", spec.TierFlexible)
	js.Work, js.Resources.Nodes, js.Checkpoint.Interval = spec.Duration(12*time.Second), 3, "1s"
	run, err := jobs.Submit(ctx, s.Client, js)
	if err != nil {
		t.Fatal(err)
	}
	wait := func(what string, cond func(training.Status) bool) training.Status {
		t.Helper()
		st, err := jobs.WaitFor(wctx, s.Client, js.ID, cond)
		if err != nil {
			t.Fatalf("waiting for %s: %v (last status %s)", what, err, st.State)
		}
		return st
	}
	isTraining := func(st training.Status) bool {
		return st.State == workflows.StateRunning && len(st.Nodes) == 3 && st.LastCheckpoint != nil
	}
	st := wait("the gang's first checkpoint", isTraining)
	kept := []string{st.Nodes[0].Instance.ID, st.Nodes[1].Instance.ID}
	lost := st.Nodes[2].Instance.ID
	notice, err := jobs.Interrupt(ctx, s.Client, lost, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	st = wait("the gang training again after its node was replaced", func(st training.Status) bool {
		return st.NodeReplacements == 1 && st.LastRecovery != nil && !st.LastRecovery.ResumedAt.IsZero()
	})
	nodeReplaced := st.LastRecovery.ResumedAt.Sub(notice)
	if got := []string{st.Nodes[0].Instance.ID, st.Nodes[1].Instance.ID}; got[0] != kept[0] || got[1] != kept[1] || st.Nodes[2].Instance.ID == lost {
		t.Errorf("after the notice on rank 2 the gang is on %v; want ranks 0 and 1 kept on %v and rank 2 off %s", st.Nodes, kept, lost)
	}

	// A whole-gang restart: every node given back, three acquired anew.
	before := st.Step
	paused := time.Now()
	if err := jobs.Pause(ctx, s.Client, js.ID); err != nil {
		t.Fatal(err)
	}
	wait("the gang given back", func(st training.Status) bool { return st.Paused && st.Instance == nil && len(st.Nodes) == 0 })
	stopped := time.Since(paused)
	resumed := time.Now()
	if err := jobs.Resume(ctx, s.Client, js.ID); err != nil {
		t.Fatal(err)
	}
	wait("the gang training again after the restart", func(st training.Status) bool {
		return isTraining(st) && st.Step > before
	})
	restarted := stopped + time.Since(resumed)
	t.Logf("gang of 3: one node's notice to training again %s (2 nodes kept); whole-gang restart %s (%s to give back, %s to acquire and resume)",
		nodeReplaced.Round(time.Millisecond), restarted.Round(time.Millisecond), stopped.Round(time.Millisecond), (restarted - stopped).Round(time.Millisecond))

	var final training.Status
	if err := run.Get(wctx, &final); err != nil {
		t.Fatal(err)
	}
	want := trainer.TrainGang(trainer.Config{Steps: final.TotalSteps, Seed: trainer.DefaultSeed}, 3).Digest()
	if final.ModelDigest != want {
		t.Errorf("final model %s; want the uninterrupted gang's %s", short(final.ModelDigest), short(want))
	}
	if held := len(final.Ledger.Segments); held != 3+1+3 {
		t.Errorf("%d ledger segments; want the gang's 3, the replacement and the 3 after the restart", held)
	}
	if left, _ := s.Cloud.List(ctx, nil); len(left) != 0 {
		t.Errorf("instances still running after the run ended: %v", left)
	}
}

// gangPools is two base machines and a burst pool of the local cloud
// capped at burstCap instances.
func gangPools(burstCap int) *pool.Config {
	c := pool.Config{
		Base:  pool.BaseGroup{Name: "dc", Counts: []pool.BaseCount{{InstanceType: "gpu.1x", GPUs: 1, Count: 2, Zone: "dc", PricePerHour: 0.4}}},
		Burst: []pool.BurstPool{{Name: "cloud", MaxInstances: burstCap, Offerings: local.DefaultOfferings()}},
	}
	c.Normalize()
	return &c
}

// A gang of three on a pool of two base machines never holds the two
// idle while it cannot have a third: with room in burst for all three it
// overflows there as a unit; without, it waits holding nothing, and the
// base machines go to the runs behind it.
func TestGangOnAPoolOfTwoBaseMachines(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		burstCap  int
		overflows bool
	}{
		"burst has room for the gang: overflows as a unit": {burstCap: 3, overflows: true},
		"burst has room for two: waits holding nothing":    {burstCap: 2},
	} {
		t.Run(name, func(t *testing.T) {
			parallel(t)
			s := startStack(t, func(c *controlplane.Config) {
				c.Provider, c.Pools = controlplane.ProviderLocal, gangPools(tc.burstCap)
			})
			ctx := context.Background()
			wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			defer cancel()
			gang := quickJob("gang", spec.TierFlexible)
			gang.Work, gang.Resources.Nodes = spec.Duration(3*time.Second), 3
			gangRun, err := jobs.Submit(ctx, s.Client, gang)
			if err != nil {
				t.Fatal(err)
			}
			if tc.overflows {
				st, err := jobs.WaitFor(wctx, s.Client, gang.ID, func(st training.Status) bool {
					return st.State == workflows.StateRunning && len(st.Nodes) == 3
				})
				if err != nil {
					t.Fatalf("waiting for the gang to train: %v (last %s, admission %+v)", err, st.State, st.Admission)
				}
				p := waitPool(t, wctx, s, "the gang on burst", func(p capacitypool.Status) bool { return p.Burst == 3 })
				if p.Base != 0 || st.Admission == nil || st.Admission.Layer != string(admission.BurstLayer) {
					t.Errorf("pool holds %d base and %d burst, the gang on %+v; want all three nodes on burst, no base machine held", p.Base, p.Burst, st.Admission)
				}
				for _, n := range st.Nodes {
					if n.Instance.Zone == "dc" {
						t.Errorf("rank %d on %s; want a burst offering", n.Rank, n.Instance.Offering)
					}
				}
				var final training.Status
				if err := gangRun.Get(wctx, &final); err != nil {
					t.Fatal(err)
				}
				if want := trainer.TrainGang(trainer.Config{Steps: final.TotalSteps, Seed: trainer.DefaultSeed}, 3).Digest(); final.ModelDigest != want {
					t.Errorf("final model %s; want the three-node model %s", short(final.ModelDigest), short(want))
				}
			} else {
				waitPool(t, wctx, s, "the gang queued", func(p capacitypool.Status) bool {
					return len(p.Waiting) == 1 && p.Waiting[0].ID == gang.ID
				})
				// A run behind it takes a base machine: the gang reserves
				// nothing it cannot use.
				small := quickJob("small", spec.TierFlexible)
				if _, err := jobs.Submit(ctx, s.Client, small); err != nil {
					t.Fatal(err)
				}
				st, err := jobs.WaitFor(wctx, s.Client, small.ID, jobs.Ended)
				if err != nil || st.State != workflows.StateCompleted || len(st.Ledger.Segments) != 1 || st.Ledger.Segments[0].Market != string(capacity.Base) {
					t.Fatalf("the run behind the gang: %v, %s on %+v; want it completed on a base machine", err, st.State, st.Ledger.Segments)
				}
				p := waitPool(t, wctx, s, "the gang still queued", func(p capacitypool.Status) bool { return len(p.Running) == 0 })
				gst, err := jobs.Status(ctx, s.Client, gang.ID)
				if err != nil {
					t.Fatal(err)
				}
				if len(p.Waiting) != 1 || gst.State != workflows.StateQueued || gst.Instance != nil || len(gst.Ledger.Segments) != 0 {
					t.Errorf("gang %s holding %v with %d ledger segments, pool waiting %d; want it queued, never having held an instance", gst.State, gst.Instance, len(gst.Ledger.Segments), len(p.Waiting))
				}
				if err := s.Client.CancelWorkflow(ctx, gang.ID, ""); err != nil {
					t.Fatal(err)
				}
				if err := gangRun.Get(wctx, nil); err == nil {
					t.Error("the cancelled gang's run ended without an error")
				}
			}
			waitPool(t, wctx, s, "everything given back", func(p capacitypool.Status) bool { return len(p.Running) == 0 && len(p.Waiting) == 0 })
			for _, c := range []interface {
				List(context.Context, map[string]string) ([]capacity.Instance, error)
			}{s.Cloud, s.Base} {
				if left, _ := c.List(ctx, nil); len(left) != 0 {
					t.Errorf("instances still running: %v", left)
				}
			}
		})
	}
}

func short(digest string) string {
	return digest[:min(12, len(digest))]
}

// TestElasticGangDrill is `starter drill --nodes 3 --min-nodes 2`: the
// drill takes rank 2's instance and holds its offering out of stock, so
// no replacement comes within shrink_after; the gang trains on its two
// other nodes from the latest checkpoint, grows back to three when the
// stock returns, and ends with exactly the model of a gang never
// interrupted that trained at the same widths from the same steps.
func TestElasticGangDrill(t *testing.T) {
	parallel(t)
	s := startStack(t, nil)
	ctx := context.Background()
	rep, err := jobs.Drill(ctx, s.Client, jobs.DrillOptions{
		Work: 20 * time.Second, Interval: time.Second, NoticeGrace: 30 * time.Second, Timeout: 80 * time.Second,
		Nodes: 3, MinNodes: 2, ShrinkAfter: 2 * time.Second, Hold: 6 * time.Second, Progress: testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rep)
	t.Logf("drill report: %s", b)
	st, err := jobs.Status(ctx, s.Client, rep.WorkflowID)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Passed || !rep.FinalIdentical || rep.Nodes != 3 || rep.ShrunkTo != 2 || rep.GrewTo != 3 || rep.NodesReplaced != 0 {
		t.Fatalf("elastic drill: passed %v (%s), identical %v, nodes %d, shrunk to %d, grew to %d, replaced %d; want passed, 3 → 2 → 3 with none replaced\nresizes %+v\nfailures %+v",
			rep.Passed, rep.Reason, rep.FinalIdentical, rep.Nodes, rep.ShrunkTo, rep.GrewTo, rep.NodesReplaced, st.Ledger.Resizes, st.Failures)
	}
	// The gang's 3, and one node more when it grew back.
	held := map[string]bool{}
	for _, seg := range st.Ledger.Segments {
		held[seg.InstanceID] = true
	}
	if len(held) != 4 || st.NodesAsked != 3 {
		t.Errorf("%d instances held, nodes asked %d; want the gang's 3 and the one it grew back by, of 3 asked\nledger %+v", len(held), st.NodesAsked, st.Ledger.Segments)
	}
	if left, _ := s.Cloud.List(ctx, nil); len(left) != 0 {
		t.Errorf("instances still running after the run ended: %v", left)
	}
	recordHistory(t, s.Client, rep.WorkflowID, "training-run-elastic-gang-drill")
}

// TestGangDrillOnTheBuiltInMarket is `starter drill --nodes 2 --tier
// flexible` on the default stack: a spot gang on the simulated cloud's
// built-in market, whose one-node traces stand for every node alike.
func TestGangDrillOnTheBuiltInMarket(t *testing.T) {
	parallel(t)
	s := startStack(t, func(c *controlplane.Config) {
		c.Provider = controlplane.ProviderSim
		c.Sim = controlplane.SimConfig{Speed: 1, Notice: 5 * time.Second}
	})
	rep, err := jobs.Drill(context.Background(), s.Client, jobs.DrillOptions{
		Work: 20 * time.Second, Interval: time.Second, NoticeGrace: 30 * time.Second, Timeout: 80 * time.Second,
		Nodes: 2, Tier: spec.TierFlexible, Progress: testWriter{t},
	})
	if err != nil || !rep.Passed || rep.Nodes != 2 {
		b, _ := json.Marshal(rep)
		st, _ := jobs.Status(context.Background(), s.Client, rep.WorkflowID)
		t.Fatalf("drill of a spot gang on the built-in market: %v; report %s; want passed\nfailures %+v\npreemptions %d, restarts %+v\nsegments %+v", err, b, st.Failures, st.Preemptions, st.Restarts, st.Ledger.Segments)
	}
}
