package capacitypool

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/spec"
	"refuel/workflows"
)

func TestPoolAdmitsBaseFirstThenBurstAndPreemptsForPriority(t *testing.T) {
	t.Parallel()
	rec := &poolRecorder{}
	env := newPoolEnv(t, rec)
	signalAt(env, time.Second, workflows.SignalPoolRequest, training("low", 10, spec.TierFlexible))
	signalAt(env, 2*time.Second, workflows.SignalPoolRequest, training("mid", 30, spec.TierFlexible))
	// Base and burst are full: the critical run can use neither spot nor
	// a capped pool, so the lowest-priority run on base yields to it.
	signalAt(env, 3*time.Second, workflows.SignalPoolRequest, training("urgent", 90, spec.TierCritical))
	signalAt(env, 4*time.Second, workflows.SignalPoolYielded, workflows.PoolRef{ID: "low"})
	var st Status
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(workflows.QueryStatus)
		if err != nil {
			t.Error(err)
			return
		}
		_ = v.Get(&st)
	}, 5*time.Second)
	env.RegisterDelayedCallback(env.CancelWorkflow, 6*time.Second)
	env.ExecuteWorkflow(workflows.CapacityPoolName, PoolInput{Config: poolConfig()})

	want := []string{"grant low base", "grant mid burst", "yield low", "grant urgent base"}
	if diff := cmp.Diff(rec.list(), want); diff != "" {
		t.Errorf("what the pool told holders, got(-), want(+):\n%s", diff)
	}
	if len(st.Waiting) != 1 || st.Waiting[0].ID != "low" || st.Preemptions != 1 || st.Base != 1 || st.Burst != 1 || st.FreeBaseGPUs != 0 {
		t.Errorf("status %+v: want low requeued, one preemption, base and burst full", st)
	}
	// A base grant names the base group, which its holder books the
	// cost to; a burst grant its burst pool.
	for _, g := range rec.grants {
		if want := map[admission.Layer]string{admission.BaseLayer: "dc", admission.BurstLayer: poolConfig().Burst[0].Name}[g.Layer]; g.Pool != want {
			t.Errorf("grant of %s on %s names pool %q; want %q", g.Request.ID, g.Layer, g.Pool, want)
		}
	}
}

func TestPoolPriorityReordersAndPauseHolds(t *testing.T) {
	t.Parallel()
	rec := &poolRecorder{}
	env := newPoolEnv(t, rec)
	signalAt(env, time.Second, workflows.SignalPoolRequest, training("running", 50, spec.TierCritical))
	signalAt(env, 2*time.Second, workflows.SignalPoolRequest, training("bursting", 60, spec.TierCritical))
	signalAt(env, 3*time.Second, workflows.SignalPoolRequest, training("first", 20, spec.TierCritical))
	signalAt(env, 4*time.Second, workflows.SignalPoolRequest, training("second", 20, spec.TierCritical))
	signalAt(env, 5*time.Second, workflows.SignalPoolRequest, training("paused", 45, spec.TierCritical))
	signalAt(env, 6*time.Second, workflows.SignalPoolPause, workflows.PoolRef{ID: "paused"})
	signalAt(env, 7*time.Second, workflows.SignalPoolPriority, workflows.PoolPriority{ID: "second", Priority: 40})
	signalAt(env, 8*time.Second, workflows.SignalPoolRelease, workflows.PoolRef{ID: "running"})
	env.RegisterDelayedCallback(env.CancelWorkflow, 9*time.Second)
	env.ExecuteWorkflow(workflows.CapacityPoolName, PoolInput{Config: poolConfig()})

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
	signalAt(env, time.Second, workflows.SignalPoolRequest, training("on-base", 50, spec.TierFlexible))
	signalAt(env, 2*time.Second, workflows.SignalPoolRequest, training("on-burst", 50, spec.TierFlexible))
	signalAt(env, 3*time.Second, workflows.SignalPoolBind, workflows.PoolBind{ID: "on-burst", Offering: poolConfig().Burst[0].Offerings[0]})
	signalAt(env, 4*time.Second, workflows.SignalPoolRelease, workflows.PoolRef{ID: "on-base"})
	signalAt(env, 5*time.Second, workflows.SignalPoolYielded, workflows.PoolRef{ID: "on-burst"})
	env.RegisterDelayedCallback(env.CancelWorkflow, 6*time.Second)
	env.ExecuteWorkflow(workflows.CapacityPoolName, PoolInput{Config: poolConfig()})

	want := []string{"grant on-base base", "grant on-burst burst", "yield on-burst", "grant on-burst base"}
	if diff := cmp.Diff(rec.list(), want); diff != "" {
		t.Errorf("got(-), want(+):\n%s", diff)
	}
}

