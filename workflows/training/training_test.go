package training

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/spec"
	"refuel/workflows"
	"refuel/workflows/internal/fakecloud"
	"refuel/workflows/workload"
)

// option changes the options the workflows of a test run under.
type option func(*workload.RunOptions)

// newEnv is a test environment where no capacity pool runs: runs
// acquire on their own.
func newEnv(t *testing.T, f *fakecloud.Cloud, opts ...option) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := newEnvWithoutPool(t, f, opts...)
	env.OnSignalExternalWorkflow(mock.Anything, workflows.PoolWorkflowID, "", mock.Anything, mock.Anything).
		Return(serviceerror.NewNotFound("workflow not found"))
	return env
}

// newEnvWithoutPool leaves signals to the pool for the test to mock.
func newEnvWithoutPool(t *testing.T, f *fakecloud.Cloud, opts ...option) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: job("").ID}) // the contract: workflow ID = job id
	o := workload.DefaultRunOptions()
	for _, edit := range opts {
		edit(&o)
	}
	env.RegisterWorkflowWithOptions((&Runs{Options: o}).TrainingRun, workflow.RegisterOptions{Name: workflows.TrainingRunName})
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
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.OdA, fakecloud.SpotA}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.TrainingRunName, job(spec.TierDeadline))
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != workflows.StateCompleted || st.Step != 200 || st.ModelDigest != "abc" {
		t.Errorf("state %s step %d digest %q; want completed at 200 with digest", st.State, st.Step, st.ModelDigest)
	}
	if got := f.Acquired[0].Offering; got != fakecloud.SpotA {
		t.Errorf("first instance on %s; want spot first: %s", got.Key(), fakecloud.SpotA.Key())
	}
	if got := f.ReleasedReasons(); len(got) != 1 || got[0] != activities.ReleaseCompleted {
		t.Errorf("released %v; want exactly one release, completed", got)
	}
	if st.Instance != nil {
		t.Errorf("status still names instance %v after completion", st.Instance)
	}
}

func TestPauseReleasesAndResumeContinues(t *testing.T) {
	t.Parallel()
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA}, Trainings: []activities.TrainingOutcome{"block"}}
	env := newEnv(t, f)
	var whilePaused Status
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == activities.RunTrainingName && len(f.Trained) == 0 {
			env.SignalWorkflow(workflows.SignalPause, nil)
		}
	})
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(workflows.QueryStatus)
		if err != nil {
			t.Error(err)
			return
		}
		_ = v.Get(&whilePaused)
		env.SignalWorkflow(workflows.SignalResume, nil)
	}, time.Hour)
	env.ExecuteWorkflow(workflows.TrainingRunName, job(spec.TierFlexible))
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if !whilePaused.Paused || whilePaused.State != workflows.StatePaused || whilePaused.Instance != nil {
		t.Errorf("while paused: paused=%v state=%s instance=%v; want paused, no instance", whilePaused.Paused, whilePaused.State, whilePaused.Instance)
	}
	if got := f.ReleasedReasons(); len(got) != 2 || got[0] != activities.ReleasePaused {
		t.Errorf("released %v; want paused then completed", got)
	}
	if st.State != workflows.StateCompleted || st.Preemptions != 0 {
		t.Errorf("final state %s preemptions %d", st.State, st.Preemptions)
	}
}

func TestSetPriorityValidates(t *testing.T) {
	t.Parallel()
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA}}
	env := newEnv(t, f)
	var rejected, accepted error
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(workflows.UpdatePriority, "bad", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { rejected = err }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, 150)
		env.UpdateWorkflow(workflows.UpdatePriority, "good", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { accepted = err }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, 70)
	}, 0)
	env.ExecuteWorkflow(workflows.TrainingRunName, job(spec.TierFlexible))
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
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA}, Trainings: []activities.TrainingOutcome{"block"}}
	env := newEnv(t, f)
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == activities.RunTrainingName {
			env.CancelWorkflow()
		}
	})
	env.ExecuteWorkflow(workflows.TrainingRunName, job(spec.TierFlexible))
	_, err := result(t, env)
	var canceled *temporal.CanceledError
	if !errors.As(err, &canceled) {
		t.Fatalf("error %v; want canceled", err)
	}
	if got := f.ReleasedReasons(); len(got) != 1 {
		t.Errorf("released %v; want the one instance released once", got)
	}
	// The final status travels with the cancellation. (The test suite
	// ends a cancelled activity at once, without its result: that the
	// trainer's final checkpoint is waited for is checked end to end.)
	var st Status
	if err := canceled.Details(&st); err != nil {
		t.Fatal(err)
	}
	if st.State != workflows.StateCancelled || st.Instance != nil {
		t.Errorf("final status %s, instance %v; want cancelled, holding nothing", st.State, st.Instance)
	}
}

func TestInvalidSpecIsRejected(t *testing.T) {
	t.Parallel()
	env := newEnv(t, &fakecloud.Cloud{})
	js := job(spec.TierDeadline)
	js.Deadline = nil
	js.Priority = 101
	env.ExecuteWorkflow(workflows.TrainingRunName, js)
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
			f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA}}
			env := newEnv(t, f)
			env.ExecuteWorkflow(workflows.TrainingRunName, tc.input)
			_, err := result(t, env)
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.Type() != "InvalidJobSpec" || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %v; want InvalidJobSpec naming %s", err, tc.field)
			}
			if len(f.Requests) != 0 {
				t.Errorf("acquired %v for an invalid spec", f.Requests)
			}
		})
	}
}
