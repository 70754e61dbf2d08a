package replay

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"refuel/pkg/capacity"
	"refuel/pkg/policy"
	"refuel/pkg/spec"
)

// shrunk is spot in zone z0 on n nodes of the gang.
func shrunk(n int) policy.Choice { return policy.Choice{Market: capacity.Spot, Zone: "z0", Nodes: n} }

func TestAnElasticGangTrainsOnTheNodesInStock(t *testing.T) {
	// Ticks of 10 minutes; the gang of 4 needs 40 minutes of work, with
	// no restart overhead unless a case sets one. Spot held on more nodes
	// than a tick has in stock is preempted at its start, and the gang may
	// start again on fewer that very tick.
	mk := market(t, 10*time.Minute, []int{4, 3, 2, 1, 4, 4, 4, 4, 4})
	cases := map[string]struct {
		minNodes int
		overhead time.Duration
		plan     Plan
		want     Result
		nodeMin  float64 // node-minutes held, at $1 a node-hour
		problem  string  // of a plan the model refuses
	}{
		"shrinks to 3, is preempted at 2 and shrinks again, waits, grows back": {
			minNodes: 2, plan: Plan{spot, shrunk(3), shrunk(2), policy.None, spot, spot},
			// 10 + 7.5 + 5 minutes of the gang's work, then 17.5 more.
			want: Result{Finished: true, DeadlineMet: true, Finish: 57*time.Minute + 30*time.Second, Spot: 47*time.Minute + 30*time.Second,
				Shrunk: 20 * time.Minute, Preemptions: 3, Starts: 4},
			nodeMin: 160,
		},
		"holds 2 nodes through 3 and 2, is preempted at 1": {
			minNodes: 2, plan: Plan{shrunk(2), shrunk(2), shrunk(2), policy.None, spot, spot, spot},
			want: Result{Finished: true, DeadlineMet: true, Finish: 65 * time.Minute, Spot: 55 * time.Minute,
				Shrunk: 30 * time.Minute, Preemptions: 1, Starts: 2},
			nodeMin: 160,
		},
		"grows back while holding 2: a changeover": {
			minNodes: 2, plan: Plan{shrunk(2), shrunk(2), shrunk(2), policy.None, shrunk(2), spot, spot},
			want: Result{Finished: true, DeadlineMet: true, Finish: 70 * time.Minute, Spot: 60 * time.Minute,
				Shrunk: 40 * time.Minute, Preemptions: 1, Changeovers: 1, Starts: 3},
			nodeMin: 160,
		},
		"every change of width pays the overhead": {
			minNodes: 2, overhead: 5 * time.Minute, plan: Plan{spot, shrunk(3), policy.None, policy.None, spot, spot, spot, spot},
			// 5 + 3.75 minutes of the gang's work, then 31.25 more after a
			// start; overheads of 5 minutes on 4, 3 and 4 nodes.
			want: Result{Finished: true, DeadlineMet: true, Finish: 76*time.Minute + 15*time.Second, Spot: 56*time.Minute + 15*time.Second,
				Shrunk: 10 * time.Minute, Preemptions: 2, Starts: 3},
			nodeMin: 215,
		},
		"the whole gang written out is the whole gang": {
			minNodes: 2, plan: Plan{policy.None, policy.None, policy.None, policy.None, shrunk(4), spot, spot, shrunk(4)},
			want:    Result{Finished: true, DeadlineMet: true, Finish: 80 * time.Minute, Spot: 40 * time.Minute, Starts: 1},
			nodeMin: 160,
		},
		"fewer than the min nodes": {minNodes: 3, plan: Plan{spot, shrunk(2)}, problem: "tick 1: choice spot/z0×2 holds 2 nodes, fewer than the gang's 3 min nodes"},
		"more than in stock":       {minNodes: 2, plan: Plan{spot, shrunk(3), shrunk(3)}, problem: "tick 2: choice spot/z0×3 takes spot out of stock"},
		"on-demand on part of the gang": {
			minNodes: 2, plan: Plan{{Market: capacity.OnDemand, Nodes: 2}}, problem: "holds 2 nodes on on-demand, which always holds the whole gang",
		},
		"a rigid gang cannot shrink": {plan: Plan{spot, shrunk(3)}, problem: "tick 1: choice spot/z0×3 holds 3 nodes, fewer than the gang's 4 min nodes"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := Job{Tier: spec.TierDeadline, Work: 40 * time.Minute, Deadline: 90 * time.Minute, RestartOverhead: tc.overhead,
				SpotPrice: 1, OnDemandPrice: 3, Nodes: 4, MinNodes: tc.minNodes}
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
			tc.want.Cost = tc.nodeMin / 60
			if d := cmp.Diff(got, tc.want, cmpopts.IgnoreFields(Result{}, "Steps"), cmpopts.EquateApprox(0, 1e-12)); d != "" {
				t.Errorf("got(-), want(+):\n%s", d)
			}
		})
	}
}

