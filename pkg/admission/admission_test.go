package admission

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"refuel/pkg/capacity"
	"refuel/pkg/pool"
	"refuel/pkg/spec"
)

var (
	t0   = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	spot = capacity.Offering{Provider: "aws", InstanceType: "g5.xlarge", Zone: "a", Market: capacity.Spot, GPUs: 1, PricePerHour: 0.45}
	od   = capacity.Offering{Provider: "aws", InstanceType: "g5.xlarge", Zone: "a", Market: capacity.OnDemand, GPUs: 1, PricePerHour: 1.0}
	big  = capacity.Offering{Provider: "aws", InstanceType: "p4d", Zone: "a", Market: capacity.OnDemand, GPUs: 8, PricePerHour: 32}
)

// config is two base machines (8 and 4 GPUs) and one burst pool.
func config(maxInstances int, offerings ...capacity.Offering) pool.Config {
	c := pool.Config{
		Base: pool.BaseGroup{Name: "dc", Nodes: []pool.BaseNode{
			{Name: "n8", InstanceType: "a100-8x", GPUs: 8},
			{Name: "n4", InstanceType: "a100-4x", GPUs: 4},
		}},
		Burst: []pool.BurstPool{{Name: "aws", MaxInstances: maxInstances, Offerings: offerings}},
	}
	c.Normalize()
	return c
}

// job builds a request; gpus 0 means 1.
func job(id string, priority, gpus int, tier spec.Tier) Request {
	return Request{ID: id, Kind: Training, Priority: priority, Tier: tier, Resources: spec.Resources{GPUs: max(gpus, 1)}}
}

func ids[T any](xs []T, id func(T) string) []string {
	out := []string{}
	for _, x := range xs {
		out = append(out, id(x))
	}
	return out
}

func reqID(r Request) string      { return r.ID }
func allocID(a Allocation) string { return a.Request.ID }

func mustEnqueue(t *testing.T, s *State, at time.Time, rs ...Request) {
	t.Helper()
	for _, r := range rs {
		if err := s.Enqueue(r, at); err != nil {
			t.Fatal(err)
		}
	}
}

func TestQueueOrderWithAging(t *testing.T) {
	cases := map[string]struct {
		aging float64
		now   time.Time
		want  []string
	}{
		"at once, priority decides":                     {10, t0.Add(time.Hour), []string{"new-high", "old-low", "new-low"}},
		"after 5 h the old low ties and wins":           {10, t0.Add(5 * time.Hour), []string{"old-low", "new-high", "new-low"}},
		"after 2 h the old low passes the new low only": {10, t0.Add(2 * time.Hour), []string{"new-high", "old-low", "new-low"}},
		"faster aging": {100, t0.Add(time.Hour), []string{"old-low", "new-high", "new-low"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := config(0)
			c.AgingPerHour = tc.aging
			s := New(c)
			mustEnqueue(t, s, t0, job("old-low", 10, 1, spec.TierFlexible))
			mustEnqueue(t, s, tc.now.Add(-time.Second), job("new-high", 50, 1, spec.TierFlexible), job("new-low", 10, 1, spec.TierFlexible))
			if diff := cmp.Diff(ids(s.Queue(tc.now), reqID), tc.want); diff != "" {
				t.Errorf("got(-), want(+):\n%s", diff)
			}
		})
	}
}

func TestRaisingPriorityReordersAtOnce(t *testing.T) {
	s := New(config(0))
	mustEnqueue(t, s, t0, job("a", 50, 1, spec.TierFlexible), job("b", 40, 1, spec.TierFlexible))
	if err := s.SetPriority("b", 90); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ids(s.Queue(t0), reqID), []string{"b", "a"}); diff != "" {
		t.Errorf("got(-), want(+):\n%s", diff)
	}
	var fe *spec.FieldError
	if err := s.SetPriority("b", 101); !errors.As(err, &fe) || fe.Field != "priority" {
		t.Errorf("priority 101: error %v; want a field error naming priority", err)
	}
	var nf *NotFoundError
	if err := s.SetPriority("zzz", 1); !errors.As(err, &nf) {
		t.Errorf("unknown id: error %v; want *NotFoundError", err)
	}
}

