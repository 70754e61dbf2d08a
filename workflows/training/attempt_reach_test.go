package training

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/spec"
	"refuel/workflows"
	"refuel/workflows/internal/fakecloud"
	"refuel/workflows/workload"
)

// The server can record a RunTraining as started that never reaches the
// agent: the agent says nothing, and the activity times out on heartbeats
// (an hour here). A run that hears nothing from the agent of an attempt
// within ResendAfter asks the cluster, which says the RunTraining was
// lost, and sends the attempt again on the same instance (the next check
// twice as late), at most maxResends times: the attempt trains without
// waiting for the heartbeat timeout, with no failure and no new instance.
// An agent heard from is not sent the attempt again, however long it
// trains, and neither is one the cluster says heartbeats (a long
// restore).
func TestUnheardAttemptIsSentAgain(t *testing.T) {
	t.Parallel()
	resend := workload.DefaultRunOptions().ResendAfter
	for name, tc := range map[string]struct {
		lost      int             // sends that never reach the agent
		heard     bool            // the agent reports its restore (a send that reached it, training long)
		slow      bool            // the agent reports nothing for long, but heartbeats
		wantSends []time.Duration // when each RunTraining was sent, from the first
		// replaced: after the sends, the last one's heartbeat timeout
		// finds the instance lost, and one more goes to its replacement.
		replaced bool
		want     workload.Restarts
	}{
		"one send lost: sent again at once": {lost: 1, wantSends: []time.Duration{0, resend}},
		"two sends lost: sent twice":        {lost: 2, wantSends: []time.Duration{0, resend, 3 * resend}},
		"every send lost: the last one's heartbeat timeout settles it": {lost: 3,
			wantSends: []time.Duration{0, resend, 3 * resend}, replaced: true, want: workload.Restarts{capacity.InstanceLost: 1}},
		"the agent is heard: sent once":                   {heard: true, wantSends: []time.Duration{0}},
		"the agent heartbeats, restoring long: sent once": {slow: true, wantSends: []time.Duration{0}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.SpotB}}
			env := newEnv(t, f, func(o *workload.RunOptions) { o.HeartbeatTimeout = time.Hour })
			var mu sync.Mutex
			var sends []time.Time
			// The cluster says a send is lost while the lost ones last.
			f.Reach = func() activities.Reach {
				mu.Lock()
				defer mu.Unlock()
				if len(sends) <= tc.lost {
					return activities.ReachLost
				}
				return activities.ReachHeard
			}
			env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
				if info.ActivityType.Name == activities.RunTrainingName {
					mu.Lock()
					sends = append(sends, env.Now())
					mu.Unlock()
				}
			})
			if tc.lost > 0 {
				env.OnActivity(activities.RunTrainingName, mock.Anything, mock.Anything).Return(
					activities.TrainingResult{}, temporal.NewTimeoutError(enums.TIMEOUT_TYPE_HEARTBEAT, nil)).After(time.Hour).Times(tc.lost)
			}
			if tc.heard {
				reportsRestored(env, f)
			}
			if tc.heard || tc.slow {
				env.OnActivity(activities.RunTrainingName, mock.Anything, mock.Anything).Return(f.RunTraining).After(10 * time.Minute).Once()
			}
			env.OnActivity(activities.RunTrainingName, mock.Anything, mock.Anything).Return(f.RunTraining)
			env.ExecuteWorkflow(workflows.TrainingRunName, job(spec.TierFlexible))
			st, err := result(t, env)
			if err != nil {
				t.Fatal(err)
			}
			if st.State != workflows.StateCompleted || !maps.Equal(st.Restarts, tc.want) {
				t.Fatalf("ended %s with restarts %+v, failures %+v; want completed with restarts %+v", st.State, st.Restarts, st.Failures, tc.want)
			}
			mu.Lock()
			defer mu.Unlock()
			var got []time.Duration
			for _, at := range sends {
				got = append(got, at.Sub(sends[0]).Round(time.Second))
			}
			want := len(tc.wantSends)
			if tc.replaced {
				want++
			}
			if len(got) != want {
				t.Fatalf("RunTraining sent at %v from the first; want %v (and one to a replacement: %v)", got, tc.wantSends, tc.replaced)
			}
			for i, at := range tc.wantSends {
				if got[i] != at {
					t.Errorf("RunTraining sent at %v from the first; want %v", got, tc.wantSends)
					break
				}
			}
			if last := tc.wantSends[len(tc.wantSends)-1]; tc.replaced && got[want-1] < last+time.Hour {
				t.Errorf("the replacement's RunTraining sent at %v; want after the last send's heartbeat timeout, %v", got[want-1], last+time.Hour)
			}
		})
	}
}

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
		want  workload.Restarts
		early bool // the loss is settled before the heartbeat timeout
	}{
		"its own instance: settled at once, a preemption": {want: workload.Restarts{}, early: true},
		"another instance: the heartbeat timeout settles": {other: true, want: workload.Restarts{capacity.InstanceLost: 1}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.SpotB}}
			env := newEnv(t, f)
			const silence = time.Hour
			env.OnActivity(activities.RunTrainingName, mock.Anything, mock.Anything).Return(
				func(context.Context, activities.TrainingInput) (activities.TrainingResult, error) {
					return activities.TrainingResult{}, temporal.NewTimeoutError(enums.TIMEOUT_TYPE_HEARTBEAT, nil)
				}).After(silence).Once()
			env.OnActivity(activities.RunTrainingName, mock.Anything, mock.Anything).Return(f.RunTraining)
			reportsRestored(env, f)
			env.RegisterDelayedCallback(func() {
				f.Mu.Lock()
				id := f.Acquired[0].ID
				f.Mu.Unlock()
				if tc.other {
					id = "i-another"
				}
				env.SignalWorkflow(workflows.SignalInstanceTaken, workflows.InstanceTaken{InstanceID: id})
			}, 10*time.Second)
			start := env.Now()
			env.ExecuteWorkflow(workflows.TrainingRunName, job(spec.TierFlexible))
			st, err := result(t, env)
			if err != nil {
				t.Fatal(err)
			}
			p := st.LastPreemption
			if st.State != workflows.StateCompleted || !maps.Equal(st.Restarts, tc.want) || st.Preemptions != 1 || p == nil || len(f.Acquired) != 2 {
				t.Fatalf("ended %s with restarts %+v, %d preemptions (%+v), %d acquired; want completed with restarts %+v after one preemption, 2 acquired",
					st.State, st.Restarts, st.Preemptions, p, len(f.Acquired), tc.want)
			}
			if early := p.Time.Sub(start) < silence; early != tc.early {
				t.Errorf("the loss was settled %s after the start; want before the heartbeat timeout %v", p.Time.Sub(start), tc.early)
			}
		})
	}
}

// reportsRestored has the agent of the run's first instance report its
// restored checkpoint a second into the run, as an agent that got its
// RunTraining does, before the test makes it go silent.
func reportsRestored(env *testsuite.TestWorkflowEnvironment, f *fakecloud.Cloud) {
	env.RegisterDelayedCallback(func() {
		f.Mu.Lock()
		id := f.Acquired[0].ID
		f.Mu.Unlock()
		env.SignalWorkflow(workflows.SignalProgress, activities.Progress{Kind: activities.ProgressRestored, Attempt: 1, InstanceID: id})
	}, time.Second)
}
