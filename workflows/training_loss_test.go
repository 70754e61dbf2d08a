package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

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
	if st.State != StateCompleted || st.Restarts != (Restarts{Agent: 1}) || len(st.Failures) != 1 || st.Failures[0].Class != causeAgent {
		t.Errorf("ended %s with restarts %+v, failures %+v; want completed after one agent restart", st.State, st.Restarts, st.Failures)
	}
	if len(f.acquired) != 2 || len(f.released) != 2 {
		t.Errorf("%d instances acquired, %d released; want the silent one given back and a second", len(f.acquired), len(f.released))
	}
}