func TestPausedRequestsAreHeldAndDoNotAge(t *testing.T) {
	s := New(config(0, spot))
	mustEnqueue(t, s, t0, job("held", 60, 1, spec.TierFlexible), job("other", 50, 1, spec.TierFlexible))
	if err := s.Pause("held", t0); err != nil {
		t.Fatal(err)
	}
	got := s.Admit(t0, nil)
	if diff := cmp.Diff(ids(got, allocID), []string{"other"}); diff != "" {
		t.Errorf("admitted got(-), want(+):\n%s", diff)
	}
	if diff := cmp.Diff(ids(s.Waiting, reqID), []string{"held"}); diff != "" {
		t.Errorf("waiting got(-), want(+):\n%s", diff)
	}
	if err := s.Resume("held", t0.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if w := s.Waiting[0].Waited(t0.Add(4 * time.Hour)); w != time.Hour {
		t.Errorf("waited %s; want 1h (3h paused left out)", w)
	}
	if got := s.Admit(t0.Add(4*time.Hour), nil); len(got) != 1 {
		t.Errorf("resumed request not admitted: %v", got)
	}
}

func TestAdmitPlacesBaseFirstThenOverflows(t *testing.T) {
	cases := map[string]struct {
		cfg      pool.Config
		requests []Request
		unavail  []string
		want     []string // id@node or id@pool:first offering's market
	}{
		"best fit on base, large holes kept": {
			config(0, spot, od),
			[]Request{job("four", 50, 4, spec.TierFlexible), job("eight", 40, 8, spec.TierFlexible)},
			nil, []string{"four@n4", "eight@n8"},
		},
		"overflow to burst once base is full": {
			config(0, spot, od),
			[]Request{job("a", 50, 8, spec.TierDeadline), job("b", 50, 4, spec.TierDeadline), job("c", 50, 1, spec.TierDeadline)},
			nil, []string{"a@n8", "b@n4", "c@aws:spot"},
		},
		"critical overflows to on-demand only": {
			config(0, spot, od),
			[]Request{job("a", 50, 8, spec.TierCritical), job("b", 50, 4, spec.TierCritical), job("c", 50, 1, spec.TierCritical)},
			nil, []string{"a@n8", "b@n4", "c@aws:on-demand"},
		},
		"flexible waits while spot is out of stock": {
			config(0, spot, od),
			[]Request{job("a", 50, 8, spec.TierFlexible), job("b", 50, 4, spec.TierFlexible), job("c", 50, 1, spec.TierFlexible)},
			[]string{spot.Key()}, []string{"a@n8", "b@n4"},
		},
		"pool cap": {
			config(1, spot),
			[]Request{job("a", 50, 8, spec.TierFlexible), job("b", 50, 4, spec.TierFlexible), job("c", 50, 1, spec.TierFlexible), job("d", 40, 1, spec.TierFlexible)},
			nil, []string{"a@n8", "b@n4", "c@aws:spot"},
		},
		"the first blocked request reserves what it could use": {
			config(0, spot),
			// "wide" needs a whole 8-GPU machine but n8 is half taken and
			// no burst offering has 8 GPUs; "small" may not slip onto n8.
			[]Request{job("half", 90, 4, spec.TierFlexible), job("fill", 80, 4, spec.TierFlexible), job("wide", 70, 8, spec.TierFlexible), job("small", 60, 1, spec.TierFlexible)},
			nil, []string{"half@n4", "fill@n8", "small@aws:spot"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := New(tc.cfg)
			for i, r := range tc.requests {
				mustEnqueue(t, s, t0.Add(time.Duration(i)*time.Second), r)
			}
			got := ids(s.Admit(t0.Add(time.Minute), tc.unavail), func(a Allocation) string {
				if a.Layer == BaseLayer {
					return a.Request.ID + "@" + a.Node
				}
				return a.Request.ID + "@" + a.Pool + ":" + string(a.Offerings[0].Market)
			})
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("got(-), want(+):\n%s", diff)
			}
		})
	}
}

