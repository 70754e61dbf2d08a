package admission

import (
	"fmt"
	"testing"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/pool"
	"refuel/pkg/spec"
)

// fleet builds pools files of the size platforms run: counted base
// machines spread over zones, and burst pools of many offerings.
type fleet struct {
	machines, gpus int      // base machines of gpus GPUs each
	zones          []string // the base zones, machines dealt round-robin
	pools          int      // burst pools of 36 offerings each
	burstCap       int      // max_instances of each pool, 0 for none
}

func (f fleet) config() pool.Config {
	c := pool.Config{Base: pool.BaseGroup{Name: "dc"}}
	zones := f.zones
	if len(zones) == 0 {
		zones = []string{"dc-1"}
	}
	for i, z := range zones {
		n := f.machines / len(zones)
		if i < f.machines%len(zones) {
			n++
		}
		if n > 0 {
			c.Base.Counts = append(c.Base.Counts, pool.BaseCount{InstanceType: fmt.Sprintf("a100-%dx", f.gpus), GPUs: f.gpus, Count: n, Zone: z, PricePerHour: 1.2 * float64(f.gpus)})
		}
	}
	for p := range f.pools {
		bp := pool.BurstPool{Name: fmt.Sprintf("cloud-%d", p), MaxInstances: f.burstCap}
		for _, z := range []string{"a", "b", "c"} {
			for _, it := range []struct {
				name     string
				gpus     int
				spot, od float64
			}{{"g5.xlarge", 1, 0.45, 1.0}, {"g5.12xlarge", 4, 2.1, 5.6}, {"p4d.24xlarge", 8, 12, 32}, {"p5.48xlarge", 8, 30, 98}, {"g6.xlarge", 1, 0.4, 0.8}, {"g6.12xlarge", 4, 1.9, 4.6}} {
				for _, m := range []capacity.Market{capacity.Spot, capacity.OnDemand} {
					price := it.od
					if m == capacity.Spot {
						price = it.spot
					}
					bp.Offerings = append(bp.Offerings, capacity.Offering{Provider: fmt.Sprintf("cloud%d", p), InstanceType: it.name, Zone: fmt.Sprintf("region-%d%s", p, z), Market: m, GPUs: it.gpus, PricePerHour: price + float64(p)/100})
				}
			}
		}
		c.Burst = append(c.Burst, bp)
	}
	c.Normalize()
	if err := c.Validate(); err != nil {
		panic(err)
	}
	return c
}

// realisticID is an id of the length pipelines give runs: team, sweep,
// hyperparameters and a counter, about 30 characters.
func realisticID(i int) string {
	return fmt.Sprintf("%s-sweep-lr3e-4-bs%d-%05d", []string{"vision", "speech", "llm", "recsys"}[i%4], 64<<(i%3), i)
}

// request is the i-th of a mixed crowd: teams, tiers, priorities and
// sizes vary, a fifth restrict their zones, a tenth are service replicas.
func crowdRequest(i int) Request {
	r := Request{ID: realisticID(i), Kind: Training, Team: []string{"vision", "speech", "llm", "recsys"}[i%4], Priority: (i * 37) % 101,
		Tier: spec.Tiers[i%len(spec.Tiers)], Resources: spec.Resources{GPUs: []int{1, 1, 1, 4, 8}[i%5]}}
	r.Owner = r.ID
	switch {
	case i%10 == 9:
		r.Kind, r.Owner, r.ID, r.Tier = Service, "chat", fmt.Sprintf("chat/r%d", i), spec.TierCritical
	case i%5 == 0:
		r.Resources.Zones = []string{"region-0a", "region-0b"}
	}
	return r
}

// crowd enqueues n requests a second apart and admits after each, as the
// pool does, then binds half the burst allocations.
func crowd(t testing.TB, f fleet, n int) (*State, time.Time) {
	t.Helper()
	s := New(f.config())
	return s, crowdInto(t, s, n)
}

// crowdInto is crowd on a state of one's own; it returns the time of the
// last request.
func crowdInto(t testing.TB, s *State, n int) time.Time {
	t.Helper()
	now := t0
	for i := range n {
		now = t0.Add(time.Duration(i) * time.Second)
		if err := s.Enqueue(crowdRequest(i), now); err != nil {
			t.Fatal(err)
		}
		s.Admit(now, nil)
	}
	for i, a := range s.Running {
		if a.Layer == BurstLayer && i%2 == 0 {
			if err := s.BindNode(a.Request.ID, 0, a.Offerings[0]); err != nil {
				t.Fatal(err)
			}
		}
	}
	return now
}

// checkCapacity fails t if the state holds more than there is: GPUs of a
// machine, instances of a capped pool, a gang's nodes on one machine or
// across zones it may not span, or an id twice.
func checkCapacity(t testing.TB, s *State) {
	t.Helper()
	used := map[string]int{}
	held := map[string]int{}
	seen := map[string]bool{}
	zoneOf := map[string]string{}
	for _, n := range s.Nodes {
		zoneOf[n.Name] = n.Zone
	}
	for _, r := range s.Waiting {
		if seen[r.ID] {
			t.Errorf("%s is queued twice", r.ID)
		}
		seen[r.ID] = true
	}
	for _, a := range s.Running {
		if seen[a.Request.ID] {
			t.Errorf("%s is queued or running twice", a.Request.ID)
		}
		seen[a.Request.ID] = true
		if want := s.nodesOf(a.Request); a.NodeCount() != want {
			t.Errorf("%s holds %d nodes; it asked for %d", a.Request.ID, a.NodeCount(), want)
		}
		if a.Layer == BurstLayer {
			held[a.Pool] += a.NodeCount()
			continue
		}
		machines := map[string]bool{}
		zones := map[string]bool{}
		for _, m := range a.machines() {
			if machines[m] {
				t.Errorf("%s has two nodes on %s", a.Request.ID, m)
			}
			machines[m] = true
			zones[zoneOf[m]] = true
			used[m] += a.GPUs()
		}
		if a.Request.Resources.OneZone() && len(zones) > 1 {
			t.Errorf("%s spans zones %v", a.Request.ID, zones)
		}
	}
	for _, n := range s.Nodes {
		if used[n.Name] > n.GPUs {
			t.Errorf("%s has %d GPUs allocated of %d", n.Name, used[n.Name], n.GPUs)
		}
	}
	for _, p := range s.Config.Burst {
		if p.MaxInstances > 0 && held[p.Name] > p.MaxInstances {
			t.Errorf("pool %s holds %d instances, capped at %d", p.Name, held[p.Name], p.MaxInstances)
		}
	}
}
