package environment

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/devenv"
	"refuel/pkg/spec"
	"refuel/workflows"
	"refuel/workflows/internal/fakecloud"
	"refuel/workflows/workload"
)

// devFake is the agent of an environment's attempts: each runs as its
// outcome says, reporting the environment's part of the result.
type devFake struct {
	*fakecloud.Cloud
	outcomes []activities.TrainingOutcome // past the end, the command served and ended by itself
	deleted  []activities.DeleteWorkspaceInput
}

func (f *devFake) RunTraining(ctx context.Context, in activities.TrainingInput) (activities.TrainingResult, error) {
	f.Mu.Lock()
	n := len(f.Trained)
	f.Trained = append(f.Trained, in)
	outcome := activities.OutcomeCompleted
	if n < len(f.outcomes) {
		outcome = f.outcomes[n]
	}
	f.Mu.Unlock()
	dev := &activities.DevResult{Endpoint: "127.0.0.1:8000", Served: true, RanSeconds: 120, Saved: true}
	save := &activities.CheckpointRef{Step: int64(n + 1)}
	switch outcome {
	case "block": // until StopTraining
		for ctx.Err() == nil && !f.Stopped(in.Attempt) {
			activity.RecordHeartbeat(ctx, activities.Progress{Step: int64(n)})
			time.Sleep(10 * time.Millisecond)
		}
		return activities.TrainingResult{Outcome: activities.OutcomeStopped, LastStep: save.Step, LastCheckpoint: save, Dev: dev}, nil
	case activities.OutcomeFailed:
		dev.Served, dev.RanSeconds = false, 1
		return activities.TrainingResult{Outcome: outcome, ExitCode: 127, Message: "the command exited with code 127 after 1s: jupyter: command not found", Dev: dev}, nil
	case activities.OutcomePreempted:
		dev.Saved, dev.SaveError, dev.UnsavedSeconds = false, "the notice ran out", 42
		return activities.TrainingResult{Outcome: outcome, LastStep: int64(n), Dev: dev}, nil
	}
	return activities.TrainingResult{Outcome: activities.OutcomeCompleted, LastStep: save.Step, LastCheckpoint: save,
		Message: "the command exited by itself with code 0 after 2m0s: resume starts it again", Dev: dev}, nil
}

func (f *devFake) DeleteWorkspace(_ context.Context, in activities.DeleteWorkspaceInput) (activities.DeleteWorkspaceResult, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.deleted = append(f.deleted, in)
	return activities.DeleteWorkspaceResult{}, nil
}

func newDevEnv(t *testing.T, f *devFake) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "ana"})
	env.RegisterWorkflowWithOptions((&Environments{Options: workload.DefaultRunOptions()}).DevEnvironment, workflow.RegisterOptions{Name: workflows.DevEnvironmentName})
	for name, fn := range map[string]any{
		activities.ListOfferingsName: f.ListOfferings, activities.AcquireName: f.Acquire, activities.ReleaseName: f.Release,
		activities.ReplaceName: f.Replace, activities.RunTrainingName: f.RunTraining, activities.StopTrainingName: f.StopTraining,
		activities.StockHistoryName: f.StockHistory, activities.DeleteWorkspaceName: f.DeleteWorkspace,
	} {
		env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
	env.OnSignalExternalWorkflow(mock.Anything, workflows.PoolWorkflowID, "", mock.Anything, mock.Anything).
		Return(serviceerror.NewNotFound("workflow not found"))
	return env
}

func devSpec(tier spec.Tier) spec.DevSpec {
	idle := spec.Duration(30 * time.Minute)
	return spec.DevSpec{ID: "ana", Team: "research", Priority: 70, Tier: tier, Command: []string{"jupyter", "lab"}, IdleTimeout: &idle}
}

