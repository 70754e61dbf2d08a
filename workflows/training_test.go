package workflows

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/policy"
	"refuel/pkg/spec"
)

var (
	spotA = capacity.Offering{Provider: "fake", InstanceType: "gpu.1x", Zone: "a", Market: capacity.Spot, GPUs: 1, PricePerHour: 1}
	spotB = capacity.Offering{Provider: "fake", InstanceType: "gpu.1x", Zone: "b", Market: capacity.Spot, GPUs: 1, PricePerHour: 1.2}
	odA   = capacity.Offering{Provider: "fake", InstanceType: "gpu.1x", Zone: "a", Market: capacity.OnDemand, GPUs: 1, PricePerHour: 3}
)

// fakeCloud stands in for the control plane's and node's activities. Its
// fields say what the next calls do, Karpenter-fake style.
type fakeCloud struct {
	mu        sync.Mutex
	offerings []capacity.Offering
	// noStock makes every offering of these markets fail with no capacity.
	noStock map[capacity.Market]bool
	// failAll makes every offering fail with this class.
	failAll capacity.Class
	// stockAfter lifts noStock after this many acquisitions were tried.
	stockAfter int
	// laterAcquireTakes is the wall time every acquisition but the first
	// takes.
	laterAcquireTakes time.Duration
	// poolLog is what PoolCheckpointLog answers for every pool.
	poolLog policy.CheckpointLog
	// stock is what StockHistory answers, by offering key.
	stock map[string]policy.Availability
	// trainings are the outcomes of successive RunTraining calls; past
	// the end, training completes. "block" waits for cancellation and
	// stops; "slow" completes after slowTraining of wall time.
	trainings []activities.TrainingOutcome

	requests []capacity.Request
	acquired []capacity.Instance
	released []activities.ReleaseInput
	trained  []activities.TrainingInput
}

func (f *fakeCloud) ListOfferings(context.Context, activities.OfferingsInput) ([]capacity.Offering, error) {
	return f.offerings, nil
}

func (f *fakeCloud) PoolCheckpointLog(context.Context, capacity.Offering) (policy.CheckpointLog, error) {
	return f.poolLog, nil
}

func (f *fakeCloud) StockHistory(_ context.Context, keys []string) ([]policy.Availability, error) {
	out := make([]policy.Availability, len(keys))
	for i, k := range keys {
		out[i] = f.stock[k]
	}
	return out, nil
}

// OpenMarket: the fake cloud's market keeps wall time.
func (f *fakeCloud) OpenMarket(context.Context, activities.MarketInput) (activities.MarketView, error) {
	return activities.MarketView{}, nil
}

func (f *fakeCloud) Acquire(_ context.Context, req capacity.Request) (capacity.Instance, error) {
	f.mu.Lock()
	if len(f.requests) > 0 && f.laterAcquireTakes > 0 {
		f.mu.Unlock()
		time.Sleep(f.laterAcquireTakes)
		f.mu.Lock()
	}
	defer f.mu.Unlock()
	f.requests = append(f.requests, req)
	if f.stockAfter > 0 && len(f.requests) > f.stockAfter {
		f.noStock = nil
	}
	var details []activities.FailureDetail
	for _, o := range req.Offerings {
		switch {
		case f.failAll != "":
			details = append(details, activities.FailureDetail{Class: f.failAll, Offering: o.Key(), Message: "fake"})
		case f.noStock[o.Market]:
			details = append(details, activities.FailureDetail{Class: capacity.NoCapacity, Offering: o.Key(), Message: "fake out of stock"})
		default:
			inst := capacity.Instance{ID: "i-" + string(rune('0'+len(f.acquired))), Offering: o, TaskQueue: "node"}
			f.acquired = append(f.acquired, inst)
			return inst, nil
		}
	}
	return capacity.Instance{}, temporal.NewApplicationErrorWithOptions("fake failure", string(details[0].Class),
		temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{details}})
}

func (f *fakeCloud) Release(_ context.Context, in activities.ReleaseInput) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, in)
	return nil
}