func TestOptimalMatchesBruteForceForElasticGangs(t *testing.T) {
	s := time.Second
	cases := map[string]struct {
		gap, ovh, work, deadline time.Duration
		nodes, minNodes          int
		zones                    [][]int
		// shrinks: the optimum holds fewer than all the nodes, where
		// stock falls short or, by choice, to start on fewer nodes (each
		// start pays the overhead on the nodes it holds) or to ride
		// through a dip.
		shrinks bool
	}{
		"shrinking beats waiting":              {4 * s, 0, 8 * s, 14 * s, 4, 2, [][]int{{4, 2, 2, 2, 4}}, true},
		"a dip ridden through on 3 nodes":      {4 * s, 3 * s, 8 * s, 14 * s, 4, 2, [][]int{{4, 3, 4, 4, 4}}, true},
		"below the min nodes":                  {3 * s, 2 * s, 6 * s, 12 * s, 4, 3, [][]int{{2, 2, 4, 4, 4}}, true},
		"widths out of step":                   {2 * s, 3 * s, 5 * s, 10 * s, 3, 1, [][]int{{1, 2, 3, 1, 3}}, false},
		"two zones":                            {3 * s, 2 * s, 6 * s, 11 * s, 4, 2, [][]int{{4, 2, 0, 4}, {0, 3, 3, 2}}, false},
		"fewer nodes than in stock, by choice": {3 * s, 1 * s, 5 * s, 11 * s, 4, 2, [][]int{{1, 0, 1, 1, 0}}, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := checkOptimal(t, market(t, tc.gap, tc.zones...), Job{Tier: spec.TierDeadline, Work: tc.work, Deadline: tc.deadline,
				RestartOverhead: tc.ovh, SpotPrice: 1, OnDemandPrice: 3.1, Nodes: tc.nodes, MinNodes: tc.minNodes})
			if (r.Shrunk > 0) != tc.shrinks {
				t.Errorf("the optimum holds fewer nodes for %s (%v); want it to shrink %v", r.Shrunk, r.Steps, tc.shrinks)
			}
		})
	}
}

func TestOptimalMatchesBruteForceForElasticGangsOnRandomCounts(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 5))
	for n := range 100 {
		gap := time.Duration(2+rng.IntN(3)) * time.Second
		ovh := time.Duration(rng.IntN(6)) * time.Second
		zones := 1 + rng.IntN(2)
		ticks := 6 - zones
		work := time.Duration(1+rng.IntN(ticks*int(gap/time.Second)-1)) * time.Second
		deadline := min(work+ovh+time.Duration(rng.IntN(8))*time.Second, time.Duration(ticks)*gap)
		if deadline < work {
			continue
		}
		nodes := 2 + rng.IntN(3)
		job := Job{Tier: spec.TierDeadline, Work: work, Deadline: deadline, RestartOverhead: ovh, SpotPrice: 0.97, OnDemandPrice: 3.06,
			Nodes: nodes, MinNodes: 1 + rng.IntN(nodes-1)}
		points := make([][]int, zones)
		for z := range points {
			for range ticks {
				points[z] = append(points[z], rng.IntN(nodes+1))
			}
			points[z][0] = 2 + rng.IntN(nodes-1) // a trace of counts, not of 0s and 1s
		}
		if zones == 2 && rng.IntN(2) == 0 {
			job.Zones = []ZonePrice{{Region: "r0", Spot: 0.5, OnDemand: 3}, {Region: "r1", Spot: 0.2, OnDemand: 3.2}}
			job.CheckpointGB, job.EgressUSDPerGB, job.TransferTime = 10, 0.01*float64(rng.IntN(3)), time.Duration(rng.IntN(3))*time.Second
		}
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			checkOptimal(t, market(t, gap, points...), job)
		})
	}
}

