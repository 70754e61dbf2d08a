package admission

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"refuel/pkg/capacity"
	"refuel/pkg/pool"
	"refuel/pkg/spec"
)

// recordedDecisions holds, per random scenario, a hash of every decision
// the one-node rules made on it when they were written. Pools recorded
// before gangs replay by those rules, so they must decide exactly alike
// however the code that decides changes. Record anew (only for a change
// meant to decide differently, which then needs a new workflow version)
// with REFUEL_RECORD_DECISIONS=1 go test ./pkg/admission -run TestOneNodeDecisionsAsRecorded.
const recordedDecisions = "testdata/one-node-decisions.json"

func TestOneNodeDecisionsAsRecorded(t *testing.T) {
	got := map[string]string{}
	for seed := range uint64(300) {
		trace := scenario(seed, false)
		sum := sha256.Sum256([]byte(strings.Join(trace, "\n")))
		got[fmt.Sprint(seed)] = fmt.Sprintf("%d %s", len(trace), hex.EncodeToString(sum[:8]))
	}
	if os.Getenv("REFUEL_RECORD_DECISIONS") != "" {
		data, err := json.MarshalIndent(got, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(recordedDecisions, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(recordedDecisions)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]string
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	for seed, w := range want {
		if got[seed] != w {
			t.Errorf("scenario %s decided otherwise than recorded: got %s, want %s (print it with scenario(%s))", seed, got[seed], w, seed)
		}
	}
}

// TestDecisionsSurviveTheCarry checks what continue-as-new relies on: a
// pool that hands its state on through a Carry after every event decides
// exactly as one that keeps it.
func TestDecisionsSurviveTheCarry(t *testing.T) {
	for seed := range uint64(60) {
		if diff := cmp.Diff(scenario(seed, true), scenario(seed, false)); diff != "" {
			t.Fatalf("scenario %d: carried got(-), kept want(+):\n%s", seed, diff)
		}
	}
}

// scenario drives a random pool through requests, releases, binds,
// yields, pauses, priority changes and hours of time, deciding as the
// pool workflow does after every event, and returns every decision.
// With carry, the state goes through its Carry and JSON between events.
func scenario(seed uint64, carry bool) []string {
	rng := rand.New(rand.NewPCG(seed, 7))
	s := New(randomConfig(rng))
	s.Rules = OneNodeRules
	now := t0
	var trace []string
	log := func(format string, args ...any) { trace = append(trace, fmt.Sprintf(format, args...)) }
	next := 0
	for step := range 80 {
		now = now.Add(time.Duration(rng.IntN(90)) * time.Minute)
		switch op := rng.IntN(12); {
		case op < 4 || len(s.Waiting)+len(s.Running) == 0:
			r := randomRequest(rng, fmt.Sprintf("r%d", next))
			next++
			log("enqueue %s %v", r.ID, s.Enqueue(r, now))
		case op == 4 && len(s.Running) > 0:
			a := s.Running[rng.IntN(len(s.Running))]
			_, err := s.Release(a.Request.ID)
			log("release %s %v", a.Request.ID, err)
		case op == 5 && len(s.Waiting) > 0:
			id := s.Waiting[rng.IntN(len(s.Waiting))].ID
			log("cancel %s %v", id, s.Cancel(id))
		case op == 6:
			for _, a := range s.Running {
				if a.Yielding {
					log("requeue %s %v", a.Request.ID, s.Requeue(a.Request.ID, now))
					break
				}
			}
		case op == 7 && len(s.Running) > 0:
			a := s.Running[rng.IntN(len(s.Running))]
			if a.Layer == BurstLayer && !a.Bound && len(a.Offerings) > 0 {
				o := a.Offerings[rng.IntN(len(a.Offerings))]
				log("bind %s %s %v", a.Request.ID, o.Key(), s.BindNode(a.Request.ID, 0, o))
			}
		case op == 8 && len(s.Waiting) > 0:
			id := s.Waiting[rng.IntN(len(s.Waiting))].ID
			if rng.IntN(2) == 0 {
				log("pause %s %v", id, s.Pause(id, now))
			} else {
				log("resume %s %v", id, s.Resume(id, now))
			}
		case op == 9 && len(s.Waiting)+len(s.Running) > 0:
			id := fmt.Sprintf("r%d", rng.IntN(next))
			p := rng.IntN(101)
			log("priority %s %d %v", id, p, s.SetPriority(id, p))
		case op == 10 && step%20 == 10:
			s.Reconfigure(randomConfig(rng))
			log("reconfigure %d nodes %d pools", len(s.Nodes), len(s.Config.Burst))
		}
		var unavailable []string
		if rng.IntN(5) == 0 && len(s.Config.Burst) > 0 {
			p := s.Config.Burst[rng.IntN(len(s.Config.Burst))]
			unavailable = append(unavailable, p.Offerings[rng.IntN(len(p.Offerings))].Key())
		}
		decide(s, now, unavailable, log)
		if carry {
			s = carried(s, now)
			s.Rules = OneNodeRules
		}
	}
	return trace
}

// carried is s after a trip through its Carry in JSON.
func carried(s *State, at time.Time) *State {
	data, err := json.Marshal(s.Carry(at))
	if err != nil {
		panic(err)
	}
	var c Carry
	if err := json.Unmarshal(data, &c); err != nil {
		panic(err)
	}
	out, err := c.State(s.Config)
	if err != nil {
		panic(err)
	}
	return out
}

// decide is the pool workflow's schedule: admit what fits, preempt for
// what does not, move burst training to freed base (and under GangRules
// take back unfilled burst grants).
func decide(s *State, now time.Time, unavailable []string, log func(string, ...any)) {
	for {
		granted := s.Admit(now, unavailable)
		if len(granted) == 0 {
			break
		}
		for _, a := range granted {
			var keys []string
			for _, o := range a.Offerings {
				keys = append(keys, o.Key())
			}
			log("grant %s %s %s %s %s", a.Request.ID, a.Layer, a.Node, a.Pool, strings.Join(keys, ","))
		}
	}
	if s.Rules >= GangRules {
		for _, p := range s.Preempt(now, unavailable) {
			log("preempt %s for %s", p.Victim.Request.ID, p.For.ID)
		}
	} else {
		for _, r := range s.Queue(now) {
			if r.Paused {
				continue
			}
			victims, ok := s.Victims(r, unavailable, now)
			log("victims for %s %v %v", r.ID, ids(victims, allocID), ok)
			for _, v := range victims {
				_ = s.MarkYielding(v.Request.ID)
			}
		}
	}
	moves := s.Moves()
	log("moves %v", ids(moves, allocID))
	for _, a := range moves {
		_ = s.MarkYielding(a.Request.ID)
	}
	for _, a := range s.Unready(now) {
		log("unready %s", a.Request.ID)
		_ = s.MarkYielding(a.Request.ID)
	}
	log("queue %v", ids(s.Queue(now), reqID))
}

func randomConfig(rng *rand.Rand) pool.Config {
	c := pool.Config{Base: pool.BaseGroup{Name: "dc"}, PreemptGap: rng.IntN(3) * 5, AgingPerHour: float64(rng.IntN(3) * 10)}
	if rng.IntN(3) == 0 {
		c.PreemptAfter = spec.Duration(time.Duration(rng.IntN(3)) * time.Hour)
	}
	zones := []string{"", "dc-1", "dc-2"}
	for i := range rng.IntN(7) {
		g := []int{1, 2, 4, 8}[rng.IntN(4)]
		c.Base.Nodes = append(c.Base.Nodes, pool.BaseNode{Name: fmt.Sprintf("m%d", i), InstanceType: fmt.Sprintf("gpu.%dx", g), GPUs: g, Zone: zones[rng.IntN(3)]})
	}
	catalog := rng.Perm(24)
	for i := range rng.IntN(4) {
		p := pool.BurstPool{Name: fmt.Sprintf("p%d", i), MaxInstances: rng.IntN(4)}
		for range 1 + rng.IntN(4) {
			if len(catalog) == 0 {
				break
			}
			k := catalog[0]
			catalog = catalog[1:]
			g := []int{1, 4, 8}[k%3]
			m := []capacity.Market{capacity.Spot, capacity.OnDemand}[(k/3)%2]
			p.Offerings = append(p.Offerings, capacity.Offering{Provider: "cloud", InstanceType: fmt.Sprintf("gpu.%dx", g), Zone: []string{"za", "zb"}[(k/6)%2],
				Market: m, GPUs: g, PricePerHour: float64(g) * []float64{0.5, 1.5}[(k/3)%2] * float64(1+k/12)})
		}
		if len(p.Offerings) > 0 {
			c.Burst = append(c.Burst, p)
		}
	}
	if len(c.Base.Nodes) == 0 && len(c.Burst) == 0 {
		c.Base.Nodes = []pool.BaseNode{{Name: "m0", InstanceType: "gpu.1x", GPUs: 1}}
	}
	c.Normalize()
	return c
}

func randomRequest(rng *rand.Rand, id string) Request {
	r := Request{ID: id, Owner: id, Kind: Training, Priority: rng.IntN(11) * 10, Tier: spec.Tiers[rng.IntN(len(spec.Tiers))],
		Resources: spec.Resources{GPUs: []int{1, 1, 2, 4, 8}[rng.IntN(5)]}}
	if rng.IntN(5) == 0 {
		r.Kind, r.Owner = Service, "svc"
	}
	switch rng.IntN(6) {
	case 0:
		r.Resources.Zones = []string{[]string{"za", "zb", "dc-1"}[rng.IntN(3)]}
	case 1:
		r.Resources.InstanceTypes = []string{"gpu.8x"}
	case 2:
		r.Resources.MaxPricePerHour = 4
	}
	return r
}
