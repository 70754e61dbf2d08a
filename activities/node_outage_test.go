package activities

import (
	"context"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"

	"refuel/pkg/spec"
	"refuel/pkg/trainer"
)

// cluster is a Signaler whose heartbeats the test makes fail: the control
// plane away (Unavailable) or no longer waiting on the activity
// (NotFound).
type cluster struct {
	signals
	mu        sync.Mutex
	heartbeat func(n int) error // answers the n-th heartbeat, from 1
	beats     int
}

func (c *cluster) RecordActivityHeartbeat(context.Context, []byte, ...any) error {
	c.mu.Lock()
	c.beats++
	n, answer := c.beats, c.heartbeat
	c.mu.Unlock()
	if answer == nil {
		return nil
	}
	return answer(n)
}

// An attempt's trainer trains on whatever happens to the cluster: an
// outage never stops it, a RunTraining the cluster stopped waiting on
// lets go of it for the next to attach, and a trainer no run attached to
// within the tolerance is stopped at a checkpoint and trains on from it
// when its run is back. Every case ends with the model an uninterrupted
// run makes.
func TestTrainerRidesOutTheControlPlane(t *testing.T) {
	const steps = 400
	want := trainer.Train(trainer.Config{Steps: steps, Seed: trainer.DefaultSeed}).Digest()
	unavailable := serviceerror.NewUnavailable("connection refused")
	for name, tc := range map[string]struct {
		heartbeat func(n int) error
		tolerance time.Duration
		// reattach is how long after the first RunTraining returns the
		// run attaches again; 0 never (it did not return).
		reattach         time.Duration
		wantFailed       bool
		wantRestarts     int
		wantFirstLetsGo  bool
		wantFinishedOnce bool
	}{
		"the cluster away for a while": {
			heartbeat:  func(n int) error { return map[bool]error{true: unavailable}[n >= 2 && n <= 4] },
			wantFailed: true,
		},
		"the run times the activity out and attaches again": {
			heartbeat:       func(n int) error { return map[bool]error{true: serviceerror.NewNotFound("activity not found")}[n == 2] },
			tolerance:       time.Minute,
			reattach:        50 * time.Millisecond,
			wantFirstLetsGo: true,
		},
		"the run comes back past the tolerance": {
			heartbeat:       func(n int) error { return map[bool]error{true: serviceerror.NewNotFound("activity not found")}[n == 2] },
			tolerance:       100 * time.Millisecond,
			reattach:        600 * time.Millisecond,
			wantFirstLetsGo: true,
			wantRestarts:    1,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := &cluster{heartbeat: tc.heartbeat}
			store := (&url.URL{Scheme: "file", Path: filepath.ToSlash(t.TempDir())}).String()
			n := &Node{
				InstanceID: "i-1", Dir: t.TempDir(), Signaler: c, Logger: zap.NewNop(),
				DemoStepTime: 2 * time.Millisecond, DemoTrainer: trainer.Embedded, ProgressSignal: "progress",
			}
			in := TrainingInput{
				Spec: spec.JobSpec{ID: "job-1", Work: spec.Duration(steps * 2 * time.Millisecond), Checkpoint: spec.Checkpoint{Keep: 2}}, Attempt: 1,
				InstanceID: "i-1", CheckpointURL: store, CheckpointInterval: 100 * time.Millisecond,
				Control: ControlPush, HeartbeatEvery: 20 * time.Millisecond, ControlPlaneTolerance: tc.tolerance,
			}
			run := func() (TrainingResult, error) {
				var suite testsuite.WorkflowTestSuite
				env := suite.NewTestActivityEnvironment()
				env.RegisterActivity(n)
				v, err := env.ExecuteActivity(n.RunTraining, in)
				var res TrainingResult
				if err == nil {
					err = v.Get(&res)
				}
				return res, err
			}
			res, err := run()
			if tc.wantFirstLetsGo {
				if err == nil || !strings.Contains(err.Error(), errLetGo.Error()) {
					t.Fatalf("first RunTraining: %+v, %v; want it to let go of the trainer", res, err)
				}
				c.mu.Lock()
				c.heartbeat = nil
				c.mu.Unlock()
				time.Sleep(tc.reattach)
				res, err = run()
			}
			if err != nil {
				t.Fatalf("RunTraining: %v", err)
			}
			if res.Outcome != OutcomeCompleted || res.ModelDigest != want {
				t.Errorf("result %+v; want completed with the uninterrupted model %s", res, want)
			}
			o := res.Outage
			if tc.wantFailed && (o == nil || o.FailedHeartbeats != 3) {
				t.Errorf("outage %+v; want the 3 failed heartbeats told", o)
			}
			if got := 0; o != nil {
				got = o.TrainerRestarts
				if got != tc.wantRestarts {
					t.Errorf("trainer restarts %d; want %d", got, tc.wantRestarts)
				}
			} else if tc.wantRestarts > 0 {
				t.Errorf("no outage told; want %d trainer restarts", tc.wantRestarts)
			}
		})
	}
}

// A RunTraining of an attempt may attach before another of the same
// attempt lets go: the run continued as new, or sent the attempt again
// because it did not hear the first. The trainer is held while any
// RunTraining is attached: only once the last lets go does the agent
// stop it at a checkpoint for want of a run.
func TestTrainerHeldByAnyRunTrainingIsNotStopped(t *testing.T) {
	t.Parallel()
	const steps = 100000 // trains for the whole test
	store := (&url.URL{Scheme: "file", Path: filepath.ToSlash(t.TempDir())}).String()
	n := &Node{
		InstanceID: "i-1", Dir: t.TempDir(), Signaler: &cluster{}, Logger: zap.NewNop(),
		DemoStepTime: time.Millisecond, DemoTrainer: trainer.Embedded, ProgressSignal: "progress",
	}
	const tolerance = 50 * time.Millisecond
	in := TrainingInput{
		Spec: spec.JobSpec{ID: "job-1", Work: spec.Duration(steps * time.Millisecond), Checkpoint: spec.Checkpoint{Keep: 2}}, Attempt: 1,
		InstanceID: "i-1", CheckpointURL: store, CheckpointInterval: time.Second, Control: ControlPush, ControlPlaneTolerance: tolerance,
	}
	ctx := context.Background()
	first, err := n.attach(ctx, in, "job-1")
	if err != nil {
		t.Fatal(err)
	}
	second, err := n.attach(ctx, in, "job-1")
	if err != nil || second != first {
		t.Fatalf("second RunTraining attached to %p (%v); want the first's trainer %p", second, err, first)
	}
	n.detach(first, in, true) // the first lets go after the second attached
	time.Sleep(4 * tolerance)
	select {
	case <-first.done:
		t.Fatalf("the trainer ended (%+v, %v) while a RunTraining held it", first.result, first.err)
	default:
	}
	n.detach(second, in, true) // the last lets go: no run holds it now
	select {
	case <-first.done:
	case <-time.After(time.Minute): // hang guard only
		t.Fatal("the trainer no RunTraining holds was not stopped after the tolerance")
	}
	if first.result.Outcome != OutcomeStopped {
		t.Errorf("the trainer ended %+v, %v; want stopped at a checkpoint for want of a run", first.result, first.err)
	}
}
