package admission

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

// thousand is 1,000 one-GPU training requests, the i-th at priority
// priority(i) and tier tier(i), enqueued at at(i).
func thousand(priority func(int) int, tier func(int) spec.Tier, at func(int) time.Time) []timedRequest {
	out := make([]timedRequest, 1000)
	for i := range out {
		id := fmt.Sprintf("run-%04d", i)
		out[i] = timedRequest{Request{ID: id, Owner: id, Kind: Training, Priority: priority(i), Tier: tier(i), Resources: spec.Resources{GPUs: 1}}, at(i)}
	}
	return out
}

type timedRequest struct {
	Request
	at time.Time
}

func same[T any](v T) func(int) T { return func(int) T { return v } }

// byRank is the requests in the order they should be admitted: highest
// effective priority at now first, then first come.
func byRank(s *State, rs []timedRequest, now time.Time) []string {
	rs = slices.Clone(rs)
	eff := func(r timedRequest) float64 {
		return float64(r.Priority) + s.Config.AgingPerHour*now.Sub(r.at).Hours()
	}
	slices.SortStableFunc(rs, func(a, b timedRequest) int { return cmp.Compare(eff(b), eff(a)) })
	return ids(rs, func(r timedRequest) string { return r.ID })
}

// TestAdmissionAt1000 admits 1,000 requests onto 200 base machines and a
// burst pool capped at 300 in one pass, and checks each against what the
// rules say, worked out here independently.
func TestAdmissionAt1000(t *testing.T) {
	f := fleet{machines: 200, gpus: 1, zones: []string{"dc-1", "dc-2"}, pools: 1, burstCap: 300}
	cases := map[string]struct {
		requests []timedRequest
		paused   func(i int) bool
		now      time.Time
	}{
		"by priority, first come among equals": {
			requests: thousand(func(i int) int { return i % 100 }, same(spec.TierDeadline), same(t0)),
			now:      t0,
		},
		"aging puts the long-waiting low ahead": {
			requests: thousand(func(i int) int { return []int{10, 50}[i%2] }, same(spec.TierFlexible),
				func(i int) time.Time { return t0.Add(time.Duration(i%2) * 5 * time.Hour) }),
			now: t0.Add(6 * time.Hour),
		},
		"tiers choose their markets": {
			requests: thousand(func(i int) int { return (i * 7) % 101 }, func(i int) spec.Tier { return []spec.Tier{spec.TierCritical, spec.TierFlexible}[i%2] },
				func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }),
			now: t0.Add(time.Hour),
		},
		"paused requests keep their place and are passed over": {
			requests: thousand(func(i int) int { return i % 100 }, same(spec.TierDeadline), same(t0)),
			paused:   func(i int) bool { return i%3 == 0 },
			now:      t0,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := New(f.config())
			for i, r := range tc.requests {
				if err := s.Enqueue(r.Request, r.at); err != nil {
					t.Fatal(err)
				}
				if tc.paused != nil && tc.paused(i) {
					if err := s.Pause(r.ID, r.at); err != nil {
						t.Fatal(err)
					}
				}
			}
			rank := byRank(s, tc.requests, tc.now)
			if diff := gocmp.Diff(ids(s.Queue(tc.now), reqID), rank); diff != "" {
				t.Fatalf("queue order got(-), want(+):\n%s", diff)
			}
			var eligible []string
			for _, id := range rank {
				if i := slices.IndexFunc(tc.requests, func(r timedRequest) bool { return r.ID == id }); tc.paused == nil || !tc.paused(i) {
					eligible = append(eligible, id)
				}
			}
			got := s.Admit(tc.now, nil)
			checkCapacity(t, s)
			if diff := gocmp.Diff(ids(got, allocID), eligible[:500]); diff != "" {
				t.Fatalf("admitted got(-), want(+) the first 500 in rank not paused:\n%s", diff)
			}
			for i, a := range got {
				if wantBase := i < 200; (a.Layer == BaseLayer) != wantBase {
					t.Errorf("%s (admitted %d-th) on %s; want base for the first 200, then burst", a.Request.ID, i+1, a.Layer)
				}
				if a.Layer == BurstLayer {
					for _, o := range a.Offerings {
						if (o.Market == capacity.Spot && !a.Request.Tier.AllowsSpot()) || (o.Market == capacity.OnDemand && !a.Request.Tier.AllowsOnDemand()) {
							t.Errorf("%s of tier %s may try %s", a.Request.ID, a.Request.Tier, o.Key())
						}
					}
					if a.Request.Tier.AllowsSpot() && a.Offerings[0].Market != capacity.Spot {
						t.Errorf("%s of tier %s tries %s first; want spot first", a.Request.ID, a.Request.Tier, a.Offerings[0].Key())
					}
				}
			}
			if len(s.Waiting) != 500 {
				t.Errorf("%d waiting; want 500", len(s.Waiting))
			}
		})
	}
}