// A run whose burst grant waits for stock (it acquired nothing yet)
// moves to a base machine that came free at once, not once the market
// fills its grant.
func TestPoolMovesAnUnfilledRunToFreedBase(t *testing.T) {
	t.Parallel()
	rec := &poolRecorder{}
	env := newPoolEnv(t, rec)
	signalAt(env, time.Second, workflows.SignalPoolRequest, training("on-base", 50, spec.TierFlexible))
	signalAt(env, 2*time.Second, workflows.SignalPoolRequest, training("waiting", 50, spec.TierFlexible))
	signalAt(env, 4*time.Second, workflows.SignalPoolRelease, workflows.PoolRef{ID: "on-base"})
	signalAt(env, 5*time.Second, workflows.SignalPoolYielded, workflows.PoolRef{ID: "waiting"})
	env.RegisterDelayedCallback(env.CancelWorkflow, 6*time.Second)
	env.ExecuteWorkflow(workflows.CapacityPoolName, PoolInput{Config: poolConfig()})

	want := []string{"grant on-base base", "grant waiting burst", "yield waiting", "grant waiting base"}
	if diff := cmp.Diff(rec.list(), want); diff != "" {
		t.Errorf("got(-), want(+):\n%s", diff)
	}
}

// A burst gang that has not acquired every node moves to base machines
// as soon as enough are free, not after its gang_timeout; its grant
// tells it when that timeout falls.
func TestPoolMovesAnUnfilledGangToFreedBase(t *testing.T) {
	t.Parallel()
	rec := &poolRecorder{}
	env := newPoolEnv(t, rec)
	cfg := poolConfig()
	cfg.Base.Counts[0].Count = 2
	cfg.Burst[0].MaxInstances = 4
	cfg.GangTimeout = spec.Duration(10 * time.Minute)
	g := training("gang", 50, spec.TierFlexible)
	g.Resources.Nodes = 2
	signalsAt(env, time.Second, workflows.SignalPoolRequest, training("x", 90, spec.TierFlexible), training("y", 90, spec.TierFlexible))
	signalAt(env, 2*time.Second, workflows.SignalPoolRequest, g)
	var burst admission.Allocation
	env.RegisterDelayedCallback(func() {
		grants, _ := rec.taken()
		burst = grants[len(grants)-1]
		env.SignalWorkflow(workflows.SignalPoolBind, workflows.PoolBind{ID: "gang", Rank: 0, Offering: burst.Offerings[0]}) // one of two
	}, 3*time.Second)
	signalAt(env, 4*time.Second, workflows.SignalPoolRelease, workflows.PoolRef{ID: "x"})
	signalAt(env, 5*time.Second, workflows.SignalPoolRelease, workflows.PoolRef{ID: "y"})
	signalAt(env, 6*time.Second, workflows.SignalPoolYielded, workflows.PoolRef{ID: "gang"})
	env.RegisterDelayedCallback(env.CancelWorkflow, 7*time.Second)
	env.ExecuteWorkflow(workflows.CapacityPoolName, PoolInput{Config: cfg})

	want := []string{"grant x base", "grant y base", "grant gang burst", "yield gang", "grant gang base"}
	got := rec.list()
	if len(got) >= 2 {
		slices.Sort(got[:2]) // x's and y's grants go out together, in no set order
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("got(-), want(+):\n%s", diff)
	}
	if want := burst.AdmittedAt.Add(10 * time.Minute); !burst.GiveBackAt.Equal(want) {
		t.Errorf("the burst grant gives back at %s; want %s, its gang_timeout after admission", burst.GiveBackAt, want)
	}
}

