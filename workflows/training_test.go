package workflows

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/policy"
	"refuel/pkg/spec"
)

// spotA, spotB and odA are offerings in two zones of one region.
var (
	spotA = capacity.Offering{Provider: "fake", InstanceType: "gpu.1x", Zone: "us-east-1a", Market: capacity.Spot, GPUs: 1, PricePerHour: 1}
	spotB = capacity.Offering{Provider: "fake", InstanceType: "gpu.1x", Zone: "us-east-1b", Market: capacity.Spot, GPUs: 1, PricePerHour: 1.2}
	odA   = capacity.Offering{Provider: "fake", InstanceType: "gpu.1x", Zone: "us-east-1a", Market: capacity.OnDemand, GPUs: 1, PricePerHour: 3}
)

// fakeCloud stands in for the control plane's and node's activities. Its
// fields say what the next calls do, Karpenter-fake style.
type fakeCloud struct {
	mu        sync.Mutex
	offerings []capacity.Offering
	// noStock makes every offering of these markets fail with no
	// capacity, and outOfStock the offerings of these keys.
	noStock    map[capacity.Market]bool
	outOfStock map[string]bool
	// failAll makes every offering fail with this class.
	failAll capacity.Class
	// fail makes every offering of these markets fail with a class.
	fail map[capacity.Market]capacity.Class
	// stockAfter lifts noStock and outOfStock after this many
	// acquisitions were tried.
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
	// stops; "slow" completes after slowTraining of wall time; "silent"
	// times out on heartbeats; "agent-failed" is the agent's own error;
	// "bad-checkpoints" finds no checkpoint that verifies; "unheard"
	// times out on heartbeats while the cloud still runs the instance
	// (the cluster lost touch with a healthy agent).
	trainings []activities.TrainingOutcome
	// ranks, when set, are the outcomes of a gang's successive attempts
	// by rank, in place of trainings.
	ranks map[int][]activities.TrainingOutcome
	// outage makes the acquisitions numbered past outage[0] up to
	// outage[1] find no stock.
	outage [2]int
	// tags are set on every instance acquired.
	tags map[string]string

	// healthy are the instances the cloud still runs though their
	// agent went unheard; LostInstances reports every other it is asked
	// about as gone.
	healthy map[string]bool

	// reach answers TrainingReach; nil says every RunTraining reached
	// its agent.
	reach func() activities.Reach

	stops     map[int]bool // attempts StopTraining asked to stop
	byRank    map[int]int  // RunTraining calls by rank
	decisions []activities.DecisionInput
	plans     *activities.Capacity
	requests  []capacity.Request
	acquired  []capacity.Instance
	released  []activities.ReleaseInput
	trained   []activities.TrainingInput
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
		f.noStock, f.outOfStock = nil, nil
	}
	var details []activities.FailureDetail
	inOutage := len(f.requests) > f.outage[0] && len(f.requests) <= f.outage[1]
	for _, o := range req.Offerings {
		switch {
		case inOutage:
			details = append(details, activities.FailureDetail{Class: capacity.NoCapacity, Offering: o.Key(), Message: "fake outage"})
		case f.failAll != "":
			details = append(details, activities.FailureDetail{Class: f.failAll, Offering: o.Key(), Message: "fake"})
		case f.fail[o.Market] != "":
			details = append(details, activities.FailureDetail{Class: f.fail[o.Market], Offering: o.Key(), Message: "fake"})
		case f.noStock[o.Market] || f.outOfStock[o.Key()]:
			details = append(details, activities.FailureDetail{Class: capacity.NoCapacity, Offering: o.Key(), Message: "fake out of stock"})
		default:
			inst := capacity.Instance{ID: "i-" + string(rune('0'+len(f.acquired))), Offering: o, TaskQueue: "node", Tags: f.tags}
			f.acquired = append(f.acquired, inst)
			return inst, nil
		}
	}
	return capacity.Instance{}, temporal.NewApplicationErrorWithOptions("fake failure", string(details[0].Class),
		temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{details}})
}

// DecideMarket records the question and answers it as the worker does:
// the plans are pure, so the real activity, with plans of its own.
func (f *fakeCloud) DecideMarket(ctx context.Context, in activities.DecisionInput) (activities.Decision, error) {
	f.mu.Lock()
	f.decisions = append(f.decisions, in)
	if f.plans == nil {
		f.plans = &activities.Capacity{Plans: policy.NewPlans(1 << 30)}
	}
	plans := f.plans
	f.mu.Unlock()
	return plans.DecideMarket(ctx, in)
}

func (f *fakeCloud) StopTraining(_ context.Context, in activities.StopInput) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stops == nil {
		f.stops = map[int]bool{}
	}
	f.stops[in.Attempt] = true
	return nil
}

func (f *fakeCloud) stopped(attempt int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stops[attempt]
}

func (f *fakeCloud) Release(_ context.Context, in activities.ReleaseInput) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, in)
	return nil
}

// Replace releases, then acquires, as the worker's does.
func (f *fakeCloud) Replace(ctx context.Context, in activities.ReplaceInput) (capacity.Instance, error) {
	if err := f.Release(ctx, in.Release); err != nil {
		return capacity.Instance{}, err
	}
	return f.Acquire(ctx, in.Request)
}

