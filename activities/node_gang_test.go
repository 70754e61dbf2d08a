package activities

import (
	"context"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"

	"refuel/pkg/spec"
	"refuel/pkg/trainer"
)

// signals records the progress a node agent signals, and takes its
// heartbeats.
type signals struct {
	mu  sync.Mutex
	got []Progress
}

func (s *signals) RecordActivityHeartbeat(context.Context, []byte, ...any) error { return nil }

func (s *signals) SignalWorkflow(_ context.Context, _, _, _ string, arg any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, arg.(Progress))
	return nil
}

// RunTraining of a gang's two ranks, each on a node agent of its own with
// the demo trainer in-process: the gang trains TrainGang's model, rank 0's
// result names it and rank 1's does not, and only rank 0 signals
// checkpoints.
func TestRunTrainingOfAGang(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // rank 0's trainer listens there
	store := (&url.URL{Scheme: "file", Path: filepath.ToSlash(t.TempDir())}).String()
	job := spec.JobSpec{ID: "gang-1", Work: spec.Duration(300 * time.Millisecond), Checkpoint: spec.Checkpoint{Keep: 2}}
	results := make([]TrainingResult, 2)
	sent := make([]*signals, 2)
	var wg sync.WaitGroup
	for rank := range 2 {
		sent[rank] = &signals{}
		n := &Node{
			InstanceID: "i-" + string(rune('a'+rank)), Dir: t.TempDir(), Signaler: sent[rank], Logger: zap.NewNop(),
			DemoStepTime: time.Millisecond, DemoTrainer: trainer.Embedded, ProgressSignal: "progress",
		}
		in := TrainingInput{
			Spec: job, Attempt: 1, InstanceID: n.InstanceID, CheckpointURL: store, CheckpointInterval: 100 * time.Millisecond,
			Gang: Gang{Rank: rank, Nodes: 2, MasterAddr: "127.0.0.1", MasterPort: port},
		}
		wg.Go(func() {
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestActivityEnvironment()
			env.RegisterActivity(n)
			v, err := env.ExecuteActivity(n.RunTraining, in)
			if err == nil {
				err = v.Get(&results[rank])
			}
			if err != nil {
				t.Errorf("rank %d: %v", rank, err)
			}
		})
	}
	wg.Wait()
	want := trainer.TrainGang(trainer.Config{Steps: 300, Seed: trainer.DefaultSeed}, 2).Digest()
	if r := results[0]; r.Outcome != OutcomeCompleted || r.ModelDigest != want || r.LastCheckpoint == nil || r.LastCheckpoint.Step != 300 {
		t.Errorf("rank 0: %+v; want completed at step 300 with TrainGang's model %s", r, want)
	}
	if r := results[1]; r.Outcome != OutcomeCompleted || r.ModelDigest != "" || r.LastStep != 300 {
		t.Errorf("rank 1: %+v; want completed at step 300, naming no model", r)
	}
	for rank, s := range sent {
		checkpoints := 0
		for _, p := range s.got {
			if p.Kind == ProgressCheckpoint {
				checkpoints++
			}
		}
		if (rank == 0) != (checkpoints > 0) {
			t.Errorf("rank %d signalled %d checkpoints; only rank 0's are the job's", rank, checkpoints)
		}
	}
}
