package admission

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"refuel/pkg/capacity"
	"refuel/pkg/pool"
	"refuel/pkg/spec"
)

// machines are base machines of the given GPUs, named m0, m1, …, in the
// zone z<k> of their group: machines([]int{8, 8}, []int{8}) is two in z0
// and one in z1.
func machines(zones ...[]int) []pool.BaseNode {
	var out []pool.BaseNode
	for z, gpus := range zones {
		for _, g := range gpus {
			out = append(out, pool.BaseNode{Name: fmt.Sprintf("m%d", len(out)), InstanceType: fmt.Sprintf("gpu.%dx", g), GPUs: g, Zone: fmt.Sprintf("z%d", z)})
		}
	}
	return out
}

func gangConfig(nodes []pool.BaseNode, pools ...pool.BurstPool) pool.Config {
	c := pool.Config{Base: pool.BaseGroup{Name: "dc", Nodes: nodes}, Burst: pools}
	c.Normalize()
	if err := c.Validate(); err != nil {
		panic(err)
	}
	return c
}

// cloud is a burst pool of 1-GPU spot and on-demand offerings in zones a
// and b of provider name.
func cloud(name string, maxInstances int) pool.BurstPool {
	p := pool.BurstPool{Name: name, MaxInstances: maxInstances}
	for _, z := range []string{"a", "b"} {
		p.Offerings = append(p.Offerings,
			capacity.Offering{Provider: name, InstanceType: "gpu.1x", Zone: z, Market: capacity.Spot, GPUs: 1, PricePerHour: 0.5},
			capacity.Offering{Provider: name, InstanceType: "gpu.1x", Zone: z, Market: capacity.OnDemand, GPUs: 1, PricePerHour: 1.5})
	}
	return p
}

// service is a one-GPU replica of service svc.
func service(id string, priority int) Request {
	return Request{ID: id, Owner: "svc", Kind: Service, Priority: priority, Tier: spec.TierCritical, Resources: spec.Resources{GPUs: 1}}
}

func gang(id string, priority, nodes, gpus int, tier spec.Tier) Request {
	return Request{ID: id, Owner: id, Kind: Training, Priority: priority, Tier: tier, Resources: spec.Resources{GPUs: gpus, Nodes: nodes}}
}

// in pins r to a zone.
func in(zone string, r Request) Request {
	r.Resources.Zones = []string{zone}
	return r
}

func spread(r Request) Request {
	no := false
	r.Resources.SameZone = &no
	return r
}

// placed says where an allocation is: machines for base, the pool and
// the node count for burst.
func placed(a Allocation) string {
	if a.Layer == BaseLayer {
		return a.Request.ID + "@" + strings.Join(a.machines(), ",")
	}
	return fmt.Sprintf("%s@%s×%d", a.Request.ID, a.Pool, a.NodeCount())
}

func TestGangPlacement(t *testing.T) {
	cases := map[string]struct {
		cfg     pool.Config
		running []Request // admitted first, in order
		request Request
		want    string // "" for waits
	}{
		"one zone that has the machines": {
			cfg: gangConfig(machines([]int{8, 8}, []int{8, 8, 8})), request: gang("g", 50, 3, 8, spec.TierCritical),
			want: "g@m2,m3,m4",
		},
		"the zone it fills most tightly": {
			// z1's machines keep 2 GPUs free each, z0's all 8.
			cfg:     gangConfig(machines([]int{8, 8}, []int{8, 8})),
			running: []Request{in("z1", job("six-a", 90, 6, spec.TierCritical)), in("z1", job("six-b", 90, 6, spec.TierCritical))},
			request: gang("g", 50, 2, 2, spec.TierCritical),
			want:    "g@m2,m3",
		},
		"spread across zones when allowed": {
			cfg: gangConfig(machines([]int{8, 8}, []int{8})), request: spread(gang("g", 50, 3, 8, spec.TierCritical)),
			want: "g@m0,m1,m2",
		},
		"never split between base and burst": {
			cfg: gangConfig(machines([]int{8, 8}), cloud("c", 0)), request: gang("g", 50, 3, 1, spec.TierFlexible),
			want: "g@c×3",
		},
		"a pool without room for every node waits": {
			cfg: gangConfig(nil, cloud("c", 4)), running: []Request{job("a", 90, 1, spec.TierFlexible), job("b", 90, 1, spec.TierFlexible)},
			request: gang("g", 50, 3, 1, spec.TierFlexible), want: "",
		},
		"one pool for the whole gang, not two halves": {
			cfg: gangConfig(nil, cloud("c", 2), cloud("d", 2)), request: gang("g", 50, 3, 1, spec.TierFlexible), want: "",
		},
		"the pool that has room": {
			cfg:     gangConfig(nil, cloud("c", 4), cloud("d", 3)),
			running: []Request{job("a", 90, 1, spec.TierFlexible), job("b", 90, 1, spec.TierFlexible)},
			request: gang("g", 50, 3, 1, spec.TierFlexible), want: "g@d×3",
		},
		"no two nodes on one machine": {
			cfg: gangConfig(machines([]int{8}), cloud("c", 0)), request: gang("g", 50, 2, 4, spec.TierCritical), want: "",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := New(tc.cfg)
			for _, r := range tc.running {
				mustEnqueue(t, s, t0, r)
				if got := s.Admit(t0, nil); len(got) != 1 {
					t.Fatalf("%s not admitted", r.ID)
				}
			}
			mustEnqueue(t, s, t0, tc.request)
			got := ""
			if as := s.Admit(t0, nil); len(as) == 1 {
				got = placed(as[0])
				checkCapacity(t, s)
			}
			if got != tc.want {
				t.Errorf("placed %q; want %q", got, tc.want)
			}
		})
	}
}