func (f *fakeCloud) RunTraining(ctx context.Context, in activities.TrainingInput) (activities.TrainingResult, error) {
	f.mu.Lock()
	n := len(f.trained)
	f.trained = append(f.trained, in)
	outcome := activities.OutcomeCompleted
	if n < len(f.trainings) {
		outcome = f.trainings[n]
	}
	f.mu.Unlock()
	restored := int64(50 * n)
	switch outcome {
	case "slow":
		time.Sleep(slowTraining)
		outcome = activities.OutcomeCompleted
	case "block":
		for ctx.Err() == nil {
			activity.RecordHeartbeat(ctx, activities.Progress{Step: restored})
			time.Sleep(10 * time.Millisecond)
		}
		return activities.TrainingResult{Outcome: activities.OutcomeStopped, RestoredStep: restored, LastStep: restored + 5,
			LastCheckpoint: &activities.CheckpointRef{Step: restored + 5}}, nil
	case activities.OutcomePreempted:
		return activities.TrainingResult{Outcome: outcome, RestoredStep: restored, LastStep: restored + 50, TotalSteps: 200,
			LastCheckpoint: &activities.CheckpointRef{Step: restored + 50}}, nil
	case activities.OutcomeFailed:
		return activities.TrainingResult{Outcome: outcome, RestoredStep: restored, ExitCode: 3, Message: "boom"}, nil
	}
	return activities.TrainingResult{Outcome: outcome, RestoredStep: restored, LastStep: 200, TotalSteps: 200,
		LastCheckpoint: &activities.CheckpointRef{Step: 200}, ModelDigest: "abc"}, nil
}

// slowTraining is how long a "slow" training takes, in wall time: the
// test suite fires a workflow's timers in wall time while an activity runs.
const slowTraining = 400 * time.Millisecond

func (f *fakeCloud) releasedReasons() []activities.ReleaseReason {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []activities.ReleaseReason
	for _, r := range f.released {
		out = append(out, r.Reason)
	}
	return out
}

// newEnv is a test environment where no capacity pool runs: runs
// acquire on their own.
func newEnv(t *testing.T, f *fakeCloud) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := newEnvWithoutPool(t, f)
	env.OnSignalExternalWorkflow(mock.Anything, PoolWorkflowID, "", mock.Anything, mock.Anything).
		Return(serviceerror.NewNotFound("workflow not found"))
	return env
}

// newEnvWithoutPool leaves signals to the pool for the test to mock.
func newEnvWithoutPool(t *testing.T, f *fakeCloud) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(TrainingRun, workflow.RegisterOptions{Name: TrainingRunName})
	for name, fn := range map[string]any{
		activities.ListOfferingsName: f.ListOfferings, activities.AcquireName: f.Acquire,
		activities.OpenMarketName: f.OpenMarket, activities.PoolCheckpointLogName: f.PoolCheckpointLog,
		activities.ReleaseName:     f.Release,
		activities.RunTrainingName: f.RunTraining, activities.StockHistoryName: f.StockHistory,
	} {
		env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
	return env
}

func job(tier spec.Tier) spec.JobSpec {
	js := spec.JobSpec{ID: "job-1", Team: "t", Priority: 50, Tier: tier, Work: spec.Duration(time.Hour)}
	if tier == spec.TierDeadline {
		d := time.Now().Add(100 * 24 * time.Hour)
		js.Deadline = &d
	}
	return js
}

func result(t *testing.T, env *testsuite.TestWorkflowEnvironment) (Status, error) {
	t.Helper()
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	var st Status
	err := env.GetWorkflowError()
	if err == nil {
		if err := env.GetWorkflowResult(&st); err != nil {
			t.Fatal(err)
		}
	}
	return st, err
}