// A holder that ended without giving its capacity back (terminated, say)
// loses it at the pool's next check, and the queue moves on.
func TestPoolReleasesWhatEndedHoldersKept(t *testing.T) {
	t.Parallel()
	rec := &poolRecorder{ended: []string{"terminated"}}
	env := newPoolEnv(t, rec)
	signalAt(env, time.Second, workflows.SignalPoolRequest, training("terminated", 50, spec.TierCritical))
	signalAt(env, 2*time.Second, workflows.SignalPoolRequest, training("bursting", 50, spec.TierCritical))
	signalAt(env, 3*time.Second, workflows.SignalPoolRequest, training("waiting", 50, spec.TierCritical))
	env.RegisterDelayedCallback(env.CancelWorkflow, ownersCheckEvery+time.Minute/2)
	env.ExecuteWorkflow(workflows.CapacityPoolName, PoolInput{Config: poolConfig()})

	want := []string{"grant terminated base", "grant bursting burst", "grant waiting base"}
	if diff := cmp.Diff(rec.list(), want); diff != "" {
		t.Errorf("got(-), want(+):\n%s", diff)
	}
}

// TestPoolCarriesItsStateAcrossContinueAsNew: a pool of 400 requests
// continues as new, hands on a compact carry, and the next generation
// answers status exactly as the last did. (Carries of thousands are
// measured in pkg/admission's TestCarrySize.)
func TestPoolCarriesItsStateAcrossContinueAsNew(t *testing.T) {
	t.Parallel()
	rec := &poolRecorder{}
	env := newPoolEnv(t, rec)
	small := scalePools()
	small.Burst[0].MaxInstances = 100 // 300 admitted, 100 waiting
	var before Status
	env.RegisterDelayedCallback(func() {
		for i := range 400 {
			r := training(fmt.Sprintf("run-%04d", i), i%100, spec.Tiers[i%3])
			r.Team = []string{"vision", "speech"}[i%2]
			env.SignalWorkflow(workflows.SignalPoolRequest, r)
		}
	}, time.Second)
	raised := ""
	env.RegisterDelayedCallback(func() {
		st := queryPool(t, env)
		env.SignalWorkflow(workflows.SignalPoolPause, workflows.PoolRef{ID: st.Waiting[0].ID})
		b := st.Running[len(st.Running)-1]
		env.SignalWorkflow(workflows.SignalPoolBind, workflows.PoolBind{ID: b.Request.ID, Offering: b.Offerings[len(b.Offerings)-1]})
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		before = queryPool(t, env)
		env.SetContinueAsNewSuggested(true)
		raised = before.Running[0].Request.ID
		env.SignalWorkflow(workflows.SignalPoolPriority, workflows.PoolPriority{ID: raised, Priority: 99})
	}, 3*time.Second)
	env.ExecuteWorkflow(workflows.CapacityPoolName, PoolInput{Config: small, MaxHistory: 1 << 20})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("pool ended with %v; want a continue-as-new", err)
	}
	payload := can.Input.GetPayloads()[0]
	if size := len(payload.GetData()); size > 64<<10 {
		t.Errorf("the carry of 400 requests is %d bytes; want at most 64 KiB", size)
	}
	var next PoolInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.State != nil || next.Carry == nil || next.Counts.Generation != 1 {
		t.Fatalf("next input: state %v, carry %v, generation %d; want a carry only, generation 1", next.State != nil, next.Carry != nil, next.Counts.Generation)
	}

	env2 := newPoolEnv(t, &poolRecorder{})
	var after Status
	env2.RegisterDelayedCallback(func() { after = queryPool(t, env2) }, time.Second)
	env2.RegisterDelayedCallback(env2.CancelWorkflow, 2*time.Second)
	env2.ExecuteWorkflow(workflows.CapacityPoolName, next)
	// One was raised just before the hand-off.
	before.Running[0].Request.Priority = 99
	if !slices.ContainsFunc(after.Waiting, func(q QueuedRequest) bool { return q.Paused }) || !slices.ContainsFunc(after.Running, func(a admission.Allocation) bool { return a.Bound }) {
		t.Errorf("the pause and the bind did not come through the hand-off")
	}
	cmpStatus := cmp.Options{cmpopts.IgnoreFields(Status{}, "Generation", "History"), cmpopts.IgnoreFields(QueuedRequest{}, "EffectivePriority"), cmpopts.EquateEmpty(),
		cmpopts.SortSlices(func(a, b QueuedRequest) bool { return a.ID < b.ID })}
	if diff := cmp.Diff(after, before, cmpStatus); diff != "" {
		t.Errorf("status after the hand-off got(-), before want(+):\n%s", diff)
	}
}

