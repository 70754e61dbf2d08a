package workflows

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/capacity"
	"refuel/pkg/pool"
	"refuel/pkg/spec"
)

// poolConfig is one base machine of one GPU and a burst pool capped at
// one instance.
func poolConfig() pool.Config {
	c := pool.Config{
		Base: pool.BaseGroup{Name: "dc", Counts: []pool.BaseCount{{InstanceType: "gpu.1x", GPUs: 1, Count: 1, PricePerHour: 0.5}}},
		Burst: []pool.BurstPool{{Name: "cloud", MaxInstances: 1, Offerings: []capacity.Offering{
			{Provider: "sim", InstanceType: "gpu.1x", Zone: "a", Market: capacity.Spot, GPUs: 1, PricePerHour: 1},
			{Provider: "sim", InstanceType: "gpu.1x", Zone: "a", Market: capacity.OnDemand, GPUs: 1, PricePerHour: 3},
		}}},
	}
	c.Normalize()
	return c
}

// poolRecorder keeps what the pool told holders, in order.
type poolRecorder struct {
	mu     sync.Mutex
	events []string // "grant <id> <layer>" or "yield <id>"
	// ended are the holders EndedWorkflows reports gone.
	ended []string
}

func (p *poolRecorder) EndedWorkflows(_ context.Context, ids []string) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, id := range ids {
		if slices.Contains(p.ended, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

func (p *poolRecorder) add(e string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, e)
}

func (p *poolRecorder) list() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.events...)
}

func newPoolEnv(t *testing.T, rec *poolRecorder) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(CapacityPool, workflow.RegisterOptions{Name: CapacityPoolName})
	env.RegisterActivityWithOptions(rec.EndedWorkflows, activity.RegisterOptions{Name: activities.EndedWorkflowsName})
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", SignalCapacityGranted, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error {
			a := arg.(admission.Allocation)
			rec.add("grant " + a.Request.ID + " " + string(a.Layer))
			return nil
		})
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", SignalYield, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error {
			rec.add("yield " + arg.(YieldRequest).ID)
			return nil
		})
	return env
}

func training(id string, priority int, tier spec.Tier) admission.Request {
	return admission.Request{ID: id, Kind: admission.Training, Owner: id, Priority: priority, Tier: tier, Resources: spec.Resources{GPUs: 1}}
}

// signalAt sends a signal after d of workflow time.
func signalAt(env *testsuite.TestWorkflowEnvironment, d time.Duration, name string, arg any) {
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(name, arg) }, d)
}

func TestPoolAdmitsBaseFirstThenBurstAndPreemptsForPriority(t *testing.T) {
	t.Parallel()
	rec := &poolRecorder{}
	env := newPoolEnv(t, rec)
	signalAt(env, time.Second, SignalPoolRequest, training("low", 10, spec.TierFlexible))
	signalAt(env, 2*time.Second, SignalPoolRequest, training("mid", 30, spec.TierFlexible))
	// Base and burst are full: the critical run can use neither spot nor
	// a capped pool, so the lowest-priority run on base yields to it.
	signalAt(env, 3*time.Second, SignalPoolRequest, training("urgent", 90, spec.TierCritical))
	signalAt(env, 4*time.Second, SignalPoolYielded, PoolRef{ID: "low"})
	var st PoolStatus
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryStatus)
		if err != nil {
			t.Error(err)
			return
		}
		_ = v.Get(&st)
	}, 5*time.Second)
	env.RegisterDelayedCallback(env.CancelWorkflow, 6*time.Second)
	env.ExecuteWorkflow(CapacityPoolName, PoolInput{Config: poolConfig()})

	want := []string{"grant low base", "grant mid burst", "yield low", "grant urgent base"}
	if diff := cmp.Diff(rec.list(), want); diff != "" {
		t.Errorf("what the pool told holders, got(-), want(+):\n%s", diff)
	}
	if len(st.Waiting) != 1 || st.Waiting[0].ID != "low" || st.Preemptions != 1 || st.Base != 1 || st.Burst != 1 || st.FreeBaseGPUs != 0 {
		t.Errorf("status %+v: want low requeued, one preemption, base and burst full", st)
	}
}

