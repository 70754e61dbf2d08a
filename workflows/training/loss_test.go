package training

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/spec"
	"refuel/workflows"
	"refuel/workflows/internal/fakecloud"
	"refuel/workflows/workload"
)

// An instance that goes silent between checkpoint signals: its agent's
// last heartbeat says the step it reached and the checkpoint it last
// uploaded, which the run was not told of yet. The run counts the loss
// from them: the work since that checkpoint is lost.
func TestSilentLossCountsFromTheLastHeartbeat(t *testing.T) {
	t.Parallel()
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.SpotB}}
	env := newEnv(t, f)
	var ckpt time.Time
	env.OnActivity(activities.RunTrainingName, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.TrainingInput) (activities.TrainingResult, error) {
			ckpt = env.Now().Add(-2 * time.Minute) // the mock answers at the end of its 5 minutes
			last := activities.Progress{Step: 40, Checkpoint: &activities.CheckpointRef{Step: 25, Time: ckpt}}
			return activities.TrainingResult{}, temporal.NewTimeoutError(enums.TIMEOUT_TYPE_HEARTBEAT, nil, last)
		}).After(5 * time.Minute).Once()
	env.OnActivity(activities.RunTrainingName, mock.Anything, mock.Anything).Return(f.RunTraining)
	env.ExecuteWorkflow(workflows.TrainingRunName, job(spec.TierFlexible))
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	p := st.LastPreemption
	if p == nil || p.WithNotice || p.AtStep != 40 || p.CheckpointStep != 25 {
		t.Fatalf("last preemption %+v; want one without notice at step 40, checkpoint 25", p)
	}
	if want := p.Time.Sub(ckpt).Seconds(); st.Restarts[capacity.InstanceLost] != 1 || want <= 0 || st.LostWorkSecs != want {
		t.Errorf("restarts %+v, lost work %.3fs; want one instance lost and the %.3fs since the checkpoint", st.Restarts, st.LostWorkSecs, want)
	}
}

// An agent that never picks the work up (its instance runs, but nothing
// polls the instance's task queue) is a restart of cause agent, once the
// training activity's schedule-to-start timeout passes; the run acquires
// another instance and completes.
func TestAgentThatNeverPollsIsARestart(t *testing.T) {
	t.Parallel()
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.SpotB}}
	env := newEnv(t, f)
	env.OnActivity(activities.RunTrainingName, mock.Anything, mock.Anything).Return(
		activities.TrainingResult{}, temporal.NewTimeoutError(enums.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)).Once()
	env.OnActivity(activities.RunTrainingName, mock.Anything, mock.Anything).Return(f.RunTraining)
	env.ExecuteWorkflow(workflows.TrainingRunName, job(spec.TierFlexible))
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != workflows.StateCompleted || !maps.Equal(st.Restarts, (workload.Restarts{capacity.AgentFault: 1})) || len(st.Failures) != 1 || st.Failures[0].Class != string(capacity.AgentFault) {
		t.Errorf("ended %s with restarts %+v, failures %+v; want completed after one agent restart", st.State, st.Restarts, st.Failures)
	}
	if len(f.Acquired) != 2 || len(f.Released) != 2 {
		t.Errorf("%d instances acquired, %d released; want the silent one given back and a second", len(f.Acquired), len(f.Released))
	}
}