// What a gang's grant carries: every node's machine and offering on
// base; on burst one list of offerings for every node, all of the gang's
// pool, the nodes bound one by one.
func TestGangGrants(t *testing.T) {
	s := New(gangConfig(machines([]int{8, 8}), cloud("c", 0), cloud("d", 0)))
	mustEnqueue(t, s, t0, gang("base", 50, 2, 8, spec.TierCritical), gang("burst", 40, 3, 1, spec.TierFlexible))
	got := s.Admit(t0, nil)
	if len(got) != 2 {
		t.Fatalf("admitted %v", ids(got, allocID))
	}
	base, burst := got[0], got[1]
	wantBase := []NodeGrant{
		{Node: "m0", Offerings: []capacity.Offering{s.Nodes[0].Offering("base")}},
		{Node: "m1", Offerings: []capacity.Offering{s.Nodes[1].Offering("base")}},
	}
	if diff := cmp.Diff(base.Nodes, wantBase); diff != "" || base.Node != "m0" || !cmp.Equal(base.Offerings, wantBase[0].Offerings) {
		t.Errorf("base gang %+v; nodes got(-), want(+):\n%s", base, diff)
	}
	if burst.Pool != "c" || len(burst.Nodes) != 3 || slices.ContainsFunc(burst.Offerings, func(o capacity.Offering) bool { return o.Provider != "c" || o.Market != capacity.Spot }) {
		t.Errorf("burst gang %+v; want 3 nodes trying pool c's spot offerings", burst)
	}
	if err := s.BindNode("burst", 1, burst.Offerings[1]); err != nil {
		t.Fatal(err)
	}
	a := s.running("burst")
	if !a.Nodes[1].Bound || a.Nodes[0].Bound || a.Bound || a.Acquired() || a.Pool != "c" {
		t.Errorf("after binding rank 1: %+v", a)
	}
	if !cmp.Equal(got[1].Nodes[1], NodeGrant{}) {
		t.Errorf("binding changed the grant already handed out: %+v", got[1].Nodes[1])
	}
	for rank := range 3 {
		if err := s.BindNode("burst", rank, burst.Offerings[0]); err != nil {
			t.Fatal(err)
		}
	}
	if a := s.running("burst"); !a.Acquired() || !a.Bound {
		t.Errorf("every rank bound: %+v", a)
	}
	var fe *spec.FieldError
	if err := s.BindNode("burst", 3, burst.Offerings[0]); !errors.As(err, &fe) || fe.Field != "rank" {
		t.Errorf("binding rank 3 of 3: error %v; want a field error naming rank", err)
	}
}