func TestAnElasticGangsOptimumIsAtMostTheRigidOnesAndNoPolicyBeatsIt(t *testing.T) {
	m := loadMarket(t, "counts_v100")
	cheaper := 0
	for start := 0; start <= 30; start += 5 {
		for _, minNodes := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%d/min %d", start, minNodes), func(t *testing.T) {
				rigid := replayPolicy(t, m, gangJob(4), start, policy.Optimal)
				job := gangJob(4)
				job.MinNodes = minNodes
				opt := replayPolicy(t, m, job, start, policy.Optimal)
				if !opt.DeadlineMet || opt.Cost > rigid.Cost*(1+1e-12) {
					t.Fatalf("elastic optimum $%.4f (deadline met %v); want at most the rigid gang's $%.4f", opt.Cost, opt.DeadlineMet, rigid.Cost)
				}
				if opt.Cost < rigid.Cost*(1-1e-9) {
					cheaper++
				}
				for _, p := range []policy.Name{policy.Greedy, policy.UniformProgress, policy.Refuel, policy.OnDemandOnly} {
					r := replayPolicy(t, m, job, start, p)
					if !r.DeadlineMet {
						t.Errorf("%s misses the deadline", p)
					}
					if r.Cost < opt.Cost*(1-1e-12) {
						t.Errorf("%s costs $%.4f, below the optimum's $%.4f", p, r.Cost, opt.Cost)
					}
				}
			})
		}
	}
	if cheaper == 0 {
		t.Error("no window where shrinking makes the optimum cheaper, though the counts fall below the gang")
	}
}

func TestOptimalRefusesAnElasticGridTooLargeNamingTheWidths(t *testing.T) {
	points := make([]int, 8000)
	for i := range points {
		points[i] = i % 5
	}
	job := Job{Tier: spec.TierDeadline, Work: 48 * time.Hour, Deadline: 70 * time.Hour, RestartOverhead: 12 * time.Minute,
		SpotPrice: 0.9701, OnDemandPrice: 3.06, Nodes: 4, MinNodes: 2}
	_, err := Optimal(market(t, 32*time.Second, points), job, 0)
	var ge *GridError
	if !errors.As(err, &ge) || ge.Widths != 3 || !strings.Contains(err.Error(), "fewer than the 3 widths of the elastic gang") {
		t.Errorf("got %v; want a GridError naming the gang's 3 widths", err)
	}
}

func TestTheMeterShowsAnElasticGangItsCounts(t *testing.T) {
	job := gangJob(4)
	job.MinNodes = 2
	meter, err := NewMeter(job, []string{"a", "b"}, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Two ticks before the start with 3 in stock in a: stock for part of
	// the gang, seen for 20 minutes.
	for range 2 {
		if err := meter.WitnessCounts([]int{3, 0}); err != nil {
			t.Fatal(err)
		}
	}
	_, view, _, err := meter.BeginCounts([]int{2, 7})
	if err != nil {
		t.Fatal(err)
	}
	g := meter.Gang()
	if d := cmp.Diff([]int{2, 4}, g.InStock); d != "" || g.Nodes != 4 || g.MinNodes != 2 {
		t.Errorf("gang of %d, min %d, in stock (-want +got):\n%s", g.Nodes, g.MinNodes, d)
	}
	if view.Zones[0].SpotAvailable || !view.Zones[1].SpotAvailable {
		t.Errorf("spot for the whole gang %v, %v; want only in b, where the count holds all 4", view.Zones[0].SpotAvailable, view.Zones[1].SpotAvailable)
	}
	if p := g.Partial[0]; !p.Last || p.Since != 20*time.Minute {
		t.Errorf("stock for part of the gang in a seen %v for %s; want for 20m", p.Last, p.Since)
	}
	rigid, err := NewMeter(gangJob(4), []string{"a"}, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := rigid.Begin([]bool{true}); err != nil || rigid.Gang().Elastic() {
		t.Errorf("a rigid gang's meter shows %+v (%v); want the zero Gang", rigid.Gang(), err)
	}
}