// The cluster stops hearing an attempt's agent (its heartbeats time out)
// while the cloud still runs the instance: the cluster was away, not the
// instance. The run attaches to the same attempt on the same instance
// again, which trains on: no restart, no preemption, no new instance,
// and a failure of class control-plane that says so.
func TestUnheardAttemptOnAHealthyInstanceIsAttachedAgain(t *testing.T) {
	t.Parallel()
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.SpotB}, Trainings: []activities.TrainingOutcome{"unheard"}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.TrainingRunName, job(spec.TierFlexible))
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != workflows.StateCompleted || !maps.Equal(st.Restarts, (workload.Restarts{})) || st.Preemptions != 0 || st.LostWorkSecs != 0 {
		t.Errorf("ended %s with restarts %+v, %d preemptions, %.0fs lost; want completed with none", st.State, st.Restarts, st.Preemptions, st.LostWorkSecs)
	}
	if len(f.Acquired) != 1 || len(f.Trained) != 2 || f.Trained[1].Attempt != f.Trained[0].Attempt || f.Trained[1].InstanceID != f.Trained[0].InstanceID {
		t.Errorf("%d acquired, trainings %+v; want one instance and its attempt attached to again", len(f.Acquired), f.Trained)
	}
	if len(st.Failures) != 1 || st.Failures[0].Class != string(capacity.ControlPlane) {
		t.Errorf("failures %+v; want one of class %s", st.Failures, capacity.ControlPlane)
	}
	if f.Trained[0].ControlPlaneTolerance != workload.DefaultRunOptions().ControlPlaneTolerance {
		t.Errorf("the agent was told a tolerance of %v; want the run's %v", f.Trained[0].ControlPlaneTolerance, workload.DefaultRunOptions().ControlPlaneTolerance)
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
			f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.SpotB}}
			env := newEnv(t, f)
			env.OnActivity(activities.RunTrainingName, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.TrainingInput) (activities.TrainingResult, error) {
					if tc.healthy {
						f.Mu.Lock()
						f.Healthy = map[string]bool{in.InstanceID: true}
						f.Mu.Unlock()
					}
					return activities.TrainingResult{}, temporal.NewTimeoutError(enums.TIMEOUT_TYPE_HEARTBEAT, nil)
				}).After(time.Minute).Times(tc.unheard)
			env.OnActivity(activities.RunTrainingName, mock.Anything, mock.Anything).Return(f.RunTraining)
			env.ExecuteWorkflow(workflows.TrainingRunName, job(spec.TierFlexible))
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
			if st.State != workflows.StateCompleted || !maps.Equal(st.Restarts, (workload.Restarts{capacity.InstanceLost: 1})) || planes != tc.want || len(f.Acquired) != 2 {
				t.Errorf("ended %s with restarts %+v, %d control-plane failures, %d acquired; want completed after one instance lost, %d control-plane failures, 2 acquired",
					st.State, st.Restarts, planes, len(f.Acquired), tc.want)
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
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA}}
	env := newEnv(t, f)
	env.OnActivity(activities.RunTrainingName, mock.Anything, mock.Anything).Return(
		activities.TrainingResult{Outcome: activities.OutcomeCompleted, LastStep: 200, TotalSteps: 200,
			LastCheckpoint: &activities.CheckpointRef{Step: 200}, Outage: &activities.Outage{FailedHeartbeats: 30, LongestSeconds: 400, TrainerRestarts: 1}}, nil)
	js := job(spec.TierFlexible)
	none := 0
	js.MaxRestarts = &none
	env.ExecuteWorkflow(workflows.TrainingRunName, js)
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != workflows.StateCompleted || !maps.Equal(st.Restarts, (workload.Restarts{capacity.ControlPlane: 1})) || st.Restarts.Total() != 0 {
		t.Errorf("ended %s with restarts %+v; want completed with one control-plane restart, none counted against max_restarts", st.State, st.Restarts)
	}
}

// A run counts a fault against max_restarts exactly when the fault table
// says it does, and past the limit fails with the table's error type.
func TestRestartsCountWhatTheFaultTableSays(t *testing.T) {
	for _, f := range capacity.Faults {
		limit := 0
		r := runOf("j", "")
		r.spec = spec.JobSpec{MaxRestarts: &limit}
		err := r.Recover().CountRestart(f, "boom")
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

// Every fault is handled from the table alone: a fault added to
// capacity.Faults and its remedies is counted under its own key in
// status.restarts (or not at all), read back from a carried state, given
// back for the reason its cure names, and ends the run only where no
// instance cures it. Nothing else names the faults.
func TestEveryFaultIsHandledFromTheTable(t *testing.T) {
	reasons := map[capacity.Cure]activities.ReleaseReason{
		capacity.NewInstance: activities.ReleasePreempted, capacity.RestartTrainer: activities.ReleaseFailed,
		capacity.NoCure: activities.ReleaseFailed,
	}
	for _, f := range capacity.Faults {
		rm := f.Remedy()
		limit := 5
		r := runOf("j", "")
		r.spec = spec.JobSpec{MaxRestarts: &limit}
		if err := r.Recover().CountRestart(f, "boom"); err != nil {
			t.Errorf("%s: %v; want none within max_restarts", f, err)
		}
		b, err := json.Marshal(r.Restarts)
		if err != nil {
			t.Fatal(err)
		}
		var keys map[string]int
		if err := json.Unmarshal(b, &keys); err != nil {
			t.Fatal(err)
		}
		if rm.Key != "" && keys[rm.Key] != 1 || rm.Key == "" && len(r.Restarts) != 0 {
			t.Errorf("%s: status.restarts %s; want it counted under %q (none where the key is empty)", f, b, rm.Key)
		}
		var back workload.Restarts
		if err := json.Unmarshal(b, &back); err != nil || !maps.Equal(back, r.Restarts) {
			t.Errorf("%s: %s read back as %v (%v); want %v", f, b, back, err, r.Restarts)
		}
		want, ok := reasons[rm.Cure]
		if rm.Cure == capacity.OtherMachine {
			want, ok = activities.ReleaseReason(f), true
		}
		if got := (workload.Loss{Fault: f}).ReleaseReason(); ok && got != want {
			t.Errorf("%s (cure %d): released as %q; want %q", f, rm.Cure, got, want)
		}
		if ends := rm.Cure == capacity.NoCure; ends != (rm.Type != "" && !rm.Restarts) {
			t.Errorf("%s: cure %d with type %q: a fault that ends the run names the error type it ends it with, and only it", f, rm.Cure, rm.Type)
		}
	}
}