// A one-node request's allocation looks exactly as it did before gangs,
// so runs that know nothing of gangs read their grants as before.
func TestOneNodeAllocationJSONIsUnchanged(t *testing.T) {
	s := New(gangConfig(machines([]int{1}), cloud("c", 0)))
	r := job("r", 50, 1, spec.TierCritical)
	r.Owner = "r"
	mustEnqueue(t, s, t0, r, Request{ID: "b", Owner: "b", Kind: Training, Priority: 40, Tier: spec.TierCritical, Resources: spec.Resources{GPUs: 1, Nodes: 1}})
	got := s.Admit(t0, nil)
	var texts []string
	for _, a := range got {
		data, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, string(data))
	}
	want := []string{
		`{"request":{"id":"r","kind":"training","owner":"r","priority":50,"tier":"critical","resources":{"gpus":1},"enqueued_at":"2026-01-05T09:00:00Z","seq":0},"layer":"base","node":"m0","offerings":[{"provider":"base","instance_type":"gpu.1x","zone":"z0","market":"base","gpus":1,"price_per_hour":0}],"admitted_at":"2026-01-05T09:00:00Z"}`,
		`{"request":{"id":"b","kind":"training","owner":"b","priority":40,"tier":"critical","resources":{"gpus":1,"nodes":1},"enqueued_at":"2026-01-05T09:00:00Z","seq":1},"layer":"burst","pool":"c","offerings":[{"provider":"c","instance_type":"gpu.1x","zone":"a","market":"on-demand","gpus":1,"price_per_hour":1.5},{"provider":"c","instance_type":"gpu.1x","zone":"b","market":"on-demand","gpus":1,"price_per_hour":1.5}],"admitted_at":"2026-01-05T09:00:00Z"}`,
	}
	if diff := cmp.Diff(texts, want); diff != "" {
		t.Errorf("got(-), want(+):\n%s", diff)
	}
}

// A request at the head of the queue that cannot be placed (8 GPUs,
// where a service holds one GPU of each 8-GPU machine for good) reserves
// the machines that could take it. Under the one-node rules it keeps a
// small request from them for ever; under GangRules it gives them back
// after reserve_timeout, for as long, and then reserves again.
func TestReservationsAreGivenBack(t *testing.T) {
	cfg := gangConfig(machines([]int{8}, []int{8}))
	cfg.ReserveTimeout = spec.Duration(10 * time.Minute)
	for name, rules := range map[string]Rules{"one-node rules": OneNodeRules, "gang rules": GangRules} {
		t.Run(name, func(t *testing.T) {
			s := New(cfg)
			s.Rules = rules
			mustEnqueue(t, s, t0, in("z0", service("svc/r1", 100)), in("z1", service("svc/r2", 100)))
			s.Admit(t0, nil)
			mustEnqueue(t, s, t0, job("big", 90, 8, spec.TierCritical), job("small", 50, 1, spec.TierCritical))
			admittedBy := func(d time.Duration) []string { return ids(s.Admit(t0.Add(d), nil), allocID) }
			for _, d := range []time.Duration{0, 9 * time.Minute} {
				if got := admittedBy(d); len(got) != 0 {
					t.Errorf("after %s admitted %v; want none, big reserves both machines", d, got)
				}
			}
			got := admittedBy(10 * time.Minute)
			if rules == OneNodeRules {
				if len(got) != 0 {
					t.Errorf("one-node rules admitted %v at the timeout; they never give a reservation back", got)
				}
				return
			}
			if !slices.Equal(got, []string{"small"}) {
				t.Errorf("at the timeout admitted %v; want small", got)
			}
			if !s.ReservedSince.IsZero() || !s.ReserveAgain.Equal(t0.Add(20*time.Minute)) {
				t.Errorf("reserved since %v, again at %v; want none until 20m", s.ReservedSince, s.ReserveAgain)
			}
			mustEnqueue(t, s, t0.Add(19*time.Minute), job("more", 10, 1, spec.TierCritical))
			if got := admittedBy(19 * time.Minute); !slices.Equal(got, []string{"more"}) {
				t.Errorf("while given back admitted %v; want more", got)
			}
			mustEnqueue(t, s, t0.Add(20*time.Minute), job("later", 10, 1, spec.TierCritical))
			if got := admittedBy(20 * time.Minute); len(got) != 0 || !s.ReservedSince.Equal(t0.Add(20*time.Minute)) {
				t.Errorf("after as long again admitted %v, reserved since %v; want big reserving anew", got, s.ReservedSince)
			}
		})
	}
}