func TestTrainingRunCompletesAndReleases(t *testing.T) {
	f := &fakeCloud{offerings: []capacity.Offering{odA, spotA}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(TrainingRunName, job(spec.TierDeadline))
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateCompleted || st.Step != 200 || st.ModelDigest != "abc" {
		t.Errorf("state %s step %d digest %q; want completed at 200 with digest", st.State, st.Step, st.ModelDigest)
	}
	if got := f.acquired[0].Offering; got != spotA {
		t.Errorf("first instance on %s; want spot first: %s", got.Key(), spotA.Key())
	}
	if got := f.releasedReasons(); len(got) != 1 || got[0] != activities.ReleaseCompleted {
		t.Errorf("released %v; want exactly one release, completed", got)
	}
	if st.Instance != nil {
		t.Errorf("status still names instance %v after completion", st.Instance)
	}
}

func TestTrainingRunRecoversFromPreemptionInAnotherZone(t *testing.T) {
	f := &fakeCloud{offerings: []capacity.Offering{spotA, spotB, odA}, trainings: []activities.TrainingOutcome{activities.OutcomePreempted}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(TrainingRunName, job(spec.TierFlexible))
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if st.Preemptions != 1 || st.Recoveries != 1 {
		t.Errorf("preemptions %d recoveries %d; want 1 and 1", st.Preemptions, st.Recoveries)
	}
	if len(f.requests) != 2 {
		t.Fatalf("%d acquisitions; want 2", len(f.requests))
	}
	if z := f.requests[1].Offerings[0].Zone; z != "b" {
		t.Errorf("replacement tried zone %s first; want b, away from the zone that preempted", z)
	}
	for _, o := range f.requests[0].Offerings {
		if o.Market == capacity.OnDemand {
			t.Errorf("flexible run asked for on-demand %s", o.Key())
		}
	}
	if f.requests[0].Attempt == f.requests[1].Attempt {
		t.Error("replacement reused the idempotency attempt of the lost instance")
	}
	if got := f.releasedReasons(); len(got) != 2 || got[0] != activities.ReleasePreempted {
		t.Errorf("released %v; want preempted then completed", got)
	}
	if f.trained[1].Attempt != 2 {
		t.Errorf("second training attempt %d; want 2", f.trained[1].Attempt)
	}
}

// A deadline run with no slack to wait for spot falls back to on-demand
// (TestDeadlineRunWaitsForSpotWhileSlackAllows has the rest).
func TestTrainingRunFallsBackToOnDemand(t *testing.T) {
	f := &fakeCloud{offerings: []capacity.Offering{spotA, odA}, noStock: map[capacity.Market]bool{capacity.Spot: true}}
	env := newEnv(t, f)
	js := job(spec.TierDeadline)
	d := time.Now().Add(time.Hour + 10*time.Minute)
	js.Deadline = &d
	env.ExecuteWorkflow(TrainingRunName, js)
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if f.acquired[0].Offering.Market != capacity.OnDemand {
		t.Errorf("acquired %s; want on-demand fallback", f.acquired[0].Offering.Key())
	}
	if st.State != StateCompleted {
		t.Errorf("state %s", st.State)
	}
}

func TestFlexibleRunWaitsForSpotAndRecordsFailures(t *testing.T) {
	f := &fakeCloud{offerings: []capacity.Offering{spotA, odA}, noStock: map[capacity.Market]bool{capacity.Spot: true}, stockAfter: 3}
	env := newEnv(t, f)
	env.ExecuteWorkflow(TrainingRunName, job(spec.TierFlexible))
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.requests) != 4 {
		t.Errorf("%d acquisition attempts; want 3 failed then 1 good", len(f.requests))
	}
	if f.acquired[0].Offering.Market != capacity.Spot {
		t.Errorf("flexible run acquired %s", f.acquired[0].Offering.Key())
	}
	if len(st.Failures) != 3 || st.Failures[0].Class != string(capacity.NoCapacity) {
		t.Errorf("failures %+v; want 3 no-capacity", st.Failures)
	}
}

func TestImpossibleOfferingsFailFast(t *testing.T) {
	for _, class := range []capacity.Class{capacity.Quota, capacity.SpecMismatch} {
		t.Run(string(class), func(t *testing.T) {
			f := &fakeCloud{offerings: []capacity.Offering{spotA, odA}, failAll: class}
			env := newEnv(t, f)
			env.ExecuteWorkflow(TrainingRunName, job(spec.TierDeadline))
			_, err := result(t, env)
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.Type() != string(class) {
				t.Fatalf("error %v; want application error of type %s", err, class)
			}
			if !strings.Contains(err.Error(), spotA.Key()) || !strings.Contains(err.Error(), odA.Key()) {
				t.Errorf("error %q does not list each offering's reason", err)
			}
			// A deadline run with slack tries spot alone first; when that
			// can never work, it tries on-demand at once, then gives up.
			if len(f.requests) != 2 || len(f.requests[0].Offerings) != 1 || len(f.requests[1].Offerings) != 2 {
				t.Errorf("%d attempts %v; want spot alone, then both", len(f.requests), f.requests)
			}
		})
	}
}

func TestPauseReleasesAndResumeContinues(t *testing.T) {
	f := &fakeCloud{offerings: []capacity.Offering{spotA}, trainings: []activities.TrainingOutcome{"block"}}
	env := newEnv(t, f)
	var whilePaused Status
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == activities.RunTrainingName && len(f.trained) == 0 {
			env.SignalWorkflow(SignalPause, nil)
		}
	})
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryStatus)
		if err != nil {
			t.Error(err)
			return
		}
		_ = v.Get(&whilePaused)
		env.SignalWorkflow(SignalResume, nil)
	}, time.Hour)
	env.ExecuteWorkflow(TrainingRunName, job(spec.TierFlexible))
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if !whilePaused.Paused || whilePaused.State != StatePaused || whilePaused.Instance != nil {
		t.Errorf("while paused: paused=%v state=%s instance=%v; want paused, no instance", whilePaused.Paused, whilePaused.State, whilePaused.Instance)
	}
	if got := f.releasedReasons(); len(got) != 2 || got[0] != activities.ReleasePaused {
		t.Errorf("released %v; want paused then completed", got)
	}
	if st.State != StateCompleted || st.Preemptions != 0 {
		t.Errorf("final state %s preemptions %d", st.State, st.Preemptions)
	}
}

