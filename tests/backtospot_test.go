package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	"refuel/workflows/registry"
	"refuel/workflows/training"

	"go.temporal.io/sdk/client"

	"refuel/controlplane"
	"refuel/jobs"
	"refuel/pkg/capacity"
	"refuel/pkg/cloud/local"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/spec"
	"refuel/pkg/trainer"
	"refuel/workflows"
)

// TestDeadlineRunGoesBackToSpotEndToEnd: a deadline run starts while no
// spot is in stock and falls back to on-demand; when spot stock returns,
// refuel judges the slack enough for a changeover, launches spot while
// on-demand keeps training, stops the trainer at a checkpoint, releases
// on-demand and resumes on spot, ending with the model an uninterrupted
// run makes. On the local cloud, and through the AWS SDK on EC2's wire
// protocol.
func TestDeadlineRunGoesBackToSpotEndToEnd(t *testing.T) {
	parallel(t)
	quickSpotChecks := func(c *controlplane.Config) {
		c.Workflows = registry.New()
		c.Workflows.Run.SpotRetryInterval = time.Second
		c.Workflows.Run.MaxSpotRetryInterval = 2 * time.Second
		c.Workflows.Run.RestartOverhead = 2 * time.Second
		c.Workflows.Run.WaitForSpot = false // take on-demand at the first stock-out
	}

	t.Run("local cloud", func(t *testing.T) {
		var spots []string
		for _, o := range local.DefaultOfferings() {
			if o.Market == capacity.Spot {
				spots = append(spots, o.Key())
			}
		}
		s := startStack(t, func(c *controlplane.Config) {
			quickSpotChecks(c)
			c.Stock = map[string]int{}
			for _, k := range spots {
				c.Stock[k] = 0
			}
		})
		final := goBackToSpot(t, s, "back-to-spot-1", nil, func() { s.Cloud.SetStock(spots[0], 1) })
		if got := final.Ledger.Segments[1].Offering; got != spots[0] {
			t.Errorf("spot on %s; want %s, the one back in stock", got, spots[0])
		}
		recordHistory(t, s.Client, "back-to-spot-1", "training-run-back-to-spot")
	})
	t.Run("AWS API on the simulated cloud", func(t *testing.T) {
		s := startAWSStack(t, map[string][]int{"us-west-2a": {0, 1, 1, 1}}, sim.Quotas{}, quickSpotChecks)
		goBackToSpot(t, s, "back-to-spot-aws", []string{"us-west-2a"}, func() { s.Sim.Advance(1) })
	})
}

// TestDeadlineRunWaitsForSpotEndToEnd: a deadline run with slack to spare
// finds no spot and waits for it, holding nothing, rather than pay for
// on-demand; when stock returns it trains on spot to the end.
func TestDeadlineRunWaitsForSpotEndToEnd(t *testing.T) {
	parallel(t) // a stack of its own; the default options
	spot := local.DefaultOfferings()[0]
	s := startStack(t, func(c *controlplane.Config) { c.Stock = map[string]int{spot.Key(): 0} })
	ctx := context.Background()
	js, run := submitDeadlineJob(t, s, "wait-for-spot-1", 4*time.Second, []string{spot.Zone}, 24*time.Hour)
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	waiting, err := jobs.WaitFor(wctx, s.Client, js.ID, func(st training.Status) bool {
		return st.State == workflows.StateWaiting && len(st.Failures) >= 2
	})
	if err != nil {
		t.Fatal(err)
	}
	if waiting.Instance != nil || len(waiting.Ledger.Segments) != 0 {
		t.Fatalf("while waiting for spot: holds %v, ledger %+v; want nothing held, nothing paid", waiting.Instance, waiting.Ledger.Segments)
	}
	for _, f := range waiting.Failures {
		if f.Offering != spot.Key() {
			t.Errorf("tried %s while waiting; want spot alone", f.Offering)
		}
	}
	s.Cloud.SetStock(spot.Key(), -1)
	var final training.Status
	if err := run.Get(wctx, &final); err != nil {
		t.Fatal(err)
	}
	segs := final.Ledger.Segments
	if final.State != workflows.StateCompleted || len(segs) != 1 || segs[0].Market != string(capacity.Spot) {
		t.Fatalf("final %s, ledger %+v; want completed on spot alone", final.State, segs)
	}
	// Each decision to wait was the worker's plans', recorded: a replay
	// reads the answers instead of solving the plans again.
	markers := 0
	for _, ev := range history(ctx, t, s.Client, js.ID) {
		if ev.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity" {
			markers++
		}
	}
	if st := s.Plans.Stats(); markers < 2 || st.Misses == 0 {
		t.Errorf("%d decisions recorded, plans %+v; want the waits decided by the worker's plans and recorded", markers, st)
	}
	recordHistory(t, s.Client, js.ID, "training-run-wait-for-spot")
}