// Two gangs on four machines, two held by a service for good: the first
// (three nodes) can never gather its machines; it reserves them, gives
// them back after reserve_timeout, and the second (two nodes) runs. The
// two never wait on each other for ever.
func TestTwoGangsNeverDeadlock(t *testing.T) {
	s := New(gangConfig(machines([]int{1, 1, 1, 1})))
	mustEnqueue(t, s, t0, service("svc/r1", 100), service("svc/r2", 100))
	s.Admit(t0, nil)
	mustEnqueue(t, s, t0, gang("three", 90, 3, 1, spec.TierCritical), gang("two", 50, 2, 1, spec.TierCritical))
	if got := s.Admit(t0, nil); len(got) != 0 {
		t.Fatalf("admitted %v; want none while three reserves", ids(got, allocID))
	}
	got := s.Admit(t0.Add(pool.DefaultReserveTimeout), nil)
	if len(got) != 1 || placed(got[0]) != "two@m2,m3" {
		t.Errorf("after the default reserve timeout admitted %v; want two on the free machines", ids(got, placed))
	}
}

func TestGangThatCanNeverBePlacedDoesNotReserve(t *testing.T) {
	s := New(gangConfig(machines([]int{1, 1}), cloud("c", 2)))
	huge := gang("huge", 90, 3, 1, spec.TierCritical)
	if s.Placeable(huge) {
		t.Errorf("a gang of 3 is placeable on 2 machines and a pool of 2")
	}
	mustEnqueue(t, s, t0, job("a", 95, 1, spec.TierCritical), huge, job("b", 10, 1, spec.TierCritical))
	if got := ids(s.Admit(t0, nil), allocID); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("admitted %v; want a and b, huge reserving nothing", got)
	}
	if !s.ReservedSince.IsZero() {
		t.Errorf("reserved since %v; want no reservation", s.ReservedSince)
	}
}

