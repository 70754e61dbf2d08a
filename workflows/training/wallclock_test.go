package training

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.temporal.io/sdk/temporal"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/policy"
	"refuel/pkg/spec"
	"refuel/workflows"
	"refuel/workflows/internal/fakecloud"
	"refuel/workflows/workload"
)

// spotRetriesEvery makes deadline runs take on-demand at the first
// stock-out (not wait for spot), and ask about spot every d of wall time
// (see SlowTraining) once on it.
func spotRetriesEvery(d time.Duration) option {
	return func(o *workload.RunOptions) {
		o.SpotRetryInterval, o.MaxSpotRetryInterval = d, 4*d
		o.WaitForSpot = false
	}
}

// runDeadlineJob runs job(deadline) due in deadline on f to its end.
func runDeadlineJob(t *testing.T, f *fakecloud.Cloud, deadline time.Duration, opts ...option) (Status, time.Time) {
	t.Helper()
	env := newEnv(t, f, opts...)
	js := job(spec.TierDeadline)
	d := time.Now().Add(deadline)
	js.Deadline = &d
	env.ExecuteWorkflow(workflows.TrainingRunName, js)
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	return st, d
}

// A deadline run that finds no spot waits for it, spending nothing,
// while refuel says the slack allows; with no slack to spare it takes
// on-demand at once.
func TestDeadlineRunWaitsForSpotWhileSlackAllows(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		deadline     time.Duration
		stockAfter   int
		wantAsked    [][]capacity.Offering // nil: not checked
		minAsked     int
		wantAcquired capacity.Offering
	}{
		"days of slack: wait for spot": {
			deadline: 3 * 24 * time.Hour, stockAfter: 2,
			wantAsked:    [][]capacity.Offering{{fakecloud.SpotA}, {fakecloud.SpotA}, {fakecloud.SpotA}},
			wantAcquired: fakecloud.SpotA,
		},
		"no slack to spare: on-demand at once": {
			deadline: time.Hour + 10*time.Minute, stockAfter: 2,
			wantAsked:    [][]capacity.Offering{{fakecloud.SpotA, fakecloud.OdA}},
			wantAcquired: fakecloud.OdA,
		},
		"spot never returns: on-demand in time for the deadline": {
			deadline: 2 * time.Hour, stockAfter: 1 << 30, minAsked: 10,
			wantAcquired: fakecloud.OdA,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.OdA}, NoStock: map[capacity.Market]bool{capacity.Spot: true}, StockAfter: tc.stockAfter}
			st, d := runDeadlineJob(t, f, tc.deadline)
			var asked [][]capacity.Offering
			for _, r := range f.Requests {
				asked = append(asked, r.Offerings)
			}
			if len(asked) < tc.minAsked {
				t.Errorf("asked %d times; want spot tried at least %d times before on-demand", len(asked), tc.minAsked)
			}
			if tc.wantAsked != nil && !cmp.Equal(asked, tc.wantAsked) {
				t.Errorf("asked %v; want %v", asked, tc.wantAsked)
			}
			if last := asked[len(asked)-1]; len(asked) > 1 && !cmp.Equal(asked[:len(asked)-1], slices.Repeat([][]capacity.Offering{{fakecloud.SpotA}}, len(asked)-1)) {
				t.Errorf("asked %v; want spot alone while waiting, then %v", asked, last)
			}
			startBy := d.Add(-time.Hour - workload.DefaultRunOptions().RestartOverhead) // an hour of work, a start
			if segs := st.Ledger.Segments; tc.deadline > time.Hour+workload.DefaultRunOptions().RestartOverhead && len(segs) > 0 && segs[0].Start.After(startBy) {
				t.Errorf("acquired at %s: too late for an hour of work and a start before the deadline %s", segs[0].Start, d)
			}
			if len(f.Acquired) != 1 || f.Acquired[0].Offering != tc.wantAcquired {
				t.Errorf("acquired %v; want only %s", f.Acquired, tc.wantAcquired.Key())
			}
			if st.State != workflows.StateCompleted || len(st.Ledger.Segments) != 1 {
				t.Errorf("state %s with %d ledger segments; want completed on one instance", st.State, len(st.Ledger.Segments))
			}
			// The last choice is explained: on-demand, or spot waited for.
			wantWhy := "on-demand"
			if tc.wantAcquired == fakecloud.SpotA {
				wantWhy = "waiting for spot"
			}
			if m := st.Market; m == nil || m.Clock != workload.ClockWall || !strings.HasPrefix(m.Why, wantWhy) || m.DecidedAt.IsZero() {
				t.Errorf("market %+v; want the wall-clock decision explained, starting %q", m, wantWhy)
			}
		})
	}
}

