package tests

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"refuel/workflows/registry"
	"refuel/workflows/training"

	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"refuel/activities"
	"refuel/controlplane"
	"refuel/jobs"
	"refuel/pkg/spec"
	"refuel/pkg/trainer"
	"refuel/workflows"
)

// dropFirstDispatch is a client interceptor that loses, for each run, the
// first RunTraining a poll brings to a node agent: the server recorded it
// as started, and the agent gets an empty poll, as when matching gives
// up recording a start that history then records anyway (a busy server).
type dropFirstDispatch struct {
	mu      sync.Mutex
	dropped map[string]bool // by run
}

func (d *dropFirstDispatch) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	poll, ok := req.(*workflowservice.PollActivityTaskQueueRequest)
	r, isTask := reply.(*workflowservice.PollActivityTaskQueueResponse)
	if err != nil || !ok || !isTask || !strings.HasPrefix(poll.GetTaskQueue().GetName(), "refuel-node-") ||
		r.GetActivityType().GetName() != activities.RunTrainingName {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if run := r.GetWorkflowExecution().GetWorkflowId(); !d.dropped[run] {
		d.dropped[run] = true
		proto.Reset(r)
	}
	return err
}

// TestRunTrainingThatNeverReachesItsAgentIsSentAgain loses the first
// RunTraining of a run on its way to the agent, after the server recorded
// it as started: the agent never hears of it, and the heartbeat timeout
// (10 minutes here) would be the first the run learns. The run, hearing
// nothing from the agent, sends the attempt again on the same instance
// and trains on it: no failure, no restart, no second instance, the
// uninterrupted model.
func TestRunTrainingThatNeverReachesItsAgentIsSentAgain(t *testing.T) {
	parallel(t)
	drop := &dropFirstDispatch{dropped: map[string]bool{}}
	wf := registry.New()
	wf.Run.HeartbeatTimeout, wf.Run.ResendAfter = 10*time.Minute, time.Second
	s := virtualStack(t, func(c *controlplane.Config) {
		c.Workflows = wf
		c.ClientInterceptor = drop.intercept
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	js := quickJob("lost-dispatch", spec.TierFlexible)
	run, err := jobs.Submit(ctx, s.Client, js)
	if err != nil {
		t.Fatal(err)
	}
	var final training.Status
	if err := run.Get(ctx, &final); err != nil {
		t.Fatalf("the run did not complete within the test's 3 minutes (its heartbeat timeout is 10): %v", err)
	}
	want := trainer.Train(trainer.Config{Steps: final.TotalSteps, Seed: trainer.DefaultSeed}).Digest()
	if final.State != workflows.StateCompleted || final.ModelDigest != want {
		t.Errorf("final %s, model %s; want completed with %s", final.State, final.ModelDigest, want)
	}
	if final.Restarts.Total() != 0 || final.Preemptions != 0 || len(final.Failures) != 0 {
		t.Errorf("restarts %+v, %d preemptions, failures %+v; want the attempt sent again, nothing else", final.Restarts, final.Preemptions, final.Failures)
	}
	drop.mu.Lock()
	defer drop.mu.Unlock()
	if !drop.dropped[js.ID] {
		t.Error("no RunTraining was lost on its way: the test tested nothing")
	}
	recordHistory(t, s.Client, js.ID, "training-run-resent")
}

// TestInterruptWithoutGraceRecoversAtOnce serves a notice with no grace
// (starter interrupt --grace 0s) to an instance whose agent is a process:
// the instance is taken at once, its agent killed before it can say a
// word. Its cloud says so, and the run recovers from its last uploaded
// checkpoint at once, as a preemption, without waiting for the heartbeat
// timeout (10 minutes here).
func TestInterruptWithoutGraceRecoversAtOnce(t *testing.T) {
	parallel(t)
	wf := registry.New()
	wf.Run.HeartbeatTimeout = 10 * time.Minute
	s := startStack(t, func(c *controlplane.Config) { c.Workflows = wf })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	js := quickJob("no-grace", spec.TierFlexible)
	js.Work = spec.Duration(20 * time.Second) // still training when its instance goes, on a busy machine
	run, err := jobs.Submit(ctx, s.Client, js)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.WaitFor(ctx, s.Client, js.ID, func(st training.Status) bool {
		return st.State == workflows.StateRunning && st.LastCheckpoint != nil
	}); err != nil {
		t.Fatal(err)
	}
	rep, err := jobs.InterruptRun(ctx, s.Client, js.ID, jobs.InterruptOptions{Grace: 0, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatalf("interrupt --grace 0s: %v (the run's heartbeat timeout is 10 minutes)", err)
	}
	t.Logf("interrupt report: %+v", rep)
	if !rep.Passed || rep.ReplacementInstance == rep.InterruptedInstance || rep.ResumedFromStep < rep.CheckpointStep {
		t.Errorf("report %+v; want a recovery onto another instance from the checkpoint seen at the notice", rep)
	}
	var final training.Status
	if err := run.Get(ctx, &final); err != nil {
		t.Fatal(err)
	}
	want := trainer.Train(trainer.Config{Steps: final.TotalSteps, Seed: trainer.DefaultSeed}).Digest()
	if final.State != workflows.StateCompleted || final.ModelDigest != want {
		t.Errorf("final %s, model %s; want completed with %s", final.State, final.ModelDigest, want)
	}
	if final.Preemptions != 1 || final.Restarts.Total() != 0 || len(final.Failures) != 0 {
		t.Errorf("preemptions %d, restarts %+v, failures %+v; want one preemption and no fault", final.Preemptions, final.Restarts, final.Failures)
	}
	recordHistory(t, s.Client, js.ID, "training-run-taken-without-grace")
}
