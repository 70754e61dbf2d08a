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

// An instance taken at the end of a notice that left no time to
// checkpoint: its agent says nothing more, and its RunTraining would
// time out on heartbeats an hour later. Told by its control plane that
// the cloud took the instance, the run settles the attempt at once as the
// market's preemption: no restart, one trip to a replacement. A signal
// about an instance the run does not train on changes nothing: the run
// learns of its silent one at the heartbeat timeout, as before.
func TestTakenInstanceEndsTheAttemptAtOnce(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		other bool // the signal names another instance
		want  Restarts
		early bool // the loss is settled before the heartbeat timeout
	}{
		"its own instance: settled at once, a preemption": {want: Restarts{}, early: true},
		"another instance: the heartbeat timeout settles": {other: true, want: Restarts{InstanceLost: 1}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := &fakeCloud{offerings: []capacity.Offering{spotA, spotB}}
			env := newEnv(t, f)
			const silence = time.Hour
			env.OnActivity(activities.RunTrainingName, mock.Anything, mock.Anything).Return(
				func(context.Context, activities.TrainingInput) (activities.TrainingResult, error) {
					return activities.TrainingResult{}, temporal.NewTimeoutError(enums.TIMEOUT_TYPE_HEARTBEAT, nil)
				}).After(silence).Once()
			env.OnActivity(activities.RunTrainingName, mock.Anything, mock.Anything).Return(f.RunTraining)
			reportsRestored(env, f)
			env.RegisterDelayedCallback(func() {
				f.mu.Lock()
				id := f.acquired[0].ID
				f.mu.Unlock()
				if tc.other {
					id = "i-another"
				}
				env.SignalWorkflow(SignalInstanceTaken, InstanceTaken{InstanceID: id})
			}, 10*time.Second)
			start := env.Now()
			env.ExecuteWorkflow(TrainingRunName, job(spec.TierFlexible))
			st, err := result(t, env)
			if err != nil {
				t.Fatal(err)
			}
			p := st.LastPreemption
			if st.State != StateCompleted || st.Restarts != tc.want || st.Preemptions != 1 || p == nil || len(f.acquired) != 2 {
				t.Fatalf("ended %s with restarts %+v, %d preemptions (%+v), %d acquired; want completed with restarts %+v after one preemption, 2 acquired",
					st.State, st.Restarts, st.Preemptions, p, len(f.acquired), tc.want)
			}
			if early := p.Time.Sub(start) < silence; early != tc.early {
				t.Errorf("the loss was settled %s after the start; want before the heartbeat timeout %v", p.Time.Sub(start), tc.early)
			}
		})
	}
}
