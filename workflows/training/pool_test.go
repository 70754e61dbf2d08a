package training

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/capacity"
	"refuel/pkg/spec"
	"refuel/workflows"
	"refuel/workflows/internal/fakecloud"
	"refuel/workflows/workload"
)

// A run with a capacity pool waits for its grant, acquires what it was
// granted, yields at a checkpoint when the pool asks, is requeued, and
// gives its capacity back when it completes.
func TestTrainingRunAsksThePoolAndYields(t *testing.T) {
	t.Parallel()
	base := capacity.Offering{Provider: "base", InstanceType: "gpu.1x", Zone: "dc", Market: capacity.Base, GPUs: 1}
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.OdA}, Trainings: []activities.TrainingOutcome{"block"}}
	env := newEnvWithoutPool(t, f)
	var mu sync.Mutex
	var told []string
	env.OnSignalExternalWorkflow(mock.Anything, workflows.PoolWorkflowID, "", mock.Anything, mock.Anything).Return(
		func(_, _, _, name string, arg any) error {
			mu.Lock()
			defer mu.Unlock()
			switch a := arg.(type) {
			case admission.Request:
				told = append(told, name+" "+a.ID+" "+string(a.Kind))
			case workflows.PoolBind:
				told = append(told, name+" "+a.Offering.Key())
			case workflows.PoolRef:
				told = append(told, name+" "+a.ID)
			}
			return nil
		})
	js := job(spec.TierFlexible)
	req := admission.Request{ID: js.ID, Kind: admission.Training, Owner: js.ID, Priority: 50, Tier: spec.TierFlexible}
	var queued, yielded Status
	env.RegisterDelayedCallback(func() { queued = queryStatus(t, env) }, time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.SignalCapacityGranted, admission.Allocation{Request: req, Layer: admission.BaseLayer, Node: "dc-1", Pool: "dc", Offerings: []capacity.Offering{base}})
	}, 2*time.Second)
	// The pool asks for the capacity back while the run trains on it.
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == activities.RunTrainingName && len(f.Trained) == 0 {
			env.SignalWorkflow(workflows.SignalYield, workflows.YieldRequest{ID: req.ID, Reason: "preempted for chat (priority 90)", For: "chat"})
		}
	})
	env.RegisterDelayedCallback(func() { yielded = queryStatus(t, env) }, 20*time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.SignalCapacityGranted, admission.Allocation{Request: req, Layer: admission.BurstLayer, Pool: "cloud", Offerings: []capacity.Offering{fakecloud.SpotB, fakecloud.SpotA}})
	}, 30*time.Second)
	env.ExecuteWorkflow(workflows.TrainingRunName, js)
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}

	if queued.State != workflows.StateQueued || queued.Admission == nil || !queued.Admission.Queued {
		t.Errorf("before its grant the run is %s with admission %+v; want queued", queued.State, queued.Admission)
	}
	if yielded.State != workflows.StateQueued || yielded.Admission.Yields != 1 || yielded.Admission.LastYield.For != "chat" || yielded.Instance != nil {
		t.Errorf("after the yield: state %s, admission %+v, instance %v; want requeued holding nothing", yielded.State, yielded.Admission, yielded.Instance)
	}
	if st.State != workflows.StateCompleted || st.Admission.Yields != 1 {
		t.Errorf("ended %s with admission %+v; want completed after one yield", st.State, st.Admission)
	}
	if f.Acquired[0].Offering != base || f.Requests[0].Tags[capacity.TagNode] != "dc-1" || f.Requests[0].Tags[capacity.TagPool] != "base" {
		t.Errorf("first instance %s with tags %v; want the granted base machine dc-1", f.Acquired[0].Offering.Key(), f.Requests[0].Tags)
	}
	// The run's own offerings within the burst grant, spot in zone a
	// (b is not among the run's offerings).
	if f.Acquired[1].Offering != fakecloud.SpotA {
		t.Errorf("second instance %s; want %s, the run's offering within the grant", f.Acquired[1].Offering.Key(), fakecloud.SpotA.Key())
	}
	// Cost is booked to the pools file's names: the base group dc (not
	// its provider, base), then the burst pool cloud.
	_, dc := st.Cost.ByPool["dc"]
	if _, cloud := st.Cost.ByPool["cloud"]; !dc || !cloud || len(st.Cost.ByPool) != 2 {
		t.Errorf("cost by pool %+v; want the base group dc's and the burst pool cloud's", st.Cost.ByPool)
	}
	if diff := cmp.Diff(f.ReleasedReasons(), []activities.ReleaseReason{activities.ReleaseYielded, activities.ReleaseCompleted}); diff != "" {
		t.Errorf("releases, got(-), want(+):\n%s", diff)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{
		workflows.SignalPoolRequest + " " + js.ID + " training",
		workflows.SignalPoolYielded + " " + js.ID,
		workflows.SignalPoolBind + " " + fakecloud.SpotA.Key(),
		workflows.SignalPoolRelease + " " + js.ID,
	}
	if diff := cmp.Diff(told, want); diff != "" {
		t.Errorf("what the run told the pool, got(-), want(+):\n%s", diff)
	}
}