// TestPoolGrantsGangsWholeAndTakesBackUnfilledOnes: a gang too large for
// the base goes whole to one burst pool, its grant naming every node; it
// binds two of its three nodes, and after the pools file's gang_timeout
// the pool asks for the grant back; requeued, it is granted again.
func TestPoolGrantsGangsWholeAndTakesBackUnfilledOnes(t *testing.T) {
	t.Parallel()
	rec := &poolRecorder{}
	env := newPoolEnv(t, rec)
	cfg := poolConfig()
	cfg.Burst[0].MaxInstances = 4
	cfg.GangTimeout = spec.Duration(5 * time.Minute)
	g := training("gang", 50, spec.TierFlexible)
	g.Resources.Nodes = 3
	signalAt(env, time.Second, workflows.SignalPoolRequest, g)
	env.RegisterDelayedCallback(func() {
		grants, _ := rec.taken()
		if len(grants) != 1 || grants[0].Layer != admission.BurstLayer || len(grants[0].Nodes) != 3 || grants[0].Pool != "cloud" {
			t.Fatalf("grants %+v; want the gang's 3 nodes on burst", grants)
		}
		for rank := range 2 {
			env.SignalWorkflow(workflows.SignalPoolBind, workflows.PoolBind{ID: "gang", Rank: rank, Offering: grants[0].Offerings[0]})
		}
	}, 2*time.Second)
	var yields []workflows.YieldRequest
	env.RegisterDelayedCallback(func() {
		_, yields = rec.taken()
		for _, y := range yields {
			env.SignalWorkflow(workflows.SignalPoolYielded, workflows.PoolRef{ID: y.ID})
		}
	}, 7*time.Minute)
	env.RegisterDelayedCallback(env.CancelWorkflow, 8*time.Minute)
	env.ExecuteWorkflow(workflows.CapacityPoolName, PoolInput{Config: cfg})

	if len(yields) != 1 || yields[0].ID != "gang" || !strings.Contains(yields[0].Reason, "2 of its 3 nodes") {
		t.Errorf("yields %+v; want the gang asked for its grant back, 2 of 3 nodes acquired", yields)
	}
	if grants, _ := rec.taken(); len(grants) != 1 || len(grants[0].Nodes) != 3 {
		t.Errorf("after the yield, grants %+v; want the gang granted again", grants)
	}
}