func TestSetPriorityValidates(t *testing.T) {
	f := &fakeCloud{offerings: []capacity.Offering{spotA}}
	env := newEnv(t, f)
	var rejected, accepted error
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(UpdatePriority, "bad", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { rejected = err }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, 150)
		env.UpdateWorkflow(UpdatePriority, "good", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { accepted = err }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, 70)
	}, 0)
	env.ExecuteWorkflow(TrainingRunName, job(spec.TierFlexible))
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if rejected == nil || !strings.Contains(rejected.Error(), "0 (lowest) to 100") {
		t.Errorf("priority 150 not rejected with a fix: %v", rejected)
	}
	if accepted != nil || st.Priority != 70 {
		t.Errorf("priority 70: err %v, status priority %d", accepted, st.Priority)
	}
}

func TestCancelReleasesTheInstance(t *testing.T) {
	f := &fakeCloud{offerings: []capacity.Offering{spotA}, trainings: []activities.TrainingOutcome{"block"}}
	env := newEnv(t, f)
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == activities.RunTrainingName {
			env.CancelWorkflow()
		}
	})
	env.ExecuteWorkflow(TrainingRunName, job(spec.TierFlexible))
	_, err := result(t, env)
	var canceled *temporal.CanceledError
	if !errors.As(err, &canceled) {
		t.Fatalf("error %v; want canceled", err)
	}
	if got := f.releasedReasons(); len(got) != 1 {
		t.Errorf("released %v; want the one instance released once", got)
	}
}

func TestInvalidSpecIsRejected(t *testing.T) {
	env := newEnv(t, &fakeCloud{})
	js := job(spec.TierDeadline)
	js.Deadline = nil
	js.Priority = 101
	env.ExecuteWorkflow(TrainingRunName, js)
	_, err := result(t, env)
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != "InvalidJobSpec" {
		t.Fatalf("error %v; want InvalidJobSpec", err)
	}
	for _, field := range []string{"deadline", "priority"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error %q does not name %s", err, field)
		}
	}
}