// goBackToSpot runs a deadline job that starts on on-demand while no spot
// is in stock, waits until a try of spot has found none, returns the
// stock, and checks that the run changed over to spot and ended with the
// uninterrupted model, nothing left running.
func goBackToSpot(t *testing.T, s *controlplane.Stack, id string, zones []string, returnStock func()) training.Status {
	t.Helper()
	ctx := context.Background()
	js, run := submitDeadlineJob(t, s, id, 8*time.Second, zones, 15*time.Minute)
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	onDemand, err := jobs.WaitFor(wctx, s.Client, js.ID, func(st training.Status) bool {
		return st.Instance != nil && st.Instance.Market == string(capacity.OnDemand) && st.LastCheckpoint != nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Tries of spot meanwhile found none and left the run on on-demand.
	if _, err := jobs.WaitFor(wctx, s.Client, js.ID, func(st training.Status) bool {
		return hasFailure(capacity.NoCapacity)(st) && st.Attempt > onDemand.Attempt && st.Instance != nil && st.Instance.ID == onDemand.Instance.ID
	}); err != nil {
		t.Fatal(err)
	}
	returnStock()

	var final training.Status
	if err := run.Get(wctx, &final); err != nil {
		t.Fatal(err)
	}
	if final.State != workflows.StateCompleted || final.Changeovers != 1 || final.Preemptions != 0 {
		t.Fatalf("final %s, changeovers %d, preemptions %d; want completed after one changeover", final.State, final.Changeovers, final.Preemptions)
	}
	segs := final.Ledger.Segments
	if len(segs) != 2 || segs[0].Market != string(capacity.OnDemand) || segs[1].Market != string(capacity.Spot) {
		t.Fatalf("ledger %+v; want on-demand, then spot", segs)
	}
	if segs[1].Start.Before(segs[0].Start) || segs[1].Start.After(segs[0].End) {
		t.Errorf("spot paid from %s, on-demand held %s to %s: spot is paid from its launch, before on-demand is let go", segs[1].Start, segs[0].Start, segs[0].End)
	}
	if ref := trainer.Train(trainer.Config{Steps: final.TotalSteps, Seed: trainer.DefaultSeed}).Digest(); final.ModelDigest != ref {
		t.Errorf("model %s; an uninterrupted run makes %s", final.ModelDigest, ref)
	}
	if left, _ := s.Provider.List(ctx, nil); len(left) != 0 {
		t.Errorf("instances running after the run ended: %v", left)
	}
	// The stock logs saw the outage end when spot was found, and the
	// time spot was held, for the runs after this one to plan with.
	history, err := s.Memory.History(ctx, []string{segs[1].Offering})
	if err != nil {
		t.Fatal(err)
	}
	if h := history[0]; h.Out.Count != 1 || h.In.Time[0] <= 0 {
		t.Errorf("stock log of %s: %d outages seen to their end, %s in stock at risk; want 1, and the time held", segs[1].Offering, h.Out.Count, h.In.Time[0])
	}
	if m := scrape(t, s.MetricsURL()); !strings.Contains(m, `reason="changeover"`) {
		t.Error(`/metrics lacks refuel_releases_total{reason="changeover"}`)
	}
	return final
}

// submitDeadlineJob starts a deadline job of work on zones (nil: any),
// due within dueIn.
func submitDeadlineJob(t *testing.T, s *controlplane.Stack, id string, work time.Duration, zones []string, dueIn time.Duration) (spec.JobSpec, client.WorkflowRun) {
	t.Helper()
	js := quickJob(id, spec.TierDeadline)
	js.Work = spec.Duration(work)
	js.Resources.Zones = zones
	deadline := time.Now().Add(dueIn)
	js.Deadline = &deadline
	run, err := jobs.Submit(context.Background(), s.Client, js)
	if err != nil {
		t.Fatal(err)
	}
	return js, run
}

// TestDeadlineGangGoesBackToSpotEndToEnd: a deadline gang of two decides
// as one node does. With no spot in stock it takes on-demand; when a
// gang's worth of spot returns it launches both spot nodes while the
// on-demand gang trains, stops every rank at a checkpoint, releases the
// on-demand gang and trains on the spot one, ending with the model of two
// nodes never interrupted.
func TestDeadlineGangGoesBackToSpotEndToEnd(t *testing.T) {
	parallel(t)
	var spots []string
	for _, o := range local.DefaultOfferings() {
		if o.Market == capacity.Spot {
			spots = append(spots, o.Key())
		}
	}
	s := startStack(t, func(c *controlplane.Config) {
		c.Workflows = registry.New()
		c.Workflows.Run.SpotRetryInterval = time.Second
		c.Workflows.Run.MaxSpotRetryInterval = 2 * time.Second
		c.Workflows.Run.RestartOverhead = 2 * time.Second
		c.Workflows.Run.WaitForSpot = false // take on-demand at the first stock-out
		c.Stock = map[string]int{}
		for _, k := range spots {
			c.Stock[k] = 0
		}
	})
	ctx := context.Background()
	js := quickJob("gang-back-to-spot", spec.TierDeadline)
	js.Work, js.Resources.Nodes, js.Checkpoint.Interval = spec.Duration(8*time.Second), 2, "1s"
	deadline := time.Now().Add(15 * time.Minute)
	js.Deadline = &deadline
	run, err := jobs.Submit(ctx, s.Client, js)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if _, err := jobs.WaitFor(wctx, s.Client, js.ID, func(st training.Status) bool {
		return len(st.Nodes) == 2 && st.Instance.Market == string(capacity.OnDemand) && st.LastCheckpoint != nil && hasFailure(capacity.NoCapacity)(st)
	}); err != nil {
		t.Fatal(err)
	}
	s.Cloud.SetStock(spots[0], 2) // a gang's worth, in one zone

	var final training.Status
	if err := run.Get(wctx, &final); err != nil {
		t.Fatal(err)
	}
	if final.State != workflows.StateCompleted || final.Changeovers != 1 || final.Preemptions != 0 {
		t.Fatalf("final %s, changeovers %d, preemptions %d; want completed after one changeover\nmarket %+v\nfailures %+v", final.State, final.Changeovers, final.Preemptions, final.Market, final.Failures)
	}
	var markets []string
	for _, seg := range final.Ledger.Segments {
		markets = append(markets, seg.Market)
	}
	if want := []string{"on-demand", "on-demand", "spot", "spot"}; strings.Join(markets, ",") != strings.Join(want, ",") {
		t.Errorf("ledger markets %v; want the on-demand gang, then the spot gang", markets)
	}
	if ref := trainer.TrainGang(trainer.Config{Steps: final.TotalSteps, Seed: trainer.DefaultSeed}, 2).Digest(); final.ModelDigest != ref {
		t.Errorf("model %s; an uninterrupted gang of two makes %s", final.ModelDigest, ref)
	}
	if left, _ := s.Provider.List(ctx, nil); len(left) != 0 {
		t.Errorf("instances running after the run ended: %v", left)
	}
	recordHistory(t, s.Client, js.ID, "training-run-gang-back-to-spot")
}