// A pool generation recorded before gangs replays under the one-node
// rules: a request of three nodes is granted one, as it was then.
func TestPoolBeforeGangsGrantsOneNode(t *testing.T) {
	t.Parallel()
	rec := &poolRecorder{}
	env := newPoolEnv(t, rec)
	env.OnGetVersion(poolAtScaleVersion, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	g := training("gang", 50, spec.TierFlexible)
	g.Resources.Nodes = 3
	signalAt(env, time.Second, workflows.SignalPoolRequest, g)
	env.RegisterDelayedCallback(env.CancelWorkflow, 2*time.Second)
	env.ExecuteWorkflow(workflows.CapacityPoolName, PoolInput{Config: poolConfig()})
	if len(rec.grants) != 1 || rec.grants[0].Layer != admission.BaseLayer || rec.grants[0].Nodes != nil {
		t.Errorf("grants %+v; want one node on base", rec.grants)
	}
}

// A grant that cannot be delivered (its owner is gone) gives the
// capacity back, and the next request gets it.
func TestPoolReleasesGrantsNotDelivered(t *testing.T) {
	t.Parallel()
	rec := &poolRecorder{gone: []string{"gone"}}
	env := newPoolEnv(t, rec)
	signalsAt(env, time.Second, workflows.SignalPoolRequest,
		training("gone", 90, spec.TierCritical), training("bursting", 80, spec.TierCritical), training("next", 50, spec.TierCritical))
	env.RegisterDelayedCallback(env.CancelWorkflow, 2*time.Second)
	env.ExecuteWorkflow(workflows.CapacityPoolName, PoolInput{Config: poolConfig()})
	want := []string{"grant bursting burst", "grant next base"}
	got := rec.list()
	slices.Sort(got) // the two grants go out together, in no set order
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("got(-), want(+):\n%s", diff)
	}
}

// Grants beyond the send window wait in the pool; when a generation ends
// with grants still on their way it waits for those, and hands on the
// rest unsent, which the next generation sends first.
func TestPoolHandsOnWhatItHasNotSent(t *testing.T) {
	t.Parallel()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(CapacityPool, workflow.RegisterOptions{Name: workflows.CapacityPoolName})
	env.RegisterActivityWithOptions((&poolRecorder{}).EndedWorkflows, activity.RegisterOptions{Name: activities.EndedWorkflowsName})
	var mu sync.Mutex
	delivered := 0
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", workflows.SignalCapacityGranted, mock.Anything).After(time.Minute).Return(
		func(_, _, _, _ string, _ any) error {
			mu.Lock()
			defer mu.Unlock()
			delivered++
			return nil
		})
	n := sendWindow + 100
	env.RegisterDelayedCallback(func() {
		for i := range n {
			env.SignalWorkflow(workflows.SignalPoolRequest, training(fmt.Sprintf("run-%04d", i), 50, spec.TierCritical))
		}
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryPool(t, env)
		if st.Delivering != sendWindow || st.Unsent != 100 {
			t.Errorf("delivering %d, unsent %d; want the window full and 100 waiting", st.Delivering, st.Unsent)
		}
		env.SetContinueAsNewSuggested(true)
		env.SignalWorkflow(workflows.SignalPoolPause, workflows.PoolRef{ID: "none"})
	}, 2*time.Second)
	big := scalePools()
	big.Burst[0].MaxInstances = 1000
	env.ExecuteWorkflow(workflows.CapacityPoolName, PoolInput{Config: big, MaxHistory: 1 << 20})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("pool ended with %v; want a continue-as-new", err)
	}
	var next PoolInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if delivered != sendWindow || len(next.Unsent) != 100 || next.Unsent[0].Yield != nil {
		t.Errorf("delivered %d before the hand-off, %d handed on unsent; want the window's %d delivered, 100 grants handed on", delivered, len(next.Unsent), sendWindow)
	}
	rec := &poolRecorder{}
	env2 := newPoolEnv(t, rec)
	env2.RegisterDelayedCallback(env2.CancelWorkflow, time.Second)
	env2.ExecuteWorkflow(workflows.CapacityPoolName, next)
	if len(rec.grants) != 100 {
		t.Errorf("the next generation sent %d grants; want the 100 handed on", len(rec.grants))
	}
}