func devStatus(t *testing.T, env *testsuite.TestWorkflowEnvironment) devenv.Status {
	t.Helper()
	v, err := env.QueryWorkflow(workflows.QueryStatus)
	if err != nil {
		t.Fatal(err)
	}
	var st devenv.Status
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// A command that served and ended by itself suspends the environment,
// which holds nothing until resumed; resumed, it acquires again; deleted,
// its workspace goes from the store and the workflow completes.
func TestEnvironmentSuspendsWhenItsCommandEndsAndResumes(t *testing.T) {
	t.Parallel()
	f := &devFake{Cloud: &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.OdA}}}
	env := newDevEnv(t, f)
	var suspended devenv.Status
	env.RegisterDelayedCallback(func() {
		suspended = devStatus(t, env)
		env.SignalWorkflow(workflows.SignalResume, nil)
	}, time.Hour)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.SignalDelete, devenv.DeleteRequest{}) }, 2*time.Hour)
	env.ExecuteWorkflow(workflows.DevEnvironmentName, devSpec(spec.TierCritical))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if suspended.State != devenv.StateSuspended || suspended.Instance != nil || !strings.Contains(suspended.Reason, "exited by itself") {
		t.Errorf("after its command ended: %s, instance %+v, %q; want suspended, holding nothing, saying why", suspended.State, suspended.Instance, suspended.Reason)
	}
	if suspended.Workspace.LastSave == nil || suspended.Workspace.LastSave.Step != 1 {
		t.Errorf("last save %+v; want the one the attempt reported", suspended.Workspace.LastSave)
	}
	if len(f.Trained) != 2 || f.Trained[0].Dev == nil || f.Trained[0].Dev.Host != "10.0.0.0" {
		t.Errorf("attempts %+v; want two, each a development environment's on its instance's address", f.Trained)
	}
	var final devenv.Status
	if err := env.GetWorkflowResult(&final); err != nil {
		t.Fatal(err)
	}
	if final.State != devenv.StateDeleted || len(f.deleted) != 1 || f.deleted[0].ID != "ana" {
		t.Errorf("ended %s, deleted %+v; want deleted with its workspace", final.State, f.deleted)
	}
	if got := f.ReleasedReasons(); len(got) != 2 || got[0] != activities.ReleaseCompleted {
		t.Errorf("released %v; want two instances, the first for its command's end", got)
	}
}

// A command that fails to start fails the environment, with its last
// lines, and gives its instance back; nothing retries it.
func TestEnvironmentWhoseCommandFailsToStartFails(t *testing.T) {
	t.Parallel()
	f := &devFake{Cloud: &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.OdA}}, outcomes: []activities.TrainingOutcome{activities.OutcomeFailed}}
	env := newDevEnv(t, f)
	env.ExecuteWorkflow(workflows.DevEnvironmentName, devSpec(spec.TierCritical))
	var app *temporal.ApplicationError
	if err := env.GetWorkflowError(); !errors.As(err, &app) || app.Type() != "CommandFailed" || !strings.Contains(err.Error(), "command not found") {
		t.Fatalf("error %v; want CommandFailed with the command's last lines", err)
	}
	if len(f.Trained) != 1 || len(f.Released) != 1 {
		t.Errorf("%d attempts, %d releases; want one of each", len(f.Trained), len(f.Released))
	}
}

// A flexible environment tries spot first, and on-demand after it; a
// preemption is a move, recovered as a run's, whose unsaved work is
// counted lost.
func TestFlexibleEnvironmentIsReplacedAfterAPreemption(t *testing.T) {
	t.Parallel()
	f := &devFake{Cloud: &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.OdA, fakecloud.SpotA}},
		outcomes: []activities.TrainingOutcome{activities.OutcomePreempted, "block"}}
	env := newDevEnv(t, f)
	var moved devenv.Status
	env.RegisterDelayedCallback(func() {
		moved = devStatus(t, env)
		env.SignalWorkflow(workflows.SignalDelete, devenv.DeleteRequest{KeepWorkspace: true})
	}, time.Second)
	env.ExecuteWorkflow(workflows.DevEnvironmentName, devSpec(spec.TierFlexible))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if f.Acquired[0].Offering != fakecloud.SpotA {
		t.Errorf("first instance on %s; want spot first", f.Acquired[0].Offering.Key())
	}
	if moved.Moves != 1 || moved.Preemptions != 1 || moved.LostWorkSeconds != 42 || moved.Instance == nil {
		t.Errorf("after the preemption: %d moves, %d preemptions, %.0fs lost, instance %+v; want one move, one preemption, 42s lost, a replacement",
			moved.Moves, moved.Preemptions, moved.LostWorkSeconds, moved.Instance)
	}
	if len(f.deleted) != 0 {
		t.Errorf("deleted %+v; want the workspace kept", f.deleted)
	}
}