// A deadline run that fell back to on-demand goes back to spot once it
// has stock, without losing its place: the on-demand trainer stops at a
// checkpoint, its instance is released as a changeover, and training
// resumes on spot, which is paid for from the moment it was launched.
func TestDeadlineRunGoesBackToSpot(t *testing.T) {
	t.Parallel()
	retry := spotRetriesEvery(50 * time.Millisecond)
	cases := map[string]struct {
		trainings    []activities.TrainingOutcome
		stockAfter   int // acquisitions tried before spot has stock; 0: never
		deadline     time.Duration
		wantAcquired []capacity.Offering
		wantReleased []activities.ReleaseReason
		changeovers  int
		minProbes    int // tries of spot that found no stock, at least
		maxRequests  int // 0: no bound
		acquireTakes time.Duration
	}{
		"spot returns: change over": {
			trainings: []activities.TrainingOutcome{"block"}, stockAfter: 1, deadline: 100 * 24 * time.Hour,
			wantAcquired: []capacity.Offering{fakecloud.OdA, fakecloud.SpotA},
			wantReleased: []activities.ReleaseReason{activities.ReleaseChangeover, activities.ReleaseCompleted},
			changeovers:  1,
		},
		"spot never returns: finish on on-demand, tries backing off": {
			trainings: []activities.TrainingOutcome{"slow"}, deadline: 100 * 24 * time.Hour,
			wantAcquired: []capacity.Offering{fakecloud.OdA},
			wantReleased: []activities.ReleaseReason{activities.ReleaseCompleted},
			minProbes:    1, maxRequests: 1 + 6, // backing off: 50+100+200 ms fit in 400 ms, not eight tries
		},
		"no slack for a changeover: never try": {
			trainings: []activities.TrainingOutcome{"slow"}, stockAfter: 1, deadline: time.Hour + 5*time.Minute,
			wantAcquired: []capacity.Offering{fakecloud.OdA},
			wantReleased: []activities.ReleaseReason{activities.ReleaseCompleted},
			maxRequests:  1,
		},
		"the on-demand attempt completes while spot launches: spot given back unused": {
			trainings: []activities.TrainingOutcome{"slow"}, stockAfter: 1, deadline: 100 * 24 * time.Hour, acquireTakes: 2 * fakecloud.SlowTraining,
			wantAcquired: []capacity.Offering{fakecloud.OdA, fakecloud.SpotA},
			wantReleased: []activities.ReleaseReason{activities.ReleaseCleanup, activities.ReleaseCompleted},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.OdA}, NoStock: map[capacity.Market]bool{capacity.Spot: true},
				StockAfter: tc.stockAfter, Trainings: tc.trainings, LaterAcquireTakes: tc.acquireTakes}
			if tc.stockAfter == 0 {
				f.StockAfter = 1 << 30
			}
			st, _ := runDeadlineJob(t, f, tc.deadline, retry)
			var acquired []capacity.Offering
			for _, in := range f.Acquired {
				acquired = append(acquired, in.Offering)
			}
			if !slices.Equal(acquired, tc.wantAcquired) {
				t.Errorf("acquired %v; want %v", acquired, tc.wantAcquired)
			}
			if got := f.ReleasedReasons(); !slices.Equal(got, tc.wantReleased) {
				t.Errorf("released %v; want %v", got, tc.wantReleased)
			}
			if len(f.Released) != len(f.Acquired) {
				t.Errorf("%d instances acquired, %d released", len(f.Acquired), len(f.Released))
			}
			if st.State != workflows.StateCompleted || st.Changeovers != tc.changeovers {
				t.Errorf("state %s, changeovers %d; want completed after %d", st.State, st.Changeovers, tc.changeovers)
			}
			probes := 0
			for _, fl := range st.Failures {
				if fl.Class == string(capacity.NoCapacity) && fl.Offering == fakecloud.SpotA.Key() {
					probes++
				}
			}
			if probes < tc.minProbes {
				t.Errorf("%d tries of spot found no stock; want at least %d", probes, tc.minProbes)
			}
			if tc.maxRequests > 0 && len(f.Requests) > tc.maxRequests {
				t.Errorf("%d acquisitions asked; want at most %d", len(f.Requests), tc.maxRequests)
			}
			// Every instance held is in the ledger, closed, the unused
			// spot one included.
			if n := len(st.Ledger.Segments); n != len(f.Acquired) {
				t.Errorf("ledger has %d segments; want one per instance (%d)", n, len(f.Acquired))
			}
			if tc.changeovers > 0 {
				second := f.Trained[1]
				if second.InstanceID != f.Acquired[1].ID || second.Attempt <= f.Trained[0].Attempt {
					t.Errorf("second attempt %d on %s; want a later attempt on the spot instance %s", second.Attempt, second.InstanceID, f.Acquired[1].ID)
				}
				if st.Ledger.Segments[1].Market != string(capacity.Spot) {
					t.Errorf("second segment on %s; want spot", st.Ledger.Segments[1].Market)
				}
			}
		})
	}
}

