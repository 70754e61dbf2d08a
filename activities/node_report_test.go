package activities

import (
	"context"
	"net/url"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"

	"refuel/pkg/agent"
	"refuel/pkg/checkpoint"
	"refuel/pkg/spec"
	"refuel/pkg/trainer"
)

func TestWorthABeat(t *testing.T) {
	ck := func(step int64) *CheckpointRef { return &CheckpointRef{Step: step} }
	for name, tc := range map[string]struct {
		last, now Progress
		untold    bool
		want      bool
	}{
		"nothing new":               {Progress{Step: 40, TotalSteps: 1200}, Progress{Step: 40, TotalSteps: 1200}, false, false},
		"the first step":            {Progress{TotalSteps: 1200}, Progress{Step: 1, TotalSteps: 1200}, false, true},
		"a restored step":           {Progress{}, Progress{Step: 500}, false, true},
		"more steps":                {Progress{Step: 40, TotalSteps: 1200}, Progress{Step: 400, TotalSteps: 1200}, false, false},
		"a checkpoint told":         {Progress{Step: 40}, Progress{Step: 41, Checkpoint: ck(40)}, false, false},
		"a checkpoint held back":    {Progress{Step: 40}, Progress{Step: 41, Checkpoint: ck(40)}, true, true},
		"a newer one held back":     {Progress{Step: 440, Checkpoint: ck(200)}, Progress{Step: 501, Checkpoint: ck(500)}, true, true},
		"one held back and carried": {Progress{Step: 501, Checkpoint: ck(500)}, Progress{Step: 502, Checkpoint: ck(500)}, true, false},
	} {
		if got := worthABeat(tc.last, tc.now, tc.untold); got != tc.want {
			t.Errorf("%s: worthABeat %v; want %v", name, got, tc.want)
		}
	}
}

// beats is a Signaler that keeps every heartbeat's progress.
type beats struct {
	signals
	mu  sync.Mutex
	got []Progress
}

func (b *beats) RecordActivityHeartbeat(_ context.Context, _ []byte, details ...any) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got = append(b.got, details[0].(Progress))
	return nil
}

// Heartbeats due once an hour still tell status the trainer's first
// steps and each checkpoint, which the run's signals hold back: status
// reads them from the latest heartbeat.
func TestHeartbeatsTellStepsAndCheckpointsAsTheyCome(t *testing.T) {
	const steps = 400 // of 5ms: the trainer runs 2 s at least
	b := &beats{}
	n := &Node{
		InstanceID: "i-1", Dir: t.TempDir(), Signaler: b, Logger: zap.NewNop(),
		DemoStepTime: 5 * time.Millisecond, DemoTrainer: trainer.Embedded, ProgressSignal: "progress",
	}
	in := TrainingInput{
		Spec:    spec.JobSpec{ID: "job-1", Work: spec.Duration(steps * 5 * time.Millisecond), Checkpoint: spec.Checkpoint{Keep: 2}},
		Attempt: 1, InstanceID: "i-1", CheckpointInterval: 100 * time.Millisecond,
		CheckpointURL: (&url.URL{Scheme: "file", Path: filepath.ToSlash(t.TempDir())}).String(),
		Control:       ControlPush, HeartbeatEvery: time.Hour, SignalEvery: time.Hour,
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(n)
	if _, err := env.ExecuteActivity(n.RunTraining, in); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	told := slices.ContainsFunc(b.got[1:], func(p Progress) bool { return p.Step > 0 && p.Checkpoint != nil })
	if len(b.got) < 2 || !told {
		t.Errorf("heartbeats %+v; want more than the first, telling a step and a checkpoint", b.got)
	}
}

// An interruption notice tells the run the checkpoints the agent held
// back (told together to keep the run's history short): the run counts
// the work it loses from the latest.
func TestANoticeTellsTheCheckpointsHeldBack(t *testing.T) {
	ctx := context.Background()
	store, err := checkpoint.Open(ctx, (&url.URL{Scheme: "file", Path: filepath.ToSlash(t.TempDir())}).String(), "job-1")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s := &signals{}
	r := &reporter{
		node: &Node{Signaler: s, Logger: zap.NewNop()}, store: store, workflowID: "job-1", signalEvery: 30 * time.Second,
		progress: Progress{Attempt: 1, InstanceID: "i-1", TotalSteps: 1200}, soon: make(chan struct{}, 1),
	}
	t0 := time.Now()
	r.onEvent(agent.Event{Kind: agent.EventCheckpoint, Step: 200, Checkpoint: &checkpoint.Manifest{Step: 200}, Time: t0})
	r.onEvent(agent.Event{Kind: agent.EventCheckpoint, Step: 500, Checkpoint: &checkpoint.Manifest{Step: 500}, Time: t0.Add(10 * time.Second)})
	r.onEvent(agent.Event{Kind: agent.EventNotice, Notice: &agent.Notice{Action: "terminate"}, Time: t0.Add(16 * time.Second)})
	var got []Progress
	for deadline := time.Now().Add(time.Minute); len(got) < 3 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		s.mu.Lock()
		got = slices.Clone(s.got)
		s.mu.Unlock()
	}
	told := func(kind ProgressKind, ckpt int64) bool {
		return slices.ContainsFunc(got, func(p Progress) bool {
			return p.Kind == kind && p.Checkpoint != nil && p.Checkpoint.Step == ckpt
		})
	}
	if len(got) != 3 || !told(ProgressCheckpoint, 200) || !told(ProgressCheckpoint, 500) || !told(ProgressNotice, 500) {
		t.Errorf("signals %+v; want checkpoints 200 and 500, and the notice", got)
	}
}