func TestUnfilledBurstGangsAreTakenBack(t *testing.T) {
	cfg := gangConfig(machines([]int{8, 8}), cloud("c", 0))
	cfg.GangTimeout = spec.Duration(10 * time.Minute)
	s := New(cfg)
	mustEnqueue(t, s, t0, gang("base", 90, 2, 8, spec.TierCritical), gang("burst", 50, 3, 1, spec.TierFlexible), gang("filled", 50, 2, 1, spec.TierFlexible), job("one", 50, 1, spec.TierFlexible))
	if got := s.Admit(t0, nil); len(got) != 4 {
		t.Fatalf("admitted %v", ids(got, allocID))
	}
	for _, rank := range []int{0, 1} {
		if err := s.BindNode("burst", rank, s.running("burst").Offerings[0]); err != nil {
			t.Fatal(err)
		}
		if err := s.BindNode("filled", rank, s.running("filled").Offerings[0]); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Unready(t0.Add(9 * time.Minute)); len(got) != 0 {
		t.Errorf("within the timeout: %v", ids(got, allocID))
	}
	if got := ids(s.Unready(t0.Add(10*time.Minute)), allocID); !slices.Equal(got, []string{"burst"}) {
		t.Errorf("at the timeout %v; want the burst gang with 2 of 3 nodes bound (base, filled and one-node runs are exempt)", got)
	}
	if err := s.MarkYielding("burst"); err != nil {
		t.Fatal(err)
	}
	if got := s.Unready(t0.Add(time.Hour)); len(got) != 0 {
		t.Errorf("once yielding: %v", ids(got, allocID))
	}
	s.Rules = OneNodeRules
	if got := s.Unready(t0.Add(time.Hour)); len(got) != 0 {
		t.Errorf("one-node rules: %v", ids(got, allocID))
	}
}

func TestGangVictims(t *testing.T) {
	svc := func(id string) Request { return service(id, 100) }
	cases := map[string]struct {
		cfg     pool.Config
		running []Request
		demand  Request
		want    []string
		ok      bool
	}{
		"a whole gang's worth": {
			cfg: gangConfig(machines([]int{1, 1, 1})), running: []Request{job("l1", 10, 1, spec.TierCritical), job("l2", 10, 1, spec.TierCritical), job("h", 95, 1, spec.TierCritical)},
			demand: gang("g", 80, 2, 1, spec.TierCritical), want: []string{"l1", "l2"}, ok: true,
		},
		"or nothing": {
			cfg: gangConfig(machines([]int{1, 1, 1})), running: []Request{job("l1", 10, 1, spec.TierCritical), job("l2", 10, 1, spec.TierCritical), job("h", 95, 1, spec.TierCritical)},
			demand: gang("g", 80, 3, 1, spec.TierCritical), want: nil, ok: false,
		},
		"a gang victim yields every node": {
			cfg:     gangConfig(machines([]int{1, 1, 1, 1})),
			running: []Request{gang("v", 10, 2, 1, spec.TierCritical), job("l", 20, 1, spec.TierCritical), svc("svc/r1")},
			demand:  gang("g", 80, 2, 1, spec.TierCritical), want: []string{"v"}, ok: true,
		},
		"in one zone": {
			// z0: a free machine and one of priority 30; z1: two of 10.
			// Two in z1 rank better than one of 30 in z0.
			cfg:     gangConfig(machines([]int{1, 1}, []int{1, 1})),
			running: []Request{in("z0", job("z0", 30, 1, spec.TierCritical)), in("z1", job("z1a", 10, 1, spec.TierCritical)), in("z1", job("z1b", 10, 1, spec.TierCritical))},
			demand:  gang("g", 80, 2, 1, spec.TierCritical), want: []string{"z1a", "z1b"}, ok: true,
		},
		"one zone or none": {
			cfg:     gangConfig(machines([]int{1, 1}, []int{1, 1})),
			running: []Request{in("z0", job("z0", 10, 1, spec.TierCritical)), in("z0", service("svc/r1", 100)), in("z1", job("z1", 10, 1, spec.TierCritical)), in("z1", service("svc/r2", 100))},
			demand:  gang("g", 80, 2, 1, spec.TierCritical), want: nil, ok: false,
		},
		"a pool freed of enough instances": {
			cfg:     gangConfig(nil, cloud("c", 4)),
			running: []Request{job("p10", 10, 1, spec.TierFlexible), job("p20", 20, 1, spec.TierFlexible), job("p30", 30, 1, spec.TierFlexible), job("p90", 90, 1, spec.TierFlexible)},
			demand:  gang("g", 80, 2, 1, spec.TierFlexible), want: []string{"p10", "p20"}, ok: true,
		},
		"a pool capped below the gang is no way": {
			cfg:     gangConfig(nil, cloud("c", 2)),
			running: []Request{job("p10", 10, 1, spec.TierFlexible), job("p20", 20, 1, spec.TierFlexible)},
			demand:  gang("g", 80, 3, 1, spec.TierFlexible), want: nil, ok: false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := New(tc.cfg)
			for _, r := range tc.running {
				mustEnqueue(t, s, t0, r)
				if got := s.Admit(t0, nil); len(got) != 1 {
					t.Fatalf("%s not admitted", r.ID)
				}
			}
			got, ok := s.Victims(tc.demand, nil, t0.Add(time.Hour))
			if ok != tc.ok {
				t.Errorf("ok %v; want %v", ok, tc.ok)
			}
			if diff := cmp.Diff(ids(got, allocID), append([]string{}, tc.want...)); diff != "" {
				t.Errorf("victims got(-), want(+):\n%s", diff)
			}
		})
	}
}

// A preemption pass claims the room it finds: capacity one request waits
// for is not counted again by the next, so every waiting demand gets its
// own victims in the same pass.
func TestPreemptClaimsRoom(t *testing.T) {
	s := New(gangConfig(machines([]int{1, 1, 1, 1})))
	for _, id := range []string{"a", "b", "c", "d"} {
		mustEnqueue(t, s, t0, job(id, 10, 1, spec.TierCritical))
	}
	s.Admit(t0, nil)
	mustEnqueue(t, s, t0, gang("g", 80, 2, 1, spec.TierCritical), job("one", 70, 1, spec.TierCritical))
	var got []string
	for _, p := range s.Preempt(t0.Add(time.Hour), nil) {
		got = append(got, p.Victim.Request.ID+" for "+p.For.ID)
	}
	want := []string{"a for g", "b for g", "c for one"}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("got(-), want(+):\n%s", diff)
	}
	if got := s.Preempt(t0.Add(time.Hour), nil); len(got) != 0 {
		t.Errorf("a second pass preempted %v; the yielding capacity is the waiting requests'", got)
	}
}