func TestVictims(t *testing.T) {
	// running builds a state whose base machines hold the given jobs.
	running := func(maxInstances int, allocs ...Allocation) *State {
		s := New(config(maxInstances, od))
		for i := range allocs {
			allocs[i].AdmittedAt = t0.Add(time.Duration(i) * time.Minute)
		}
		s.Running = allocs
		return s
	}
	onBase := func(r Request, node string) Allocation { return Allocation{Request: r, Layer: BaseLayer, Node: node} }
	inPool := func(r Request) Allocation {
		return Allocation{Request: r, Layer: BurstLayer, Pool: "aws", Offerings: []capacity.Offering{od}}
	}
	gapped := func(gap int, s *State) *State {
		s.Config.PreemptGap = gap
		return s
	}
	// kept makes runs keep their capacity for d after admission (the
	// cases decide an hour after t0).
	kept := func(d time.Duration, s *State) *State {
		s.Config.PreemptAfter = spec.Duration(d)
		return s
	}
	service := func(id string, priority, gpus int) Request {
		r := job(id, priority, gpus, spec.TierCritical)
		r.Kind = Service
		return r
	}
	dev := func(id string, priority, gpus int) Request {
		r := job(id, priority, gpus, spec.TierCritical)
		r.Kind = Development
		return r
	}
	cases := map[string]struct {
		state  *State
		demand Request
		want   []string
		ok     bool
	}{
		"lowest priority first": {
			running(1, onBase(job("p10", 10, 4, ""), "n4"), onBase(job("p20", 20, 8, ""), "n8"), inPool(job("p30", 30, 1, ""))),
			service("svc", 80, 4), []string{"p10"}, true,
		},
		"fewest runs at equal priority": {
			running(1, onBase(job("s1", 10, 2, ""), "n4"), onBase(job("s2", 10, 2, ""), "n4"), onBase(job("big", 10, 8, ""), "n8"), inPool(job("b", 60, 1, ""))),
			service("svc", 80, 4), []string{"big"}, true,
		},
		"never a service, never equal or higher priority": {
			running(1, onBase(service("other", 10, 4), "n4"), onBase(job("peer", 80, 8, ""), "n8"), inPool(job("high", 90, 1, ""))),
			service("svc", 80, 4), nil, false,
		},
		"a capped pool frees one slot": {
			running(1, onBase(job("hi4", 90, 4, ""), "n4"), onBase(job("hi8", 90, 8, ""), "n8"), inPool(job("low", 5, 1, ""))),
			service("svc", 80, 1), []string{"low"}, true,
		},
		"capacity already yielding is waited for": {
			running(1, Allocation{Request: job("going", 10, 4, ""), Layer: BaseLayer, Node: "n4", Yielding: true}, onBase(job("p20", 20, 8, ""), "n8"), inPool(job("b", 60, 1, ""))),
			service("svc", 80, 4), nil, true,
		},
		"a preempt gap spares runs just below": {
			gapped(10, running(1, onBase(job("p75", 75, 4, ""), "n4"), onBase(job("p72", 72, 8, ""), "n8"), inPool(job("p90", 90, 1, "")))),
			service("svc", 80, 4), nil, false,
		},
		"a preempt gap still takes runs far enough below": {
			gapped(10, running(1, onBase(job("p70", 70, 4, ""), "n4"), onBase(job("p90a", 90, 8, ""), "n8"), inPool(job("p90", 90, 1, "")))),
			service("svc", 80, 4), []string{"p70"}, true,
		},
		"runs admitted less than preempt_after ago are kept": {
			kept(2*time.Hour, running(1, onBase(job("p10", 10, 4, ""), "n4"), onBase(job("p20", 20, 8, ""), "n8"), inPool(job("p30", 30, 1, "")))),
			service("svc", 80, 4), nil, false,
		},
		"runs admitted longer than preempt_after ago may go": {
			kept(30*time.Minute, running(1, onBase(job("p10", 10, 4, ""), "n4"), onBase(job("p20", 20, 8, ""), "n8"), inPool(job("p30", 30, 1, "")))),
			service("svc", 80, 4), []string{"p10"}, true,
		},
		"an environment takes a lower-priority run's machine": {
			running(1, onBase(job("train", 40, 4, ""), "n4"), onBase(job("x", 90, 8, ""), "n8"), inPool(job("b", 90, 1, ""))),
			dev("env", 70, 4), []string{"train"}, true,
		},
		"a service takes a lower-priority environment's machine": {
			running(1, onBase(dev("env", 70, 4), "n4"), onBase(job("x", 90, 8, ""), "n8"), inPool(job("b", 90, 1, ""))),
			service("svc", 90, 4), []string{"env"}, true,
		},
		"an environment never takes a service's": {
			running(1, onBase(service("other", 10, 4), "n4"), onBase(job("x", 90, 8, ""), "n8"), inPool(job("b", 90, 1, ""))),
			dev("env", 70, 4), nil, false,
		},
		"most recently admitted first among equals": {
			running(1, onBase(job("older", 10, 4, ""), "n8"), onBase(job("newer", 10, 4, ""), "n8"), onBase(job("x", 90, 4, ""), "n4"), inPool(job("b", 60, 1, ""))),
			service("svc", 80, 4), []string{"newer"}, true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := tc.state.Victims(tc.demand, nil, t0.Add(time.Hour))
			if ok != tc.ok {
				t.Errorf("ok %v; want %v", ok, tc.ok)
			}
			if diff := cmp.Diff(ids(got, allocID), append([]string{}, tc.want...)); diff != "" {
				t.Errorf("victims got(-), want(+):\n%s", diff)
			}
		})
	}
}

