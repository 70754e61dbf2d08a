package workflows

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

// An instance that goes silent between checkpoint signals: its agent's
// last heartbeat says the step it reached and the checkpoint it last
// uploaded, which the run was not told of yet. The run counts the loss
// from them: the work since that checkpoint is lost.
func TestSilentLossCountsFromTheLastHeartbeat(t *testing.T) {
	t.Parallel()
	f := &fakeCloud{offerings: []capacity.Offering{spotA, spotB}}
	env := newEnv(t, f)
	var ckpt time.Time
	env.OnActivity(activities.RunTrainingName, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.TrainingInput) (activities.TrainingResult, error) {
			ckpt = env.Now().Add(-2 * time.Minute) // the mock answers at the end of its 5 minutes
			last := activities.Progress{Step: 40, Checkpoint: &activities.CheckpointRef{Step: 25, Time: ckpt}}
			return activities.TrainingResult{}, temporal.NewTimeoutError(enums.TIMEOUT_TYPE_HEARTBEAT, nil, last)
		}).After(5 * time.Minute).Once()
	env.OnActivity(activities.RunTrainingName, mock.Anything, mock.Anything).Return(f.RunTraining)
	reportsRestored(env, f)
	env.ExecuteWorkflow(TrainingRunName, job(spec.TierFlexible))
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	p := st.LastPreemption
	if p == nil || p.WithNotice || p.AtStep != 40 || p.CheckpointStep != 25 {
		t.Fatalf("last preemption %+v; want one without notice at step 40, checkpoint 25", p)
	}
	if want := p.Time.Sub(ckpt).Seconds(); st.Restarts.InstanceLost != 1 || want <= 0 || st.LostWorkSecs != want {
		t.Errorf("restarts %+v, lost work %.3fs; want one instance lost and the %.3fs since the checkpoint", st.Restarts, st.LostWorkSecs, want)
	}
}

// An agent that never picks the work up (its instance runs, but nothing
// polls the instance's task queue) is a restart of cause agent, once the
// training activity's schedule-to-start timeout passes; the run acquires
// another instance and completes.
func TestAgentThatNeverPollsIsARestart(t *testing.T) {
	t.Parallel()
	f := &fakeCloud{offerings: []capacity.Offering{spotA, spotB}}
	env := newEnv(t, f)
	env.OnActivity(activities.RunTrainingName, mock.Anything, mock.Anything).Return(
		activities.TrainingResult{}, temporal.NewTimeoutError(enums.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)).Once()
	env.OnActivity(activities.RunTrainingName, mock.Anything, mock.Anything).Return(f.RunTraining)
	env.ExecuteWorkflow(TrainingRunName, job(spec.TierFlexible))
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateCompleted || st.Restarts != (Restarts{Agent: 1}) || len(st.Failures) != 1 || st.Failures[0].Class != string(capacity.AgentFault) {
		t.Errorf("ended %s with restarts %+v, failures %+v; want completed after one agent restart", st.State, st.Restarts, st.Failures)
	}
	if len(f.acquired) != 2 || len(f.released) != 2 {
		t.Errorf("%d instances acquired, %d released; want the silent one given back and a second", len(f.acquired), len(f.released))
	}
}

