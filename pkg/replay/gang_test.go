package replay

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"refuel/pkg/policy"
	"refuel/pkg/spec"
	"refuel/pkg/trace"
)

// The traces under testdata are made up for these tests, 60 ticks of 10
// minutes each: counts_v100 counts the instances in stock (0 to 4),
// onenode_v100 is a one-node trace of 0s and 1s.
func loadMarket(t *testing.T, names ...string) *Market {
	t.Helper()
	var ts []*trace.Trace
	for _, n := range names {
		tr, err := trace.Load("testdata/" + n + ".json")
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, tr)
	}
	m, err := NewMarket(ts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// gangJob is 3 h of work due in 5 h, for a gang of nodes.
func gangJob(nodes int) Job {
	return Job{Tier: spec.TierDeadline, Work: 3 * time.Hour, Deadline: 5 * time.Hour, RestartOverhead: 12 * time.Minute,
		SpotPrice: 0.9701, OnDemandPrice: 3.06, Nodes: nodes}
}

// replayPolicy replays a window under a policy, the optimum included.
func replayPolicy(t *testing.T, m *Market, job Job, start int, p policy.Name) Result {
	t.Helper()
	var d Decider = NewOnline(job.Tier, p)
	if p == policy.Optimal {
		plan, err := Optimal(m, job, start)
		if err != nil {
			t.Fatal(err)
		}
		d = plan
	}
	r, err := Run(m, job, start, d)
	if err != nil {
		t.Fatalf("%s from tick %d, %d nodes: %v", p, start, job.Nodes, err)
	}
	return r
}

func TestAGangFindsStockOnlyWhereTheCountHoldsEveryNode(t *testing.T) {
	m := loadMarket(t, "counts_v100")
	// Tick 6's point is 2: enough for one node or two, not for three.
	cases := map[string]struct {
		nodes   int
		inStock int // ticks of 60
		tick6   bool
	}{
		"one node":       {1, 55, true},
		"two nodes":      {2, 48, true},
		"three nodes":    {3, 40, false},
		"four nodes":     {4, 20, false},
		"more than peak": {5, 0, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n := 0
			for i := range m.Ticks() {
				if m.Available(0, i, tc.nodes) {
					n++
				}
			}
			if n != tc.inStock || m.Available(0, 6, tc.nodes) != tc.tick6 {
				t.Errorf("%d ticks in stock, tick 6 %v; want %d and %v", n, m.Available(0, 6, tc.nodes), tc.inStock, tc.tick6)
			}
			// Greedy takes spot at tick 6 exactly when the gang fits.
			r := replayPolicy(t, m, gangJob(tc.nodes), 6, policy.Greedy)
			if got := r.Steps[0].Choice == (policy.Choice{Market: "spot", Zone: "counts"}); got != tc.tick6 {
				t.Errorf("greedy's first choice %s; want spot %v", r.Steps[0].Choice, tc.tick6)
			}
		})
	}
}

func TestAOneNodeTraceIsAlikeForAnyGangButTheBill(t *testing.T) {
	// A second one-node zone, out of step with the first.
	other := &trace.Trace{Name: "b_v100", Zone: "b", Gap: 10 * time.Minute}
	for i := range 60 {
		other.Points = append(other.Points, (i/4)%2)
	}
	one := loadMarket(t, "onenode_v100")
	two, err := NewMarket([]*trace.Trace{mustLoad(t, "onenode_v100"), other})
	if err != nil {
		t.Fatal(err)
	}
	for _, mk := range []struct {
		name string
		m    *Market
		job  func(int) Job
	}{
		{"one zone", one, gangJob},
		{"two priced zones", two, func(n int) Job {
			j := gangJob(n)
			j.Zones = []ZonePrice{{Region: "r0", Spot: 0.9, OnDemand: 3.06}, {Region: "r1", Spot: 0.7, OnDemand: 3.3}}
			return j
		}},
	} {
		for _, p := range policy.Names {
			for _, start := range []int{0, 12, 30} {
				t.Run(fmt.Sprintf("%s/%s/%d", mk.name, p, start), func(t *testing.T) {
					r1 := replayPolicy(t, mk.m, mk.job(1), start, p)
					r4 := replayPolicy(t, mk.m, mk.job(4), start, p)
					if !r1.DeadlineMet || !r4.DeadlineMet {
						t.Fatalf("deadline met %v with one node, %v with four", r1.DeadlineMet, r4.DeadlineMet)
					}
					if math.Abs(r4.Cost-4*r1.Cost) > 1e-9*r4.Cost || r4.Cost/mk.job(4).OnDemandCost() != r1.Cost/mk.job(1).OnDemandCost() {
						t.Errorf("cost $%v with four nodes, $%v with one; want four times as much, the same share of on-demand", r4.Cost, r1.Cost)
					}
					for i := range r4.Steps {
						r4.Steps[i].Cost /= 4
					}
					r4.Cost /= 4
					r4.ProbeUSD /= 4
					if d := cmp.Diff(r4, r1, cmpopts.EquateApprox(1e-12, 0)); d != "" {
						t.Errorf("four nodes (costs divided by four) (-) against one (+):\n%s", d)
					}
				})
			}
		}
	}
}