func TestPoolPriorityReordersAndPauseHolds(t *testing.T) {
	t.Parallel()
	rec := &poolRecorder{}
	env := newPoolEnv(t, rec)
	signalAt(env, time.Second, SignalPoolRequest, training("running", 50, spec.TierCritical))
	signalAt(env, 2*time.Second, SignalPoolRequest, training("bursting", 60, spec.TierCritical))
	signalAt(env, 3*time.Second, SignalPoolRequest, training("first", 20, spec.TierCritical))
	signalAt(env, 4*time.Second, SignalPoolRequest, training("second", 20, spec.TierCritical))
	signalAt(env, 5*time.Second, SignalPoolRequest, training("paused", 45, spec.TierCritical))
	signalAt(env, 6*time.Second, SignalPoolPause, PoolRef{ID: "paused"})
	signalAt(env, 7*time.Second, SignalPoolPriority, PoolPriority{ID: "second", Priority: 40})
	signalAt(env, 8*time.Second, SignalPoolRelease, PoolRef{ID: "running"})
	env.RegisterDelayedCallback(env.CancelWorkflow, 9*time.Second)
	env.ExecuteWorkflow(CapacityPoolName, PoolInput{Config: poolConfig()})

	// Base and the one burst slot are taken; of the three waiting, the
	// paused one ranks highest but is held, and "second", raised above
	// "first", gets the machine "running" gives back.
	want := []string{"grant running base", "grant bursting burst", "grant second base"}
	if diff := cmp.Diff(rec.list(), want); diff != "" {
		t.Errorf("what the pool told holders, got(-), want(+):\n%s", diff)
	}
}

func TestPoolMovesBurstTrainingToFreedBase(t *testing.T) {
	t.Parallel()
	rec := &poolRecorder{}
	env := newPoolEnv(t, rec)
	signalAt(env, time.Second, SignalPoolRequest, training("on-base", 50, spec.TierFlexible))
	signalAt(env, 2*time.Second, SignalPoolRequest, training("on-burst", 50, spec.TierFlexible))
	signalAt(env, 3*time.Second, SignalPoolBind, PoolBind{ID: "on-burst", Offering: poolConfig().Burst[0].Offerings[0]})
	signalAt(env, 4*time.Second, SignalPoolRelease, PoolRef{ID: "on-base"})
	signalAt(env, 5*time.Second, SignalPoolYielded, PoolRef{ID: "on-burst"})
	env.RegisterDelayedCallback(env.CancelWorkflow, 6*time.Second)
	env.ExecuteWorkflow(CapacityPoolName, PoolInput{Config: poolConfig()})

	want := []string{"grant on-base base", "grant on-burst burst", "yield on-burst", "grant on-burst base"}
	if diff := cmp.Diff(rec.list(), want); diff != "" {
		t.Errorf("got(-), want(+):\n%s", diff)
	}
}

// A holder that ended without giving its capacity back (terminated, say)
// loses it at the pool's next check, and the queue moves on.
func TestPoolReleasesWhatEndedHoldersKept(t *testing.T) {
	t.Parallel()
	rec := &poolRecorder{ended: []string{"terminated"}}
	env := newPoolEnv(t, rec)
	signalAt(env, time.Second, SignalPoolRequest, training("terminated", 50, spec.TierCritical))
	signalAt(env, 2*time.Second, SignalPoolRequest, training("bursting", 50, spec.TierCritical))
	signalAt(env, 3*time.Second, SignalPoolRequest, training("waiting", 50, spec.TierCritical))
	env.RegisterDelayedCallback(env.CancelWorkflow, ownersCheckEvery+time.Minute/2)
	env.ExecuteWorkflow(CapacityPoolName, PoolInput{Config: poolConfig()})

	want := []string{"grant terminated base", "grant bursting burst", "grant waiting base"}
	if diff := cmp.Diff(rec.list(), want); diff != "" {
		t.Errorf("got(-), want(+):\n%s", diff)
	}
}