// A stop can reach the agent before the RunTraining it stops (two tasks
// on the instance's queue): the attempt's trainer then starts stopped,
// and RunTraining returns at once instead of training the whole job. A
// stop kept longer than keepEarlyStop is forgotten.
func TestAStopThatComesFirstStopsItsAttempt(t *testing.T) {
	n := &Node{
		InstanceID: "i-1", Dir: t.TempDir(), Signaler: &signals{}, Logger: zap.NewNop(),
		DemoStepTime: 5 * time.Millisecond, DemoTrainer: trainer.Embedded, ProgressSignal: "progress",
	}
	in := TrainingInput{
		Spec:    spec.JobSpec{ID: "job-1", Work: spec.Duration(time.Hour), Checkpoint: spec.Checkpoint{Keep: 2}},
		Attempt: 2, InstanceID: "i-1", CheckpointInterval: 100 * time.Millisecond,
		CheckpointURL: (&url.URL{Scheme: "file", Path: filepath.ToSlash(t.TempDir())}).String(),
		Control:       ControlPush, HeartbeatEvery: 20 * time.Millisecond,
	}
	if err := n.StopTraining(context.Background(), StopInput{JobID: "job-1", Attempt: 2}); err != nil {
		t.Fatal(err)
	}
	done := make(chan TrainingResult, 1)
	go func() {
		var suite testsuite.WorkflowTestSuite
		env := suite.NewTestActivityEnvironment()
		env.RegisterActivity(n)
		var res TrainingResult
		v, err := env.ExecuteActivity(n.RunTraining, in)
		if err == nil {
			err = v.Get(&res)
		}
		if err != nil {
			t.Errorf("RunTraining: %v", err)
		}
		done <- res
	}()
	select {
	case res := <-done:
		if res.Outcome != OutcomeStopped {
			t.Errorf("outcome %s; want stopped", res.Outcome)
		}
	case <-time.After(30 * time.Second): // a hang guard: the job is an hour of steps
		t.Fatal("the attempt stopped before it started trained on")
	}

	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.earlyStops) != 0 {
		t.Errorf("early stops %v kept after their attempt started", n.earlyStops)
	}
	t0 := time.Now()
	n.stopAhead(attemptKey{"job-1", 3}, t0)
	n.stopAhead(attemptKey{"job-1", 4}, t0.Add(keepEarlyStop+time.Second))
	if _, kept := n.earlyStops[attemptKey{"job-1", 3}]; kept || len(n.earlyStops) != 1 {
		t.Errorf("early stops %v; want the one kept longer than %s forgotten", n.earlyStops, keepEarlyStop)
	}
}