// What all runs saw of the stock steers the way back: with spot in zone a
// known to last minutes and in zone b hours, the run tries b first though
// a is a little cheaper (each zone is planned at its own price: for an
// hour's work, b's lasting stock is not worth 20% more).
func TestBackToSpotTriesTheZoneWhoseStockLasts(t *testing.T) {
	t.Parallel()
	retry := spotRetriesEvery(50 * time.Millisecond)
	var flaky, steady policy.Availability
	for range 30 {
		flaky.Seen(true, 10*time.Minute, true)
		steady.Seen(true, 8*time.Hour, false)
	}
	spotB := fakecloud.SpotB
	spotB.PricePerHour = 1.05
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA, spotB, fakecloud.OdA}, NoStock: map[capacity.Market]bool{capacity.Spot: true}, StockAfter: 1,
		Trainings: []activities.TrainingOutcome{"block"}, Stock: map[string]policy.Availability{fakecloud.SpotA.Key(): flaky, spotB.Key(): steady}}
	st, _ := runDeadlineJob(t, f, 100*24*time.Hour, retry)
	if len(f.Requests) < 2 || f.Requests[1].Offerings[0] != spotB {
		t.Fatalf("requests %v; want the way back to try %s first", f.Requests, spotB.Key())
	}
	if len(f.Acquired) != 2 || f.Acquired[1].Offering != spotB || st.Changeovers != 1 {
		t.Errorf("acquired %v, changeovers %d; want on-demand, then spot in b", f.Acquired, st.Changeovers)
	}
}

// A deadline run with no slack to wait for spot falls back to on-demand
// (TestDeadlineRunWaitsForSpotWhileSlackAllows has the rest).
func TestTrainingRunFallsBackToOnDemand(t *testing.T) {
	t.Parallel()
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.OdA}, NoStock: map[capacity.Market]bool{capacity.Spot: true}}
	env := newEnv(t, f)
	js := job(spec.TierDeadline)
	d := time.Now().Add(time.Hour + 10*time.Minute)
	js.Deadline = &d
	env.ExecuteWorkflow(workflows.TrainingRunName, js)
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if f.Acquired[0].Offering.Market != capacity.OnDemand {
		t.Errorf("acquired %s; want on-demand fallback", f.Acquired[0].Offering.Key())
	}
	if st.State != workflows.StateCompleted {
		t.Errorf("state %s", st.State)
	}
}

func TestFlexibleRunWaitsForSpotAndRecordsFailures(t *testing.T) {
	t.Parallel()
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.OdA}, NoStock: map[capacity.Market]bool{capacity.Spot: true}, StockAfter: 3}
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.TrainingRunName, job(spec.TierFlexible))
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Requests) != 4 {
		t.Errorf("%d acquisition attempts; want 3 failed then 1 good", len(f.Requests))
	}
	if f.Acquired[0].Offering.Market != capacity.Spot {
		t.Errorf("flexible run acquired %s", f.Acquired[0].Offering.Key())
	}
	if len(st.Failures) != 3 || st.Failures[0].Class != string(capacity.NoCapacity) {
		t.Errorf("failures %+v; want 3 no-capacity", st.Failures)
	}
}