// TestPreemptionAt1000: 1,000 training runs fill 200 base machines and a
// burst pool of 800; 100 replicas of a priority-90 service arrive. The
// pool preempts exactly the 100 lowest-priority runs, one for each
// replica, never a run it then cannot use, and once they have yielded
// the replicas are admitted and the runs wait again.
func TestPreemptionAt1000(t *testing.T) {
	s := New(fleet{machines: 200, gpus: 1, pools: 1, burstCap: 800}.config())
	for _, r := range thousand(func(i int) int { return i % 50 }, same(spec.TierDeadline), same(t0)) {
		if err := s.Enqueue(r.Request, r.at); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(s.Admit(t0, nil)); got != 1000 {
		t.Fatalf("admitted %d of 1000", got)
	}
	now := t0.Add(time.Hour)
	for i := range 100 {
		r := Request{ID: fmt.Sprintf("chat/r%d", i), Owner: "chat", Kind: Service, Priority: 90, Tier: spec.TierCritical, Resources: spec.Resources{GPUs: 1}}
		if err := s.Enqueue(r, now); err != nil {
			t.Fatal(err)
		}
	}
	var victims []Allocation
	decide(s, now, nil, func(format string, args ...any) {})
	for _, a := range s.Running {
		if a.Yielding {
			victims = append(victims, a)
		}
	}
	if len(victims) != 100 {
		t.Fatalf("%d yielding; want 100, one for each replica", len(victims))
	}
	for _, v := range victims {
		// The lowest 100 priorities of i%50 are 0..4, 20 runs each.
		if v.Request.Priority > 4 {
			t.Errorf("%s of priority %d preempted; the 100 lowest are of priorities 0..4", v.Request.ID, v.Request.Priority)
		}
	}
	for _, v := range victims {
		if err := s.Requeue(v.Request.ID, now); err != nil {
			t.Fatal(err)
		}
	}
	got := s.Admit(now, nil)
	checkCapacity(t, s)
	if len(got) != 100 || slices.ContainsFunc(got, func(a Allocation) bool { return a.Request.Kind != Service }) {
		t.Errorf("admitted %v; want the 100 replicas", ids(got, allocID))
	}
	if len(s.Waiting) != 100 || slices.ContainsFunc(s.Waiting, func(r Request) bool { return r.Kind != Training }) {
		t.Errorf("waiting %v; want the 100 preempted runs", ids(s.Waiting, reqID))
	}
}

// TestMovesAt1000: 200 runs on base and 800 bound on burst; 150 base
// machines come free while nothing waits. The 150 most expensive burst
// runs move (yield, to be admitted on base), no more, and once requeued
// they are placed on base.
func TestMovesAt1000(t *testing.T) {
	s := New(fleet{machines: 200, gpus: 1, pools: 1, burstCap: 800}.config())
	for _, r := range thousand(func(i int) int { return 50 }, same(spec.TierDeadline), same(t0)) {
		if err := s.Enqueue(r.Request, r.at); err != nil {
			t.Fatal(err)
		}
	}
	s.Admit(t0, nil)
	var base []string
	for i, a := range s.Running {
		if a.Layer == BaseLayer {
			base = append(base, a.Request.ID)
			continue
		}
		// Bound to offerings of different prices.
		if err := s.BindNode(a.Request.ID, 0, a.Offerings[i%len(a.Offerings)]); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range base[:150] {
		if _, err := s.Release(id); err != nil {
			t.Fatal(err)
		}
	}
	moves := s.Moves()
	if len(moves) != 150 {
		t.Fatalf("%d moves; want 150, one for each freed machine", len(moves))
	}
	cheapestMoved := slices.MinFunc(moves, func(a, b Allocation) int { return cmp.Compare(price(a), price(b)) })
	for _, a := range s.Running {
		if a.Layer == BurstLayer && !slices.ContainsFunc(moves, func(m Allocation) bool { return m.Request.ID == a.Request.ID }) && price(a) > price(cheapestMoved) {
			t.Errorf("%s at $%g/h stays on burst while %s at $%g/h moves", a.Request.ID, price(a), cheapestMoved.Request.ID, price(cheapestMoved))
		}
	}
	for _, m := range moves {
		if err := s.MarkYielding(m.Request.ID); err != nil {
			t.Fatal(err)
		}
	}
	if again := s.Moves(); len(again) != 0 {
		t.Errorf("%d more moves while the freed machines are spoken for", len(again))
	}
	for _, m := range moves {
		if err := s.Requeue(m.Request.ID, t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	got := s.Admit(t0.Add(time.Hour), nil)
	checkCapacity(t, s)
	if len(got) != 150 || slices.ContainsFunc(got, func(a Allocation) bool { return a.Layer != BaseLayer }) {
		t.Errorf("requeued runs admitted as %d allocations, not all on base", len(got))
	}
}

// TestGangsAt1000: 250 gangs of 4 fill 1,000 machines in 5 zones exactly,
// each gang in one zone on 4 machines of its own; the next gang waits
// until one ends, then takes its machines.
func TestGangsAt1000(t *testing.T) {
	s := New(fleet{machines: 1000, gpus: 8, zones: []string{"z1", "z2", "z3", "z4", "z5"}}.config())
	gang := func(i int) Request {
		id := fmt.Sprintf("gang-%03d", i)
		return Request{ID: id, Owner: id, Kind: Training, Priority: 50, Tier: spec.TierCritical, Resources: spec.Resources{GPUs: 8, Nodes: 4}}
	}
	for i := range 251 {
		if err := s.Enqueue(gang(i), t0); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Admit(t0, nil); len(got) != 250 {
		t.Fatalf("admitted %d gangs; want 250", len(got))
	}
	checkCapacity(t, s)
	if diff := gocmp.Diff(ids(s.Waiting, reqID), []string{"gang-250"}); diff != "" {
		t.Fatalf("waiting got(-), want(+):\n%s", diff)
	}
	freed := s.Running[123]
	if _, err := s.Release(freed.Request.ID); err != nil {
		t.Fatal(err)
	}
	got := s.Admit(t0.Add(time.Minute), nil)
	if len(got) != 1 || !slices.Equal(got[0].machines(), freed.machines()) {
		t.Errorf("admitted %+v; want gang-250 on %v", got, freed.machines())
	}
	checkCapacity(t, s)
}

// BenchmarkSchedulePass is the pool's schedule after a signal: admit
// what fits, look for victims for every request left waiting, look for
// moves, with the pool holding n requests.
func BenchmarkSchedulePass(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s, now := crowd(b, fleet{machines: 1000, gpus: 8, zones: []string{"dc-1", "dc-2", "dc-3", "dc-4"}, pools: 4, burstCap: 800}, n)
			for b.Loop() {
				decide(s, now, nil, func(string, ...any) {})
			}
		})
	}
}