func TestGangsMoveWholeOrNotAtAll(t *testing.T) {
	s := New(gangConfig(machines([]int{1, 1, 1}), cloud("c", 0)))
	mustEnqueue(t, s, t0, job("x", 90, 1, spec.TierCritical), job("y", 90, 1, spec.TierCritical), job("z", 90, 1, spec.TierCritical), gang("g", 50, 3, 1, spec.TierFlexible))
	s.Admit(t0, nil)
	for rank := range 3 {
		if err := s.BindNode("g", rank, s.running("g").Offerings[0]); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"x", "y"} {
		if _, err := s.Release(id); err != nil {
			t.Fatal(err)
		}
		if got := s.Moves(); len(got) != 0 {
			t.Errorf("with %s released: moves %v; the gang needs 3 machines", id, ids(got, allocID))
		}
	}
	if _, err := s.Release("z"); err != nil {
		t.Fatal(err)
	}
	if got := ids(s.Moves(), allocID); !slices.Equal(got, []string{"g"}) {
		t.Errorf("moves %v; want the gang once 3 machines are free", got)
	}
}

func TestEnqueueRefusesBadGangs(t *testing.T) {
	cases := map[string]Request{
		"too many nodes":   gang("g", 50, spec.MaxNodes+1, 1, spec.TierCritical),
		"negative nodes":   gang("g", 50, -1, 1, spec.TierCritical),
		"a service of two": {ID: "s/r1", Owner: "s", Kind: Service, Priority: 50, Tier: spec.TierCritical, Resources: spec.Resources{GPUs: 1, Nodes: 2}},
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) {
			var fe *spec.FieldError
			if err := New(gangConfig(machines([]int{1}))).Enqueue(r, t0); !errors.As(err, &fe) || fe.Field != "resources.nodes" {
				t.Errorf("error %v; want a field error naming resources.nodes", err)
			}
			s := New(gangConfig(machines([]int{1})))
			s.Rules = OneNodeRules
			if err := s.Enqueue(r, t0); err != nil {
				t.Errorf("one-node rules take every request as one node: %v", err)
			}
		})
	}
}

// A burst gang that has not acquired every node moves onto base machines
// that came free for all its nodes at once under UnfilledGangRules;
// before, it waited out its gang_timeout on a grant the market might
// never fill.
func TestUnfilledBurstGangMovesToFreeBase(t *testing.T) {
	for _, tc := range []struct {
		rules Rules
		want  []string
	}{{GangRules, nil}, {UnfilledGangRules, []string{"g"}}, {UnfilledRules, []string{"g"}}} {
		s := New(gangConfig(machines([]int{1, 1}), cloud("c", 0)))
		s.Rules = tc.rules
		mustEnqueue(t, s, t0, job("x", 90, 1, spec.TierCritical), job("y", 90, 1, spec.TierCritical), gang("g", 50, 2, 1, spec.TierFlexible))
		s.Admit(t0, nil)
		if a := s.running("g"); a.Layer != BurstLayer {
			t.Fatalf("the gang is on %s; want burst while base is taken", a.Layer)
		}
		if err := s.BindNode("g", 0, s.running("g").Offerings[0]); err != nil { // one of two acquired
			t.Fatal(err)
		}
		for _, id := range []string{"x", "y"} {
			if _, err := s.Release(id); err != nil {
				t.Fatal(err)
			}
		}
		if got := ids(s.Moves(), allocID); !slices.Equal(got, tc.want) {
			t.Errorf("rules %d: moves %v; want %v", tc.rules, got, tc.want)
		}
	}
}

// A run of one node whose burst grant waits for stock moves onto a base
// machine that came free under UnfilledRules; under the rules before, it
// stayed until it acquired.
func TestUnfilledBurstRunMovesToFreeBase(t *testing.T) {
	for _, tc := range []struct {
		rules Rules
		want  []string
	}{{UnfilledGangRules, nil}, {UnfilledRules, []string{"r"}}} {
		s := New(gangConfig(machines([]int{1}), cloud("c", 0)))
		s.Rules = tc.rules
		mustEnqueue(t, s, t0, job("x", 90, 1, spec.TierCritical), job("r", 50, 1, spec.TierFlexible))
		s.Admit(t0, nil)
		if a := s.running("r"); a.Layer != BurstLayer || a.Acquired() {
			t.Fatalf("r is %+v; want on burst, not acquired, while base is taken", a)
		}
		if _, err := s.Release("x"); err != nil {
			t.Fatal(err)
		}
		if got := ids(s.Moves(), allocID); !slices.Equal(got, tc.want) {
			t.Errorf("rules %d: moves %v; want %v", tc.rules, got, tc.want)
		}
	}
}