func TestImpossibleOfferingsFailFast(t *testing.T) {
	t.Parallel()
	for _, class := range []capacity.Class{capacity.Quota, capacity.SpecMismatch} {
		t.Run(string(class), func(t *testing.T) {
			f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.OdA}, FailAll: class}
			env := newEnv(t, f)
			env.ExecuteWorkflow(workflows.TrainingRunName, job(spec.TierDeadline))
			_, err := result(t, env)
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.Type() != string(class) {
				t.Fatalf("error %v; want application error of type %s", err, class)
			}
			if !strings.Contains(err.Error(), fakecloud.SpotA.Key()) || !strings.Contains(err.Error(), fakecloud.OdA.Key()) {
				t.Errorf("error %q does not list each offering's reason", err)
			}
			// A deadline run with slack tries spot alone first; when that
			// can never work, it tries on-demand at once, then gives up.
			if len(f.Requests) != 2 || len(f.Requests[0].Offerings) != 1 || len(f.Requests[1].Offerings) != 2 {
				t.Errorf("%d attempts %v; want spot alone, then both", len(f.Requests), f.Requests)
			}
		})
	}
}

// Failures no provider classified are retried, but not for ever.
func TestUnclassifiedFailuresAreRetriedWithACap(t *testing.T) {
	t.Parallel()
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA}, FailAll: capacity.Unknown}
	env := newEnv(t, f, func(o *workload.RunOptions) { o.MaxUnknownWaits = 3 })
	env.ExecuteWorkflow(workflows.TrainingRunName, job(spec.TierFlexible))
	_, err := result(t, env)
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != string(capacity.Unknown) || !strings.Contains(err.Error(), "did not classify") {
		t.Fatalf("error %v; want an unknown failure saying so", err)
	}
	if len(f.Requests) != 4 {
		t.Errorf("%d tries; want the first and 3 more", len(f.Requests))
	}
}

