package admission

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"refuel/pkg/pool"
	"refuel/pkg/spec"
)

// carriedInput is what the pool workflow hands its next generation: the
// pools file beside the carry (workflows.PoolInput, less its counters).
func carriedInput(t testing.TB, s *State, at time.Time) []byte {
	t.Helper()
	data, err := json.Marshal(struct {
		Config pool.Config `json:"config"`
		Carry  *Carry      `json:"carry"`
	}{s.Config, s.Carry(at)})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// wholeInput is what generations handed on before the carry: the pools
// file beside the whole state.
func wholeInput(t testing.TB, s *State) []byte {
	t.Helper()
	data, err := json.Marshal(struct {
		Config pool.Config `json:"config"`
		State  *State      `json:"state"`
	}{s.Config, s})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestCarryGivesBackAnEqualState(t *testing.T) {
	s := New(fleet{machines: 40, gpus: 8, zones: []string{"dc-1", "dc-2"}, pools: 2, burstCap: 30}.config())
	far, spread := false, true
	gangs := []Request{
		{ID: "gang-base", Owner: "gang-base", Kind: Training, Priority: 100, Tier: spec.TierCritical, Resources: spec.Resources{GPUs: 8, Nodes: 3}},
		{ID: "gang-burst", Owner: "gang-burst", Kind: Training, Priority: 100, Tier: spec.TierFlexible, Resources: spec.Resources{GPUs: 1, Nodes: 4, SameZone: &far, InstanceTypes: []string{"g5.xlarge"}}},
		{ID: "gang-waits", Kind: Training, Priority: 0, Tier: spec.TierFlexible, Resources: spec.Resources{GPUs: 8, Nodes: 200, SameZone: &spread, Zones: []string{}}},
	}
	for _, g := range gangs {
		if err := s.Enqueue(g, t0); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Admit(t0, nil); len(got) != 2 || len(got[1].Nodes) != 4 || got[1].Layer != BurstLayer {
		t.Fatalf("gangs admitted: %+v", got)
	}
	if err := s.BindNode("gang-burst", 2, s.running("gang-burst").Offerings[1]); err != nil {
		t.Fatal(err)
	}
	now := crowdInto(t, s, 300)
	if err := s.MarkYielding(s.Running[5].Request.ID); err != nil {
		t.Fatal(err)
	}
	for i, r := range s.Waiting {
		switch i % 3 {
		case 0:
			_ = s.Pause(r.ID, now.Add(-time.Minute))
		case 1:
			_ = s.Pause(r.ID, now.Add(-time.Hour))
			_ = s.Resume(r.ID, now)
		}
	}
	s.ReservedSince, s.ReserveAgain = now.Add(-time.Minute), now.Add(time.Hour)
	s.SetJoined(pool.Node{Name: "joined-1", InstanceType: "a100-8x", GPUs: 8}, NodeReady)
	s.SetJoined(pool.Node{Name: "joined-2", InstanceType: "a100-8x", GPUs: 8}, NodeDraining)
	if len(s.Waiting) < 10 || len(s.Running) < 100 {
		t.Fatalf("fixture: %d waiting, %d running", len(s.Waiting), len(s.Running))
	}
	got := carried(s, now.Add(time.Hour))
	if diff := cmp.Diff(got, s, cmpopts.IgnoreUnexported(State{}), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("carried state got(-), want(+):\n%s", diff)
	}
}

// TestCarrySize holds the carry of 5,000 requests to a quarter of
// Temporal's 2 MB payload limit (512 KiB). A quarter, because the same
// payload is written twice into the pool's history (the continue-as-new
// that ends a generation, the start of the next) against the 4 MB at
// which the server suggests continuing as new, and a generation needs
// room for its own events; and the pools file rides along. Ids are of
// the ~30 characters pipelines give runs; at the 128 allowed, the
// carry still stays below 2 MB.
func TestCarrySize(t *testing.T) {
	const bound = 512 << 10
	f := fleet{machines: 1000, gpus: 8, zones: []string{"dc-1", "dc-2", "dc-3", "dc-4"}, pools: 4, burstCap: 800}
	for _, n := range []int{1000, 5000} {
		s, now := crowd(t, f, n)
		checkCapacity(t, s)
		carry, whole := len(carriedInput(t, s, now)), len(wholeInput(t, s))
		t.Logf("%d requests (%d running, %d waiting): carry %d KiB, the whole state %d KiB", n, len(s.Running), len(s.Waiting), carry>>10, whole>>10)
		if n == 5000 && carry > bound {
			t.Errorf("the carry of %d requests is %d bytes; want at most %d", n, carry, bound)
		}
	}
	s, now := crowd(t, f, 5000)
	for i := range s.Waiting {
		s.Waiting[i].ID += strings.Repeat("x", spec.MaxIDLength-len(s.Waiting[i].ID))
	}
	for i := range s.Running {
		s.Running[i].Request.ID += strings.Repeat("x", spec.MaxIDLength-len(s.Running[i].Request.ID))
	}
	if carry := len(carriedInput(t, s, now)); carry >= 2<<20 {
		t.Errorf("the carry of 5000 requests with ids of %d characters is %d bytes; want below 2 MB", spec.MaxIDLength, carry)
	} else {
		t.Logf("5000 requests with ids of %d characters: carry %d KiB", spec.MaxIDLength, carry>>10)
	}
}

func TestCarryThatDoesNotHoldTogetherIsRefused(t *testing.T) {
	s, now := crowd(t, fleet{machines: 4, gpus: 8, pools: 1, burstCap: 4}, 12)
	cases := map[string]struct {
		edit  func(*Carry)
		field string
	}{
		"a column short":        {func(c *Carry) { c.Running.Seq = c.Running.Seq[1:] }, "running.seq"},
		"a shape out of range":  {func(c *Carry) { c.Running.Shape[0] = len(c.Shapes) }, "running.shape"},
		"a list out of range":   {func(c *Carry) { c.Running.Offerings[0] = len(c.OfferingLists) }, "running.offerings"},
		"an offering not there": {func(c *Carry) { c.OfferingLists[0] = append(c.OfferingLists[0], len(c.Offerings)) }, "offering_lists"},
		"a place not there":     {func(c *Carry) { c.Running.Place[0] = len(c.Places) }, "running.place"},
		"flags short":           {func(c *Carry) { c.Running.Bound = c.Running.Bound[1:] }, "running.bound"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := s.Carry(now)
			tc.edit(c)
			_, err := c.State(s.Config)
			var ce *CarryError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Errorf("error %v; want a *CarryError naming %s", err, tc.field)
			}
		})
	}
}

func BenchmarkCarry(b *testing.B) {
	s, now := crowd(b, fleet{machines: 1000, gpus: 8, zones: []string{"dc-1", "dc-2"}, pools: 4, burstCap: 800}, 5000)
	for b.Loop() {
		data, err := json.Marshal(s.Carry(now))
		if err != nil {
			b.Fatal(err)
		}
		var c Carry
		if err := json.Unmarshal(data, &c); err != nil {
			b.Fatal(err)
		}
		if _, err := c.State(s.Config); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(data)), "bytes")
	}
}