// interval: auto checkpoints at the Young/Daly optimum of what runs
// measured on the pool so far, within the spec's bounds, and each
// released instance adds what it taught to the pool's log.
func TestAutoCheckpointIntervalLearnsFromThePool(t *testing.T) {
	measured := policy.CheckpointLog{Held: 9 * time.Hour, Preemptions: 2, Writes: 4, WriteTime: 2 * time.Minute}
	for name, tc := range map[string]struct {
		log      policy.CheckpointLog
		min, max time.Duration
		want     time.Duration
	}{
		"nothing measured: the lower bound": {policy.CheckpointLog{}, 0, 0, spec.DefaultMinCheckpointInterval},
		// write 30s, MTBP (9h + 1h prior) / 3 = 12000s: sqrt(2*30*12000).
		"measured pool":        {measured, 0, 0, time.Duration(math.Sqrt(2*30*12000) * float64(time.Second))},
		"clamped to the upper": {measured, time.Minute, 5 * time.Minute, 5 * time.Minute},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeCloud{offerings: []capacity.Offering{spotA, spotB}, poolLog: tc.log, trainings: []activities.TrainingOutcome{activities.OutcomePreempted}}
			env := newEnv(t, f)
			js := job(spec.TierFlexible)
			js.Checkpoint.MinInterval, js.Checkpoint.MaxInterval = spec.Duration(tc.min), spec.Duration(tc.max)
			env.ExecuteWorkflow(TrainingRunName, js)
			st, err := result(t, env)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.trained[0].CheckpointInterval; got.Round(time.Millisecond) != tc.want.Round(time.Millisecond) {
				t.Errorf("checkpoint interval %s; want %s", got, tc.want)
			}
			if st.CheckpointIntervalSecs != f.trained[1].CheckpointInterval.Seconds() {
				t.Errorf("status says %.1fs; the last attempt checkpointed every %s", st.CheckpointIntervalSecs, f.trained[1].CheckpointInterval)
			}
			first := f.released[0].Log
			// Time held is measured on the workflow's clock, which the test
			// suite does not move while an activity runs; the end-to-end
			// drill checks it.
			if first == nil || first.Preemptions != 1 {
				t.Errorf("the preempted instance's release taught %+v; want one preemption", first)
			}
			if last := f.released[len(f.released)-1].Log; last == nil || last.Preemptions != 0 {
				t.Errorf("the completed instance's release taught %+v; want no preemption", last)
			}
		})
	}
}

// A run that waits long for capacity continues as new, handing on its
// whole state, and the next run picks up where it stopped: nothing it
// recorded is lost, and its history starts afresh.
func TestLongWaitContinuesAsNew(t *testing.T) {
	saved := DefaultRunOptions
	DefaultRunOptions.MaxWaits = 3
	t.Cleanup(func() { DefaultRunOptions = saved })

	f := &fakeCloud{offerings: []capacity.Offering{spotA}, noStock: map[capacity.Market]bool{capacity.Spot: true}}
	env := newEnv(t, f)
	js := job(spec.TierFlexible)
	env.ExecuteWorkflow(TrainingRunName, js)
	_, err := result(t, env)
	var next *workflow.ContinueAsNewError
	if !errors.As(err, &next) {
		t.Fatalf("run ended with %v; want it to continue as new", err)
	}
	var nextSpec spec.JobSpec
	var carry *RunCarry
	if err := converter.GetDefaultDataConverter().FromPayloads(next.Input, &nextSpec, &carry); err != nil {
		t.Fatal(err)
	}
	if carry == nil || carry.Attempt != 3 || len(carry.Status.Failures) != 3 || nextSpec.ID != js.ID || len(carry.Offerings) != 1 {
		t.Fatalf("carried spec %s and %+v; want the spec, three attempts and their failures", nextSpec.ID, carry)
	}
	if len(f.released) != 0 {
		t.Errorf("released %v before continuing: nothing was held", f.released)
	}

	// The next run: stock has returned.
	f2 := &fakeCloud{offerings: []capacity.Offering{spotA}}
	env2 := newEnv(t, f2)
	env2.ExecuteWorkflow(TrainingRunName, nextSpec, carry)
	st, err := result(t, env2)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateCompleted || st.Attempt != 4 || len(st.Failures) != 3 || !st.StartedAt.Equal(carry.Status.StartedAt) {
		t.Errorf("next run ended %s at attempt %d with %d failures, started %s; want completed at attempt 4 keeping the 3 failures and the first start %s",
			st.State, st.Attempt, len(st.Failures), st.StartedAt, carry.Status.StartedAt)
	}
	if len(f2.requests) != 1 || f2.requests[0].Attempt != 4 {
		t.Errorf("next run acquired %v; want one request, attempt 4 (the idempotency token must not repeat)", f2.requests)
	}
}