// Across regions priced apart, the way back to spot weighs a cheaper
// zone in another region against moving the checkpoint there: a run on
// on-demand in us-east-1 tries spot in us-west-2 at half the price while
// the move is cheap, and spot beside it once the move's egress costs
// more than the cheaper spot saves. Each time it tries what refuel's
// plans pick for the market the run saw, every zone in its region at
// its own prices and the move priced from the run's options.
func TestBackToSpotWeighsTheMoveToAnotherRegion(t *testing.T) {
	t.Parallel()
	spotEast := capacity.Offering{Provider: "fake", InstanceType: "gpu.1x", Zone: "us-east-1a", Market: capacity.Spot, GPUs: 1, PricePerHour: 1}
	odEast := capacity.Offering{Provider: "fake", InstanceType: "gpu.1x", Zone: "us-east-1a", Market: capacity.OnDemand, GPUs: 1, PricePerHour: 3}
	spotWest := capacity.Offering{Provider: "fake", InstanceType: "gpu.1x", Zone: "us-west-2a", Market: capacity.Spot, GPUs: 1, PricePerHour: 0.5}
	odWest := capacity.Offering{Provider: "fake", InstanceType: "gpu.1x", Zone: "us-west-2a", Market: capacity.OnDemand, GPUs: 1, PricePerHour: 3.2}
	cases := map[string]struct {
		egressUSDPerGB float64
		want           capacity.Offering
	}{
		"a cheap move: the far region's cheaper spot": {0.001, spotWest},
		"a dear move: spot beside the checkpoint":     {0.2, spotEast},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// Spot is out of stock at first and the run takes on-demand,
			// cheapest in us-east-1; then every zone has stock.
			f := &fakecloud.Cloud{Offerings: []capacity.Offering{spotEast, odEast, spotWest, odWest}, NoStock: map[capacity.Market]bool{capacity.Spot: true}, StockAfter: 1,
				Trainings: []activities.TrainingOutcome{"block"}}
			st, _ := runDeadlineJob(t, f, 100*24*time.Hour, spotRetriesEvery(50*time.Millisecond), func(o *workload.RunOptions) {
				o.EgressUSDPerGB, o.CheckpointGB, o.TransferGbps = tc.egressUSDPerGB, 10, 1
			})
			if len(f.Acquired) != 2 || f.Acquired[0].Offering != odEast {
				t.Fatalf("acquired %v; want on-demand in us-east-1a, then spot", f.Acquired)
			}
			if got := f.Acquired[1].Offering; got != tc.want || st.Changeovers != 1 {
				t.Errorf("changed over to %s (%d changeovers); want %s", got.Key(), st.Changeovers, tc.want.Key())
			}
			// The run decided with the market as it stood: regions, the
			// on-demand price beside each spot zone, the move out of the
			// region it held on-demand in.
			var asked *activities.DecisionInput
			for i := range f.Decisions {
				if f.Decisions[i].Kind == activities.DecideBackToSpot {
					asked = &f.Decisions[i]
				}
			}
			if asked == nil {
				t.Fatal("the run never asked whether to go back to spot")
			}
			wantZones := []policy.Zone{ // cheapest first
				{Name: spotWest.Key(), SpotPrice: 0.5, OnDemandPrice: 3.2, Region: "us-west-2"},
				{Name: spotEast.Key(), SpotPrice: 1, OnDemandPrice: 3, Region: "us-east-1"},
			}
			if diff := cmp.Diff(asked.Market.Zones, wantZones, cmpopts.IgnoreFields(policy.Zone{}, "History")); diff != "" {
				t.Errorf("zones as the run saw them, got(-), want(+):\n%s", diff)
			}
			if want := (policy.Move{Region: "us-east-1", USD: 10 * tc.egressUSDPerGB, Time: 80 * time.Second}); asked.Market.Move != want {
				t.Errorf("move %+v; want %+v", asked.Market.Move, want)
			}
			if want := (policy.Choice{Market: capacity.OnDemand, Zone: spotEast.Key()}); asked.State.Current != want {
				t.Errorf("the run held %s as refuel saw it; want %s, the place of its on-demand instance", asked.State.Current, want)
			}
			if c, ok := new(policy.Decider).TrySpot(asked.State, asked.Market); !ok || c.Zone != f.Requests[1].Offerings[0].Key() {
				t.Errorf("tried %s first; refuel picks %s (%v)", f.Requests[1].Offerings[0].Key(), c, ok)
			}
		})
	}
}

// A deadline run preempted in us-east-1 waits for spot with its
// checkpoint there, and tries first where refuel would start: spot in
// us-west-2 at half the price while the move is cheap, the other zone of
// its own region once the move costs more than the cheaper spot saves.
// The zone that just preempted it stays last.
func TestWaitingRunTriesFirstWhereTheMovePays(t *testing.T) {
	t.Parallel()
	zone := func(z string, m capacity.Market, usd float64) capacity.Offering {
		return capacity.Offering{Provider: "fake", InstanceType: "gpu.1x", Zone: z, Market: m, GPUs: 1, PricePerHour: usd}
	}
	east1a, east1b, west := zone("us-east-1a", capacity.Spot, 1), zone("us-east-1b", capacity.Spot, 1), zone("us-west-2a", capacity.Spot, 0.5)
	offerings := []capacity.Offering{east1a, east1b, west, zone("us-east-1a", capacity.OnDemand, 3)}
	cases := map[string]struct {
		egressUSDPerGB float64
		want           capacity.Offering
	}{
		"a cheap move: the far region's cheaper spot": {0.001, west},
		"a dear move: spot beside the checkpoint":     {0.2, east1b},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// us-west-2 has no stock at first: the run starts in
			// us-east-1a, is preempted there, and then every zone has
			// stock.
			f := &fakecloud.Cloud{Offerings: offerings, OutOfStock: map[string]bool{west.Key(): true}, StockAfter: 1,
				Trainings: []activities.TrainingOutcome{activities.OutcomePreempted}}
			st, _ := runDeadlineJob(t, f, 100*24*time.Hour, func(o *workload.RunOptions) {
				o.EgressUSDPerGB, o.CheckpointGB, o.TransferGbps = tc.egressUSDPerGB, 10, 1
			})
			if len(f.Acquired) != 2 || f.Acquired[0].Offering != east1a || st.Preemptions != 1 {
				t.Fatalf("acquired %v with %d preemptions; want spot in us-east-1a, preempted, then spot again", f.Acquired, st.Preemptions)
			}
			again := f.Requests[len(f.Requests)-1].Offerings
			if again[0] != tc.want || again[len(again)-1] != east1a {
				t.Errorf("after the preemption tried %v; want %s first and %s, which preempted the run, last", again, tc.want.Key(), east1a.Key())
			}
			if f.Acquired[1].Offering != tc.want || st.State != workflows.StateCompleted {
				t.Errorf("resumed on %s, %s; want %s, completed", f.Acquired[1].Offering.Key(), st.State, tc.want.Key())
			}
		})
	}
}