func TestPreemptedRunsAreRequeued(t *testing.T) {
	s := New(config(0))
	mustEnqueue(t, s, t0, job("low", 10, 8, spec.TierFlexible))
	s.Admit(t0, nil)
	if err := s.MarkYielding("low"); err != nil {
		t.Fatal(err)
	}
	if v, ok := s.Victims(job("high", 90, 8, spec.TierCritical), nil, t0); !ok || len(v) != 0 {
		t.Errorf("victims %v, %v; want none, ok: the yielding run is enough", ids(v, allocID), ok)
	}
	if err := s.Requeue("low", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if len(s.Running) != 0 || len(s.Waiting) != 1 || s.Waiting[0].EnqueuedAt != t0.Add(time.Hour) {
		t.Errorf("after requeue: running %v, waiting %+v", s.Running, s.Waiting)
	}
	var dup *DuplicateError
	if err := s.Enqueue(job("low", 1, 1, spec.TierFlexible), t0); !errors.As(err, &dup) {
		t.Errorf("enqueue twice: error %v; want *DuplicateError", err)
	}
}

func TestEnqueueRejectsBadRequests(t *testing.T) {
	cases := map[string]struct {
		r     Request
		field string
	}{
		"priority":           {job("a", 101, 1, spec.TierFlexible), "priority"},
		"no tier":            {job("a", 50, 1, ""), "tier"},
		"no kind":            {Request{ID: "a", Tier: spec.TierCritical}, "kind"},
		"a kind of no one's": {Request{ID: "a", Kind: "notebook", Tier: spec.TierCritical}, "kind"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var fe *spec.FieldError
			if err := New(config(0)).Enqueue(tc.r, t0); !errors.As(err, &fe) || fe.Field != tc.field {
				t.Errorf("error %v; want a field error naming %s", err, tc.field)
			}
		})
	}
}

func TestReleaseOrder(t *testing.T) {
	at := func(id string, layer Layer, o capacity.Offering, admitted time.Duration) Allocation {
		return Allocation{Request: Request{ID: id}, Layer: layer, Offerings: []capacity.Offering{o}, AdmittedAt: t0.Add(admitted)}
	}
	cheapSpot := spot
	odSamePrice := od
	odSamePrice.PricePerHour = spot.PricePerHour
	allocs := []Allocation{
		at("base-old", BaseLayer, capacity.Offering{Market: capacity.Base}, 0),
		at("base-new", BaseLayer, capacity.Offering{Market: capacity.Base}, time.Hour),
		at("spot", BurstLayer, cheapSpot, 0),
		at("od-same-price", BurstLayer, odSamePrice, time.Hour),
		at("od", BurstLayer, od, 0),
		at("big", BurstLayer, big, 0),
	}
	want := []string{"big", "od", "spot", "od-same-price", "base-new", "base-old"}
	if diff := cmp.Diff(ids(ReleaseOrder(allocs), allocID), want); diff != "" {
		t.Errorf("got(-), want(+):\n%s", diff)
	}
}