func (f *fakeCloud) RunTraining(ctx context.Context, in activities.TrainingInput) (activities.TrainingResult, error) {
	f.mu.Lock()
	n := len(f.trained)
	f.trained = append(f.trained, in)
	outcome := activities.OutcomeCompleted
	if n < len(f.trainings) {
		outcome = f.trainings[n]
	}
	if f.ranks != nil {
		if f.byRank == nil {
			f.byRank = map[int]int{}
		}
		rank, i := in.Gang.Rank, f.byRank[in.Gang.Rank]
		f.byRank[rank]++
		outcome = activities.OutcomeCompleted
		if i < len(f.ranks[rank]) {
			outcome = f.ranks[rank][i]
		}
	}
	f.mu.Unlock()
	restored := int64(50 * n)
	switch outcome {
	case "slow":
		time.Sleep(slowTraining)
		outcome = activities.OutcomeCompleted
	case "block": // until StopTraining, or a cancel for runs recorded before push control
		for ctx.Err() == nil && !f.stopped(in.Attempt) {
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
	case "silent": // the instance stopped heartbeating
		return activities.TrainingResult{}, temporal.NewTimeoutError(enums.TIMEOUT_TYPE_HEARTBEAT, nil)
	case "unheard":
		f.mu.Lock()
		if f.healthy == nil {
			f.healthy = map[string]bool{}
		}
		f.healthy[in.InstanceID] = true
		f.mu.Unlock()
		return activities.TrainingResult{}, temporal.NewTimeoutError(enums.TIMEOUT_TYPE_HEARTBEAT, nil, activities.Progress{Step: restored + 10})
	case "agent-failed":
		return activities.TrainingResult{}, temporal.NewApplicationError("checkpoint store unreachable", "StoreUnreachable")
	case "bad-checkpoints":
		return activities.TrainingResult{}, temporal.NewNonRetryableApplicationError("no checkpoint of job-1 verifies", classCheckpoint, nil)
	}
	return activities.TrainingResult{Outcome: outcome, RestoredStep: restored, LastStep: 200, TotalSteps: 200,
		LastCheckpoint: &activities.CheckpointRef{Step: 200}, ModelDigest: "abc"}, nil
}

// TrainingReach: every RunTraining reached its agent, unless the test
// says otherwise.
func (f *fakeCloud) TrainingReach(context.Context, activities.ReachInput) (activities.Reach, error) {
	if f.reach == nil {
		return activities.ReachHeard, nil
	}
	return f.reach(), nil
}

// LostInstances reports the instances asked about as gone, but for the
// healthy ones.
func (f *fakeCloud) LostInstances(_ context.Context, insts []capacity.Instance) ([]activities.LostInstance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []activities.LostInstance
	for _, inst := range insts {
		if !f.healthy[inst.ID] {
			out = append(out, activities.LostInstance{ID: inst.ID, State: capacity.StateTerminated})
		}
	}
	return out, nil
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

// option changes the options the workflows of a test run under.
type option func(*Workflows)

// newEnv is a test environment where no capacity pool runs: runs
// acquire on their own.
func newEnv(t *testing.T, f *fakeCloud, opts ...option) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := newEnvWithoutPool(t, f, opts...)
	env.OnSignalExternalWorkflow(mock.Anything, PoolWorkflowID, "", mock.Anything, mock.Anything).
		Return(serviceerror.NewNotFound("workflow not found"))
	return env
}

// newEnvWithoutPool leaves signals to the pool for the test to mock.
func newEnvWithoutPool(t *testing.T, f *fakeCloud, opts ...option) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: job("").ID}) // the contract: workflow ID = job id
	w := New()
	for _, o := range opts {
		o(w)
	}
	env.RegisterWorkflowWithOptions(w.TrainingRun, workflow.RegisterOptions{Name: TrainingRunName})
	for name, fn := range map[string]any{
		activities.ListOfferingsName: f.ListOfferings, activities.AcquireName: f.Acquire,
		activities.OpenMarketName: f.OpenMarket, activities.PoolCheckpointLogName: f.PoolCheckpointLog,
		activities.ReleaseName: f.Release, activities.ReplaceName: f.Replace,
		activities.RunTrainingName: f.RunTraining, activities.StockHistoryName: f.StockHistory,
		activities.StopTrainingName: f.StopTraining, activities.DecideMarketName: f.DecideMarket,
		activities.LostInstancesName: f.LostInstances, activities.TrainingReachName: f.TrainingReach,
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
	t.Parallel()
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

func TestPauseReleasesAndResumeContinues(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	// The final status travels with the cancellation. (The test suite
	// ends a cancelled activity at once, without its result: that the
	// trainer's final checkpoint is waited for is checked end to end.)
	var st Status
	if err := canceled.Details(&st); err != nil {
		t.Fatal(err)
	}
	if st.State != StateCancelled || st.Instance != nil {
		t.Errorf("final status %s, instance %v; want cancelled, holding nothing", st.State, st.Instance)
	}
}

func TestInvalidSpecIsRejected(t *testing.T) {
	t.Parallel()
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

// Any client may start a run; its spec is decoded by the run itself, so
// a misspelt field, or an id other than the workflow ID, fails it before
// anything is acquired.
func TestRunDecodesItsInputStrictly(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		input map[string]any
		field string
	}{
		"a misspelt field":  {map[string]any{"id": "job-1", "work": "1h", "teem": "nlp"}, "teem"},
		"a mistyped field":  {map[string]any{"id": "job-1", "work": "1h", "priority": "high"}, "priority"},
		"another id":        {map[string]any{"id": "job-2", "work": "1h"}, "id"},
		"not a spec at all": {map[string]any{"id": "job-1", "work": "1h", "resources": "gpu"}, "resources"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := &fakeCloud{offerings: []capacity.Offering{spotA}}
			env := newEnv(t, f)
			env.ExecuteWorkflow(TrainingRunName, tc.input)
			_, err := result(t, env)
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.Type() != "InvalidJobSpec" || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %v; want InvalidJobSpec naming %s", err, tc.field)
			}
			if len(f.requests) != 0 {
				t.Errorf("acquired %v for an invalid spec", f.requests)
			}
		})
	}
}
