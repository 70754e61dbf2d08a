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