func TestBindCountsTheAcquiredPool(t *testing.T) {
	c := config(1, spot)
	c.Burst = append(c.Burst, pool.BurstPool{Name: "gcp", MaxInstances: 1, Offerings: []capacity.Offering{{Provider: "gcp", InstanceType: "g2", Zone: "b", Market: capacity.Spot, GPUs: 1, PricePerHour: 0.5}}})
	s := New(c)
	mustEnqueue(t, s, t0, job("a", 50, 8, spec.TierFlexible), job("b", 50, 4, spec.TierFlexible), job("c", 50, 1, spec.TierFlexible))
	s.Admit(t0, nil)
	if err := s.BindNode("c", 0, c.Burst[1].Offerings[0]); err != nil {
		t.Fatal(err)
	}
	mustEnqueue(t, s, t0, job("d", 50, 1, spec.TierFlexible))
	got := s.Admit(t0, nil)
	if len(got) != 1 || got[0].Pool != "aws" {
		t.Errorf("admitted %+v; want d in aws, whose slot c did not take", got)
	}
}

// TestDecisionsSurviveJSON checks what continue-as-new relies on: a state
// carried through JSON decides exactly as the original.
func TestDecisionsSurviveJSON(t *testing.T) {
	build := func() *State {
		s := New(config(2, spot, od))
		for i, r := range []Request{job("a", 30, 8, spec.TierDeadline), job("b", 70, 4, spec.TierCritical), job("c", 10, 1, spec.TierFlexible), job("d", 50, 1, spec.TierDeadline), job("e", 20, 1, spec.TierFlexible)} {
			mustEnqueue(t, s, t0.Add(time.Duration(i)*time.Minute), r)
		}
		if err := s.Pause("d", t0.Add(10*time.Minute)); err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := build()
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var carried State
	if err := json.Unmarshal(data, &carried); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(3 * time.Hour)
	want := s.Admit(now, nil)
	got := carried.Admit(now, nil)
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("got(-), want(+):\n%s", diff)
	}
	if diff := cmp.Diff(build().Admit(now, nil), want); diff != "" {
		t.Errorf("same inputs, different decisions; got(-), want(+):\n%s", diff)
	}
}

func TestMovesBurstTrainingToFreedBase(t *testing.T) {
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	cfg := pool.Config{
		Base: pool.BaseGroup{Name: "dc", Provider: "base", Counts: []pool.BaseCount{{InstanceType: "gpu.1x", GPUs: 1, Count: 1}}},
		Burst: []pool.BurstPool{{Name: "cloud", Offerings: []capacity.Offering{
			{Provider: "sim", InstanceType: "gpu.1x", Zone: "a", Market: capacity.Spot, GPUs: 1, PricePerHour: 1},
			{Provider: "sim", InstanceType: "gpu.1x", Zone: "a", Market: capacity.OnDemand, GPUs: 1, PricePerHour: 3},
		}}},
	}
	cfg.Normalize()
	req := func(id string, tier spec.Tier) Request {
		return Request{ID: id, Kind: Training, Priority: 50, Tier: tier, Resources: spec.Resources{GPUs: 1}}
	}
	s := New(cfg)
	for _, r := range []Request{req("on-base", spec.TierDeadline), req("spot", spec.TierFlexible), req("ondemand", spec.TierCritical)} {
		if err := s.Enqueue(r, now); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(s.Admit(now, nil)); got != 3 {
		t.Fatalf("admitted %d, want 3", got)
	}
	if moves := s.Moves(); len(moves) != 0 {
		t.Fatalf("moves %v while base is full", ids(moves, allocID))
	}
	if err := s.BindNode("spot", 0, cfg.Burst[0].Offerings[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.BindNode("ondemand", 0, cfg.Burst[0].Offerings[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release("on-base"); err != nil {
		t.Fatal(err)
	}
	moves := s.Moves()
	if diff := cmp.Diff(ids(moves, allocID), []string{"ondemand"}); diff != "" {
		t.Errorf("moves, got(-), want(+):\n%s", diff)
	}
	if err := s.MarkYielding("ondemand"); err != nil {
		t.Fatal(err)
	}
	if moves := s.Moves(); len(moves) != 0 {
		t.Errorf("moves %v although the freed machine is spoken for", ids(moves, allocID))
	}
	if err := s.Requeue("ondemand", now); err != nil {
		t.Fatal(err)
	}
	got := s.Admit(now, nil)
	if len(got) != 1 || got[0].Layer != BaseLayer {
		t.Errorf("requeued run admitted as %+v, want on base", got)
	}
	if err := s.Enqueue(req("waiting", spec.TierCritical), now); err != nil {
		t.Fatal(err)
	}
	if moves := s.Moves(); len(moves) != 0 {
		t.Errorf("moves %v while a request waits", ids(moves, allocID))
	}
}
