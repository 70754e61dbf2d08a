package training

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/spec"
	"refuel/workflows"
	"refuel/workflows/internal/fakecloud"
	"refuel/workflows/workload"
)

// longTrainer is a node agent whose trainer runs across runs of the
// workflow: every RunTraining of its attempt attaches to it (completing
// later, asynchronously), and it counts what it was asked.
type longTrainer struct {
	mu       sync.Mutex
	attached []activities.TrainingInput
	token    []byte
	stops    int
}

func (l *longTrainer) RunTraining(ctx context.Context, in activities.TrainingInput) (activities.TrainingResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.attached = append(l.attached, in)
	l.token = activity.GetInfo(ctx).TaskToken
	return activities.TrainingResult{}, activity.ErrResultPending
}

func (l *longTrainer) StopTraining(context.Context, activities.StopInput) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stops++
	return nil
}

// A run continues as new while it trains, without stopping the trainer:
// 100,000 checkpoints go through one run of the workflow chain, each
// run's history stays bounded, and no checkpoint the agent reported is
// lost across the hand-overs.
func TestRunContinuesAsNewWhileItTrains(t *testing.T) {
	t.Parallel()
	const (
		checkpoints = 100_000
		perSignal   = 10 // the agent tells checkpoints together (SignalEvery)
		perEvent    = 4  // a signal adds itself and a workflow task's three events
	)
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA}}
	lt := &longTrainer{}
	maxHistory := workload.DefaultRunOptions().MaxHistory
	var carried *RunState
	var st Status
	var runs, sent, longest int
	for sent < checkpoints/perSignal {
		env := newEnv(t, f)
		env.RegisterActivityWithOptions(lt.RunTraining, activity.RegisterOptions{Name: activities.RunTrainingName})
		env.RegisterActivityWithOptions(lt.StopTraining, activity.RegisterOptions{Name: activities.StopTrainingName})
		runs++
		events := 20 // the run's start: its first activities and markers
		// Each report schedules the next, a second later in the test's
		// time, which the suite skips to while nothing else runs.
		var report func()
		report = func() {
			if sent == checkpoints/perSignal || env.IsWorkflowCompleted() {
				return
			}
			sent++
			events += perEvent
			longest = max(longest, events)
			env.SetCurrentHistoryLength(events)
			env.SignalWorkflow(workflows.SignalProgress, activities.Progress{Kind: activities.ProgressCheckpoint, Attempt: 1, Step: int64(sent * perSignal),
				Checkpoints: perSignal, Checkpoint: &activities.CheckpointRef{Step: int64(sent * perSignal), WriteSeconds: perSignal * 0.01}})
			if sent == checkpoints/perSignal {
				lt.mu.Lock()
				token := lt.token
				lt.mu.Unlock()
				_ = env.CompleteActivity(token, activities.TrainingResult{Outcome: activities.OutcomeCompleted, LastStep: int64(sent * perSignal),
					LastCheckpoint: &activities.CheckpointRef{Step: int64(sent * perSignal)}, ModelDigest: "abc"}, nil)
				return
			}
			env.RegisterDelayedCallback(report, time.Second)
		}
		env.RegisterDelayedCallback(report, time.Second)
		js := job(spec.TierFlexible)
		if carried == nil {
			env.ExecuteWorkflow(workflows.TrainingRunName, js)
		} else {
			env.ExecuteWorkflow(workflows.TrainingRunName, js, carried)
		}
		_, err := result(t, env)
		var next *workflow.ContinueAsNewError
		switch {
		case errors.As(err, &next):
			carried = nil
			var nextSpec spec.JobSpec
			if err := converter.GetDefaultDataConverter().FromPayloads(next.Input, &nextSpec, &carried); err != nil {
				t.Fatal(err)
			}
			if carried.Training == nil || carried.Lease == nil {
				t.Fatalf("run %d continued as new without its attempt: %+v", runs, carried)
			}
		case err != nil:
			t.Fatalf("run %d: %v", runs, err)
		default:
			st = queryStatus(t, env)
		}
		if runs > 100 {
			t.Fatal("more than 100 runs: the chain does not end")
		}
	}
	if st.State != workflows.StateCompleted || st.ModelDigest != "abc" {
		t.Fatalf("ended %s with digest %q; want completed", st.State, st.ModelDigest)
	}
	if longest > maxHistory+perEvent*2 || runs < 2 {
		t.Errorf("%d runs, the longest %d events; want several, each under %d", runs, longest, maxHistory)
	}
	if len(f.Acquired) != 1 || lt.stops != 0 || len(lt.attached) != runs {
		t.Errorf("%d instances, %d stops, %d attaches for %d runs; want one instance the trainer never left, attached by each run",
			len(f.Acquired), lt.stops, len(lt.attached), runs)
	}
	for _, in := range lt.attached {
		if in.Attempt != 1 || in.Control != activities.ControlPush {
			t.Errorf("attached %+v; want attempt 1 under push control", in)
		}
	}
	if rel := f.Released; len(rel) != 1 || rel[0].Log == nil || rel[0].Log.Writes != checkpoints {
		t.Errorf("%d runs, released %d, log %+v; want one release whose log counts every one of %d checkpoints", runs, len(rel), rel[0].Log, checkpoints)
	}
}