func queryStatus(t *testing.T, env *testsuite.TestWorkflowEnvironment) Status {
	t.Helper()
	var st Status
	v, err := env.QueryWorkflow(workflows.QueryStatus)
	if err != nil {
		t.Error(err)
		return st
	}
	if err := v.Get(&st); err != nil {
		t.Error(err)
	}
	return st
}

// A gang waiting on a burst grant it could not fill says what it needs
// and when the pool takes the grant back.
func TestGrantWhy(t *testing.T) {
	at := time.Date(2026, 12, 1, 14, 20, 0, 0, time.UTC)
	burst := &admission.Allocation{Layer: admission.BurstLayer, GiveBackAt: at}
	cases := map[string]struct {
		nodes     int
		spread    bool
		grant     *admission.Allocation
		offerings []capacity.Offering
		want      string
	}{
		"spot gang in one zone": {nodes: 2, grant: burst, offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.SpotB}, want: "needs 2 spot nodes in one zone; gives the grant back at 14:20 UTC"},
		"either market, spread": {nodes: 3, spread: true, grant: burst, offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.OdA}, want: "needs 3 nodes; gives the grant back at 14:20 UTC"},
		"one node":              {nodes: 1, grant: burst, offerings: []capacity.Offering{fakecloud.SpotA}},
		"base machines":         {nodes: 2, grant: &admission.Allocation{Layer: admission.BaseLayer}, offerings: []capacity.Offering{fakecloud.SpotA}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := runOf("j", "")
			r.spec = gangJob(tc.nodes)
			if tc.spread {
				same := false
				r.spec.Resources.SameZone = &same
			}
			r.Pool = &workload.PoolPlace{Place: workload.PlaceGranted, Grant: tc.grant}
			if got := r.Seat().GrantWhy(*r.AskFor(tc.offerings)); got != tc.want {
				t.Errorf("got %q; want %q", got, tc.want)
			}
		})
	}
}

// A run whose burst grant finds no stock waits for it; when the pool asks
// for the grant back (a base machine came free), the run yields at once,
// without having acquired anything, and trains on the base machine it is
// granted next.
func TestRunWaitingOnABurstGrantYieldsToBase(t *testing.T) {
	t.Parallel()
	base := capacity.Offering{Provider: "base", InstanceType: "gpu.1x", Zone: "dc", Market: capacity.Base, GPUs: 1}
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA}, NoStock: map[capacity.Market]bool{capacity.Spot: true}}
	env := newEnvWithoutPool(t, f)
	var mu sync.Mutex
	var told []string
	env.OnSignalExternalWorkflow(mock.Anything, workflows.PoolWorkflowID, "", mock.Anything, mock.Anything).Return(
		func(_, _, _, name string, _ any) error {
			mu.Lock()
			defer mu.Unlock()
			told = append(told, name)
			return nil
		})
	js := job(spec.TierFlexible)
	req := admission.Request{ID: js.ID, Kind: admission.Training, Owner: js.ID, Priority: 50, Tier: spec.TierFlexible}
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.SignalCapacityGranted, admission.Allocation{Request: req, Layer: admission.BurstLayer, Pool: "cloud", Offerings: []capacity.Offering{fakecloud.SpotA}})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.SignalYield, workflows.YieldRequest{ID: req.ID, Reason: "moving to base capacity that came free"})
	}, 5*time.Minute)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.SignalCapacityGranted, admission.Allocation{Request: req, Layer: admission.BaseLayer, Node: "dc-1", Pool: "dc", Offerings: []capacity.Offering{base}})
	}, 5*time.Minute+time.Second)
	env.ExecuteWorkflow(workflows.TrainingRunName, js)
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Acquired) != 1 || f.Acquired[0].Offering != base {
		t.Errorf("acquired %+v; want only the base machine", f.Acquired)
	}
	if st.State != workflows.StateCompleted {
		t.Errorf("state %s; want completed", st.State)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(told, []string{workflows.SignalPoolRequest, workflows.SignalPoolYielded, workflows.SignalPoolRelease}); diff != "" {
		t.Errorf("what the run told the pool, got(-), want(+):\n%s", diff)
	}
}