func mustLoad(t *testing.T, name string) *trace.Trace {
	t.Helper()
	tr, err := trace.Load("testdata/" + name + ".json")
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestAGangsOptimumCostsAtLeastItsNodesTimesOneNodes(t *testing.T) {
	m := loadMarket(t, "counts_v100")
	dearer := 0
	for start := 0; start <= 30; start += 3 {
		t.Run(fmt.Sprint(start), func(t *testing.T) {
			one := replayPolicy(t, m, gangJob(1), start, policy.Optimal)
			for _, n := range []int{2, 3, 4} {
				job := gangJob(n)
				opt := replayPolicy(t, m, job, start, policy.Optimal)
				if !opt.DeadlineMet || opt.Cost < float64(n)*one.Cost*(1-1e-12) {
					t.Errorf("%d nodes: optimum $%.4f (deadline met %v); want at least %d × one node's $%.4f", n, opt.Cost, opt.DeadlineMet, n, one.Cost)
				}
				if opt.Cost > float64(n)*one.Cost*(1+1e-9) {
					dearer++
				}
				// No policy beats the gang's optimum on the gang's stock.
				for _, p := range []policy.Name{policy.Greedy, policy.UniformProgress, policy.Refuel, policy.OnDemandOnly} {
					if r := replayPolicy(t, m, job, start, p); r.DeadlineMet && r.Cost < opt.Cost*(1-1e-12) {
						t.Errorf("%d nodes: %s costs $%.4f, below the optimum's $%.4f", n, p, r.Cost, opt.Cost)
					}
				}
			}
		})
	}
	if dearer == 0 {
		t.Error("no window where a gang's optimum costs more than its nodes times one node's, though the counts fall below the gang")
	}
}

func TestOptimalMatchesBruteForceForGangsOnCounts(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 7))
	for n := range 120 {
		gap := time.Duration(2+rng.IntN(3)) * time.Second
		ovh := time.Duration(rng.IntN(6)) * time.Second
		zones := 1 + rng.IntN(2)
		ticks := 6 - zones
		work := time.Duration(1+rng.IntN(ticks*int(gap/time.Second)-1)) * time.Second
		deadline := min(work+ovh+time.Duration(rng.IntN(8))*time.Second, time.Duration(ticks)*gap)
		if deadline < work {
			continue
		}
		points := make([][]int, zones)
		for z := range points {
			for range ticks {
				points[z] = append(points[z], rng.IntN(5))
			}
			points[z][0] = 2 + rng.IntN(3) // a trace of counts, not of 0s and 1s
		}
		job := Job{Tier: spec.TierDeadline, Work: work, Deadline: deadline, RestartOverhead: ovh, SpotPrice: 0.97, OnDemandPrice: 3.06, Nodes: 1 + rng.IntN(4)}
		if zones == 2 && rng.IntN(2) == 0 {
			job.Zones = []ZonePrice{{Region: "r0", Spot: 0.5, OnDemand: 3}, {Region: "r1", Spot: 0.2, OnDemand: 3.2}}
			job.CheckpointGB, job.EgressUSDPerGB, job.TransferTime = 10, 0.01*float64(rng.IntN(3)), time.Duration(rng.IntN(3))*time.Second
		}
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			checkOptimal(t, market(t, gap, points...), job)
		})
	}
}

