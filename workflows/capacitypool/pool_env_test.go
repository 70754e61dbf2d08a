package capacitypool

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/capacity"
	"refuel/pkg/pool"
	"refuel/pkg/spec"
	"refuel/workflows"
)

// The pool's test world: its config, a recorder of what it told holders,
// and signals sent at set times.

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
	grants []admission.Allocation
	yields []workflows.YieldRequest
	// ended are the holders EndedWorkflows reports gone; gone those
	// signals cannot reach.
	ended, gone []string
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

func (p *poolRecorder) Add(e string) {
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
	env.RegisterWorkflowWithOptions(CapacityPool, workflow.RegisterOptions{Name: workflows.CapacityPoolName})
	env.RegisterActivityWithOptions(rec.EndedWorkflows, activity.RegisterOptions{Name: activities.EndedWorkflowsName})
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", workflows.SignalCapacityGranted, mock.Anything).Return(
		func(_, owner, _, _ string, arg any) error {
			if rec.isGone(owner) {
				return errors.New("workflow not found")
			}
			a := arg.(admission.Allocation)
			rec.Add("grant " + a.Request.ID + " " + string(a.Layer))
			rec.mu.Lock()
			rec.grants = append(rec.grants, a)
			rec.mu.Unlock()
			return nil
		})
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", workflows.SignalYield, mock.Anything).Return(
		func(_, owner, _, _ string, arg any) error {
			if rec.isGone(owner) {
				return errors.New("workflow not found")
			}
			y := arg.(workflows.YieldRequest)
			rec.Add("yield " + y.ID)
			rec.mu.Lock()
			rec.yields = append(rec.yields, y)
			rec.mu.Unlock()
			return nil
		})
	return env
}

func (p *poolRecorder) isGone(owner string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Contains(p.gone, owner)
}

// taken returns the grants and yields recorded so far and forgets them.
func (p *poolRecorder) taken() ([]admission.Allocation, []workflows.YieldRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	g, y := p.grants, p.yields
	p.grants, p.yields = nil, nil
	return g, y
}

// queryPool returns the pool's status.
func queryPool(t *testing.T, env *testsuite.TestWorkflowEnvironment) Status {
	t.Helper()
	var st Status
	v, err := env.QueryWorkflow(workflows.QueryStatus)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func training(id string, priority int, tier spec.Tier) admission.Request {
	return admission.Request{ID: id, Kind: admission.Training, Owner: id, Priority: priority, Tier: tier, Resources: spec.Resources{GPUs: 1}}
}

// signalAt sends a signal after d of workflow time.
func signalAt(env *testsuite.TestWorkflowEnvironment, d time.Duration, name string, arg any) {
	signalsAt(env, d, name, arg)
}

// signalsAt sends the signals in order from one callback. Callbacks due
// at the same instant fire in no set order (the suite's clock runs each
// in its own goroutine), so signals a test sends together go through here.
func signalsAt(env *testsuite.TestWorkflowEnvironment, d time.Duration, name string, args ...any) {
	env.RegisterDelayedCallback(func() {
		for _, a := range args {
			env.SignalWorkflow(name, a)
		}
	}, d)
}
