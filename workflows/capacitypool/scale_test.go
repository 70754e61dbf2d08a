package capacitypool

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"refuel/pkg/admission"
	"refuel/pkg/capacity"
	"refuel/pkg/pool"
	"refuel/pkg/spec"
	"refuel/workflows"
)

// scalePools is 200 one-GPU base machines and a burst pool capped at 300.
func scalePools() pool.Config {
	c := pool.Config{
		Base: pool.BaseGroup{Name: "dc", Counts: []pool.BaseCount{{InstanceType: "gpu.1x", GPUs: 1, Count: 200, PricePerHour: 0.5}}},
		Burst: []pool.BurstPool{{Name: "cloud", MaxInstances: 300, Offerings: []capacity.Offering{
			{Provider: "sim", InstanceType: "gpu.1x", Zone: "a", Market: capacity.Spot, GPUs: 1, PricePerHour: 1},
			{Provider: "sim", InstanceType: "gpu.1x", Zone: "b", Market: capacity.Spot, GPUs: 1, PricePerHour: 1.1},
			{Provider: "sim", InstanceType: "gpu.1x", Zone: "a", Market: capacity.OnDemand, GPUs: 1, PricePerHour: 3},
			{Provider: "sim", InstanceType: "gpu.1x", Zone: "b", Market: capacity.OnDemand, GPUs: 1, PricePerHour: 3.3},
		}}},
	}
	c.Normalize()
	return c
}