// The cluster stops hearing an attempt's agent (its heartbeats time out)
// while the cloud still runs the instance: the cluster was away, not the
// instance. The run attaches to the same attempt on the same instance
// again, which trains on: no restart, no preemption, no new instance,
// and a failure of class control-plane that says so.
func TestUnheardAttemptOnAHealthyInstanceIsAttachedAgain(t *testing.T) {
	t.Parallel()
	f := &fakeCloud{offerings: []capacity.Offering{spotA, spotB}, trainings: []activities.TrainingOutcome{"unheard"}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(TrainingRunName, job(spec.TierFlexible))
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateCompleted || st.Restarts != (Restarts{}) || st.Preemptions != 0 || st.LostWorkSecs != 0 {
		t.Errorf("ended %s with restarts %+v, %d preemptions, %.0fs lost; want completed with none", st.State, st.Restarts, st.Preemptions, st.LostWorkSecs)
	}
	if len(f.acquired) != 1 || len(f.trained) != 2 || f.trained[1].Attempt != f.trained[0].Attempt || f.trained[1].InstanceID != f.trained[0].InstanceID {
		t.Errorf("%d acquired, trainings %+v; want one instance and its attempt attached to again", len(f.acquired), f.trained)
	}
	if len(st.Failures) != 1 || st.Failures[0].Class != string(capacity.ControlPlane) {
		t.Errorf("failures %+v; want one of class %s", st.Failures, capacity.ControlPlane)
	}
	if f.trained[0].ControlPlaneTolerance != DefaultRunOptions().ControlPlaneTolerance {
		t.Errorf("the agent was told a tolerance of %v; want the run's %v", f.trained[0].ControlPlaneTolerance, DefaultRunOptions().ControlPlaneTolerance)
	}
}

// An agent unheard for longer than the run's control-plane tolerance,
// though its cloud runs the instance, is taken for lost: the run
// restarts on another instance (cause instance-lost, as any silent
// instance). An instance its cloud says is gone is lost at the first
// heartbeat timeout, as fast as before.
func TestUnheardPastTheToleranceIsLost(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		healthy bool
		unheard int // heartbeat timeouts, a minute each
		want    int // control-plane failures before the loss
	}{
		"the cloud runs it: lost after the tolerance": {healthy: true, unheard: 5, want: 4},
		"the cloud says it is gone: lost at once":     {healthy: false, unheard: 1, want: 0},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := &fakeCloud{offerings: []capacity.Offering{spotA, spotB}}
			env := newEnv(t, f)
			env.OnActivity(activities.RunTrainingName, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.TrainingInput) (activities.TrainingResult, error) {
					if tc.healthy {
						f.mu.Lock()
						f.healthy = map[string]bool{in.InstanceID: true}
						f.mu.Unlock()
					}
					return activities.TrainingResult{}, temporal.NewTimeoutError(enums.TIMEOUT_TYPE_HEARTBEAT, nil)
				}).After(time.Minute).Times(tc.unheard)
			env.OnActivity(activities.RunTrainingName, mock.Anything, mock.Anything).Return(f.RunTraining)
			reportsRestored(env, f)
			env.ExecuteWorkflow(TrainingRunName, job(spec.TierFlexible))
			st, err := result(t, env)
			if err != nil {
				t.Fatal(err)
			}
			planes := 0
			for _, fl := range st.Failures {
				if fl.Class == string(capacity.ControlPlane) {
					planes++
				}
			}
			if st.State != StateCompleted || st.Restarts != (Restarts{InstanceLost: 1}) || planes != tc.want || len(f.acquired) != 2 {
				t.Errorf("ended %s with restarts %+v, %d control-plane failures, %d acquired; want completed after one instance lost, %d control-plane failures, 2 acquired",
					st.State, st.Restarts, planes, len(f.acquired), tc.want)
			}
		})
	}
}

// A trainer its agent stopped because no run attached within the
// tolerance, and trained again from its checkpoint when one did, is a
// restart of cause control-plane: told in status, capped by nothing (the
// run allows no restart at all here and still completes).
func TestTrainerRestartedForWantOfARunIsAControlPlaneRestart(t *testing.T) {
	t.Parallel()
	f := &fakeCloud{offerings: []capacity.Offering{spotA}}
	env := newEnv(t, f)
	env.OnActivity(activities.RunTrainingName, mock.Anything, mock.Anything).Return(
		activities.TrainingResult{Outcome: activities.OutcomeCompleted, LastStep: 200, TotalSteps: 200,
			LastCheckpoint: &activities.CheckpointRef{Step: 200}, Outage: &activities.Outage{FailedHeartbeats: 30, LongestSeconds: 400, TrainerRestarts: 1}}, nil)
	js := job(spec.TierFlexible)
	none := 0
	js.MaxRestarts = &none
	env.ExecuteWorkflow(TrainingRunName, js)
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateCompleted || st.Restarts != (Restarts{ControlPlane: 1}) || st.Restarts.Total() != 0 {
		t.Errorf("ended %s with restarts %+v; want completed with one control-plane restart, none counted against max_restarts", st.State, st.Restarts)
	}
}

// A run counts a fault against max_restarts exactly when the fault table
// says it does, and past the limit fails with the table's error type.
func TestRestartsCountWhatTheFaultTableSays(t *testing.T) {
	for _, f := range capacity.Faults {
		limit := 0
		r := &run{spec: spec.JobSpec{MaxRestarts: &limit}}
		err := r.countRestart(f, "boom")
		counted := r.Restarts.Total() == 1
		if want := f.Remedy().Restarts; counted != want {
			t.Errorf("%s: counted %v; the table says %v", f, counted, want)
		}
		var app *temporal.ApplicationError
		if f.Remedy().Restarts && (!errors.As(err, &app) || app.Type() != f.Remedy().Type) {
			t.Errorf("%s past max_restarts 0: %v; want an error of type %s", f, err, f.Remedy().Type)
		}
		if !f.Remedy().Restarts && err != nil {
			t.Errorf("%s: %v; want no error, it counts against nothing", f, err)
		}
	}
}

// reportsRestored has the agent of the run's first instance report its
// restored checkpoint a second into the run, as an agent that got its
// RunTraining does, before the test makes it go silent.
func reportsRestored(env *testsuite.TestWorkflowEnvironment, f *fakeCloud) {
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		id := f.acquired[0].ID
		f.mu.Unlock()
		env.SignalWorkflow(SignalProgress, activities.Progress{Kind: activities.ProgressRestored, Attempt: 1, InstanceID: id})
	}, time.Second)
}