func TestAGangIsPreemptedWhenTheCountFallsBelowItsNodes(t *testing.T) {
	mk := market(t, 10*time.Minute, []int{3, 3, 2, 3, 3})
	cases := map[string]struct {
		nodes   int
		plan    Plan
		want    Result
		problem string // of a plan the model refuses
	}{
		"two nodes fit in 2: the plan moves to on-demand": {
			nodes: 2, plan: Plan{spot, spot, od, od},
			want: Result{Finished: true, DeadlineMet: true, Finish: 40 * time.Minute, Spot: 20 * time.Minute, OnDemand: 20 * time.Minute, Changeovers: 1, Starts: 2},
		},
		"three nodes: the drop to 2 preempts the gang": {
			nodes: 3, plan: Plan{spot, spot, od, od},
			want: Result{Finished: true, DeadlineMet: true, Finish: 40 * time.Minute, Spot: 20 * time.Minute, OnDemand: 20 * time.Minute, Preemptions: 1, Starts: 2},
		},
		"two nodes hold spot throughout": {
			nodes: 2, plan: Plan{spot, spot, spot, spot},
			want: Result{Finished: true, DeadlineMet: true, Finish: 40 * time.Minute, Spot: 40 * time.Minute, Starts: 1},
		},
		"three nodes cannot take spot at 2": {nodes: 3, plan: Plan{spot, spot, spot, spot}, problem: "tick 2: choice spot/z0 takes spot out of stock"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := Job{Tier: spec.TierDeadline, Work: 40 * time.Minute, Deadline: 50 * time.Minute, SpotPrice: 1, OnDemandPrice: 3, Nodes: tc.nodes}
			got, err := Run(mk, job, 0, tc.plan)
			var ce *ChoiceError
			if tc.problem != "" {
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.problem) {
					t.Fatalf("got %v; want a ChoiceError saying %q", err, tc.problem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.want.Cost = float64(tc.nodes) * (tc.want.Spot.Hours() + 3*tc.want.OnDemand.Hours())
			if d := cmp.Diff(got, tc.want, cmpopts.IgnoreFields(Result{}, "Steps"), cmpopts.EquateApprox(0, 1e-12)); d != "" {
				t.Errorf("got(-), want(+):\n%s", d)
			}
			if got.Steps[2].Preempted != (tc.want.Preemptions > 0) {
				t.Errorf("tick 2 preempted %v; want %v", got.Steps[2].Preempted, tc.want.Preemptions > 0)
			}
		})
	}
}

func TestJobNodesOutsideTheLimitIsRefused(t *testing.T) {
	for _, n := range []int{-1, spec.MaxNodes + 1} {
		j := gangJob(n)
		var je *JobError
		if err := j.Validate(); !errors.As(err, &je) || je.Field != "nodes" {
			t.Errorf("nodes %d: got %v; want a JobError naming nodes", n, err)
		}
	}
	for _, n := range []int{0, 1, spec.MaxNodes} {
		if err := gangJob(n).Validate(); err != nil {
			t.Errorf("nodes %d: %v", n, err)
		}
	}
}

func TestAGangsPolicySeesANodesShareOfTheMove(t *testing.T) {
	job := gangJob(4)
	job.Zones = []ZonePrice{{Region: "r0", Spot: 0.9, OnDemand: 3}, {Region: "r1", Spot: 0.5, OnDemand: 3}}
	job.CheckpointGB, job.EgressUSDPerGB = 50, 0.02
	meter, err := NewMeter(job, []string{"a", "b"}, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, view, _, err := meter.Begin([]bool{true, true})
	if err != nil {
		t.Fatal(err)
	}
	if view.Move.USD != 0.25 || view.Zones[1].SpotPrice != 0.5 {
		t.Errorf("the policy sees a move at $%v and spot at $%v/h; want a node's share, $0.25, and one node's price, $0.5/h", view.Move.USD, view.Zones[1].SpotPrice)
	}
}