// TestPoolAt1000Requests drives the pool workflow with 1,000 request
// signals at once, then releases, binds, a wave of service replicas that
// must preempt, and base capacity coming free while nothing waits, and
// checks every grant and yield against the rules.
func TestPoolAt1000Requests(t *testing.T) {
	t.Parallel()
	rec := &poolRecorder{}
	env := newPoolEnv(t, rec)
	id := func(i int) string { return fmt.Sprintf("run-%04d", i) }
	// The 1,000 by rank: priority i%100, first come among equals. They
	// are sent in that order, so none arrives to find a lower priority
	// holding what it could preempt.
	var rank []string
	priority := map[string]int{}
	for p := 99; p >= 0; p-- {
		for i := p; i < 1000; i += 100 {
			rank = append(rank, id(i))
			priority[id(i)] = p
		}
	}
	step := func(d time.Duration, f func()) { env.RegisterDelayedCallback(f, d) }
	granted := func(want int) []admission.Allocation {
		g, y := rec.taken()
		if len(g) != want || len(y) != 0 {
			t.Errorf("%d grants and %d yields; want %d grants", len(g), len(y), want)
		}
		return g
	}
	var base, burst []admission.Allocation
	step(time.Second, func() {
		for _, id := range rank {
			env.SignalWorkflow(workflows.SignalPoolRequest, training(id, priority[id], spec.TierDeadline))
		}
	})
	// Grants are sent together; the test suite's mocks see them in any
	// order.
	sorted := func(xs []string) []string { return slices.Sorted(slices.Values(xs)) }
	step(2*time.Second, func() {
		g := granted(500)
		if diff := cmp.Diff(sorted(ids(g)), sorted(rank[:500])); diff != "" {
			t.Errorf("grants by rank, got(-), want(+):\n%s", diff)
		}
		for _, a := range g {
			if onBase := slices.Index(rank, a.Request.ID) < 200; onBase != (a.Layer == admission.BaseLayer) {
				t.Errorf("%s on %s; want the first 200 by rank on base, the next 300 on burst", a.Request.ID, a.Layer)
			}
			if a.Layer == admission.BaseLayer {
				base = append(base, a)
			} else {
				burst = append(burst, a)
			}
		}
		for i, a := range burst {
			env.SignalWorkflow(workflows.SignalPoolBind, workflows.PoolBind{ID: a.Request.ID, Offering: a.Offerings[i%len(a.Offerings)]})
		}
		for _, a := range base[:100] {
			env.SignalWorkflow(workflows.SignalPoolRelease, workflows.PoolRef{ID: a.Request.ID})
		}
	})
	step(3*time.Second, func() {
		g := granted(100)
		if diff := cmp.Diff(sorted(ids(g)), sorted(rank[500:600])); diff != "" {
			t.Errorf("grants on freed base, got(-), want(+):\n%s", diff)
		}
		for i := range 50 {
			r := admission.Request{ID: fmt.Sprintf("chat/r%d", i), Kind: admission.Service, Owner: "chat", Priority: 95, Tier: spec.TierCritical, Resources: spec.Resources{GPUs: 1}}
			env.SignalWorkflow(workflows.SignalPoolRequest, r)
		}
	})
	step(4*time.Second, func() {
		_, y := rec.taken()
		if len(y) != 50 {
			t.Fatalf("%d yields for 50 replicas", len(y))
		}
		st := queryPool(t, env)
		lowestKept := 100
		for _, a := range st.Running {
			if !a.Yielding && a.Request.Kind == admission.Training {
				lowestKept = min(lowestKept, a.Request.Priority)
			}
		}
		for _, v := range y {
			a := st.Running[slices.IndexFunc(st.Running, func(a admission.Allocation) bool { return a.Request.ID == v.ID })]
			if a.Request.Kind != admission.Training || a.Request.Priority > lowestKept || !strings.HasPrefix(v.For, "chat/") {
				t.Errorf("%s (priority %d) yields for %q while runs of priority %d keep running", v.ID, a.Request.Priority, v.For, lowestKept)
			}
			env.SignalWorkflow(workflows.SignalPoolYielded, workflows.PoolRef{ID: v.ID})
		}
	})
	step(5*time.Second, func() {
		g := granted(50)
		for _, a := range g {
			if a.Request.Kind != admission.Service {
				t.Errorf("%s granted; want the replicas", a.Request.ID)
			}
		}
		st := queryPool(t, env)
		if st.Base != 200 || st.Burst != 300 || len(st.Waiting) != 450 || st.Preemptions != 50 {
			t.Errorf("status: base %d, burst %d, waiting %d, preemptions %d; want 200, 300, 450, 50", st.Base, st.Burst, len(st.Waiting), st.Preemptions)
		}
		// Nothing waits and 100 base machines come free: the 100 most
		// expensive burst runs move.
		for _, q := range st.Waiting {
			env.SignalWorkflow(workflows.SignalPoolRelease, workflows.PoolRef{ID: q.ID})
		}
		for _, a := range st.Running {
			if a.Layer == admission.BaseLayer && a.Request.Kind == admission.Training && len(st.Waiting) > 0 {
				env.SignalWorkflow(workflows.SignalPoolRelease, workflows.PoolRef{ID: a.Request.ID})
				st.Waiting = st.Waiting[:len(st.Waiting)-1]
				if len(st.Waiting) == 350 {
					break
				}
			}
		}
	})
	step(6*time.Second, func() {
		_, y := rec.taken()
		st := queryPool(t, env)
		if len(y) != 100 || st.Moves != 100 || len(st.Waiting) != 0 {
			t.Errorf("%d yields, %d moves, %d waiting; want 100 moves onto the freed base", len(y), st.Moves, len(st.Waiting))
		}
		cheapest := 1e9
		for _, v := range y {
			a := st.Running[slices.IndexFunc(st.Running, func(a admission.Allocation) bool { return a.Request.ID == v.ID })]
			cheapest = min(cheapest, a.Offerings[0].PricePerHour)
		}
		for _, a := range st.Running {
			if a.Layer == admission.BurstLayer && !a.Yielding && a.Offerings[0].PricePerHour > cheapest {
				t.Errorf("%s at $%g/h stays on burst while a run at $%g/h moves", a.Request.ID, a.Offerings[0].PricePerHour, cheapest)
			}
		}
	})
	env.RegisterDelayedCallback(env.CancelWorkflow, 7*time.Second)
	env.ExecuteWorkflow(workflows.CapacityPoolName, PoolInput{Config: scalePools(), MaxHistory: 1 << 20})
}

func ids(as []admission.Allocation) []string {
	out := []string{}
	for _, a := range as {
		out = append(out, a.Request.ID)
	}
	return out
}