// A deadline gang decides as one node does, for all its nodes: on
// on-demand it goes back to spot once a gang's worth is in stock,
// acquiring every rank on spot while the on-demand gang trains, then
// changing over whole at a checkpoint.
func TestDeadlineGangGoesBackToSpotWhole(t *testing.T) {
	t.Parallel()
	f := &fakecloud.Cloud{
		Offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.OdA}, NoStock: map[capacity.Market]bool{capacity.Spot: true},
		StockAfter: 2, // the on-demand gang's two; spot has stock from then on
		Ranks:      map[int][]activities.TrainingOutcome{0: {"block"}, 1: {"block"}},
	}
	env := newEnv(t, f, spotRetriesEvery(50*time.Millisecond))
	js := gangJob(2)
	js.Tier = spec.TierDeadline
	d := time.Now().Add(100 * 24 * time.Hour)
	js.Deadline = &d
	env.ExecuteWorkflow(workflows.TrainingRunName, js)
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	var acquired []capacity.Offering
	for _, in := range f.Acquired {
		acquired = append(acquired, in.Offering)
	}
	if want := []capacity.Offering{fakecloud.OdA, fakecloud.OdA, fakecloud.SpotA, fakecloud.SpotA}; !slices.Equal(acquired, want) {
		t.Errorf("acquired %v; want %v", acquired, want)
	}
	got := f.ReleasedReasons()
	slices.Sort(got)
	if want := []activities.ReleaseReason{activities.ReleaseChangeover, activities.ReleaseChangeover, activities.ReleaseCompleted, activities.ReleaseCompleted}; !slices.Equal(got, want) {
		t.Errorf("released %v; want %v", got, want)
	}
	if st.State != workflows.StateCompleted || st.Changeovers != 1 {
		t.Fatalf("state %s, changeovers %d; want completed after one changeover", st.State, st.Changeovers)
	}
	for _, in := range f.Trained[2:] {
		if in.Attempt == f.Trained[0].Attempt || (in.InstanceID != f.Acquired[2].ID && in.InstanceID != f.Acquired[3].ID) {
			t.Errorf("rank %d trained attempt %d on %s after the changeover; want a later attempt on the spot gang", in.Gang.Rank, in.Attempt, in.InstanceID)
		}
	}
}

// A deadline gang with slack to spare waits for a gang's worth of spot,
// spending nothing, as one node would.
func TestDeadlineGangWaitsForSpot(t *testing.T) {
	t.Parallel()
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.OdA}, NoStock: map[capacity.Market]bool{capacity.Spot: true}, StockAfter: 2}
	env := newEnv(t, f)
	js := gangJob(2)
	js.Tier = spec.TierDeadline
	d := time.Now().Add(3 * 24 * time.Hour)
	js.Deadline = &d
	env.ExecuteWorkflow(workflows.TrainingRunName, js)
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range f.Requests {
		if len(r.Offerings) != 1 || r.Offerings[0] != fakecloud.SpotA {
			t.Errorf("acquisition %d asked %v; want spot alone", i, r.Offerings)
		}
	}
	if len(f.Acquired) != 2 || f.Acquired[0].Offering != fakecloud.SpotA || f.Acquired[1].Offering != fakecloud.SpotA || st.State != workflows.StateCompleted {
		t.Errorf("acquired %v, state %s; want a spot gang of 2 that completed", f.Acquired, st.State)
	}
}
