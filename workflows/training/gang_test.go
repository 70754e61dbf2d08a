package training

import (
	"slices"
	"testing"
	"time"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/cost"
	"refuel/pkg/spec"
	"refuel/workflows"
	"refuel/workflows/internal/fakecloud"
)

// gangJob is a flexible job on nodes instances at once.
func gangJob(nodes int) spec.JobSpec {
	js := job(spec.TierFlexible)
	js.Resources.Nodes = nodes
	return js
}

func TestGangReplacesOnlyTheNodeTheMarketTook(t *testing.T) {
	t.Parallel()
	f := &fakecloud.Cloud{
		Offerings: []capacity.Offering{fakecloud.SpotB, fakecloud.SpotA},
		Ranks: map[int][]activities.TrainingOutcome{
			0: {"block"},                     // waits for the gang to stop it
			1: {activities.OutcomePreempted}, // the market takes rank 1
		},
	}
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.TrainingRunName, gangJob(2))
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != workflows.StateCompleted || st.NodeReplacements != 1 || st.Preemptions != 1 {
		t.Fatalf("state %s, %d node replacements, %d preemptions; want completed after 1 replacement of 1 preemption",
			st.State, st.NodeReplacements, st.Preemptions)
	}
	if len(f.Acquired) != 3 {
		t.Fatalf("acquired %d instances; want the gang's 2 and 1 replacement", len(f.Acquired))
	}
	for _, inst := range f.Acquired {
		if inst.Offering.Zone != f.Acquired[0].Offering.Zone {
			t.Errorf("instance %s in zone %s; a gang keeps to one zone (%s)", inst.ID, inst.Offering.Zone, f.Acquired[0].Offering.Zone)
		}
	}
	// Rank 0 kept its instance; rank 1 trained on the replacement.
	var rank0, rank1 []string
	for _, in := range f.Trained {
		if in.Gang.Nodes != 2 {
			t.Errorf("attempt %d told of %d nodes; want 2", in.Attempt, in.Gang.Nodes)
		}
		if in.Gang.Rank == 0 {
			rank0 = append(rank0, in.InstanceID)
		} else {
			rank1 = append(rank1, in.InstanceID)
		}
	}
	if len(rank0) != 2 || rank0[0] != rank0[1] {
		t.Errorf("rank 0 trained on %v; want twice on the instance it kept", rank0)
	}
	if len(rank1) != 2 || rank1[1] != f.Acquired[2].ID {
		t.Errorf("rank 1 trained on %v; want the replacement %s second", rank1, f.Acquired[2].ID)
	}
	// Ranks of one start share its attempt number; each start a new one.
	byAttempt := map[int]int{}
	for _, in := range f.Trained {
		byAttempt[in.Attempt]++
	}
	if len(byAttempt) != 2 {
		t.Errorf("attempts %v; want two starts of the gang, each with both ranks", byAttempt)
	}
	got := f.ReleasedReasons()
	slices.Sort(got)
	want := []activities.ReleaseReason{activities.ReleaseCompleted, activities.ReleaseCompleted, activities.ReleasePreempted}
	if !slices.Equal(got, want) {
		t.Errorf("released %v; want %v", got, want)
	}
	if p := st.LastPreemption; p == nil || p.InstanceID != f.Acquired[1].ID || !p.WithNotice {
		t.Errorf("last preemption %+v; want rank 1's %s, with notice", p, f.Acquired[1].ID)
	}
}

func TestGangWithoutAReplacementGivesEverythingBack(t *testing.T) {
	t.Parallel()
	f := &fakecloud.Cloud{
		Offerings: []capacity.Offering{fakecloud.SpotA},
		// The replacement (acquisition 3) and the next try find no stock.
		Outage: [2]int{2, 4},
		Ranks: map[int][]activities.TrainingOutcome{
			0: {"block"},
			1: {activities.OutcomePreempted},
		},
	}
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.TrainingRunName, gangJob(2))
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != workflows.StateCompleted || st.NodeReplacements != 0 {
		t.Fatalf("state %s, %d node replacements; want completed with none (the gang was acquired again)", st.State, st.NodeReplacements)
	}
	if len(f.Acquired) != 4 {
		t.Fatalf("acquired %d instances; want 2, then a whole new gang of 2", len(f.Acquired))
	}
	// Rank 0's instance went back when its replacement partner could not
	// be had: nothing was held while the run waited.
	if r := f.Released[1]; r.Instance.ID != f.Acquired[0].ID || r.Reason != activities.ReleaseCleanup {
		t.Errorf("second release %s (%s); want rank 0's %s given back (cleanup)", r.Instance.ID, r.Reason, f.Acquired[0].ID)
	}
}

func TestGangIsAcquiredWholeOrNotAtAll(t *testing.T) {
	t.Parallel()
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA}, Outage: [2]int{2, 3}, Ranks: map[int][]activities.TrainingOutcome{}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.TrainingRunName, gangJob(3))
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != workflows.StateCompleted {
		t.Fatalf("state %s; want completed", st.State)
	}
	// Two acquired, the third found none: both went back before the run
	// tried again for all three.
	if len(f.Released) < 2 || f.Released[0].Reason != activities.ReleaseCleanup || f.Released[1].Reason != activities.ReleaseCleanup {
		t.Fatalf("released %v; want the partial gang's two given back first", f.ReleasedReasons())
	}
	if len(f.Trained) != 3 {
		t.Errorf("%d ranks trained; want one start of all three", len(f.Trained))
	}
	ranks := map[int]bool{}
	for _, in := range f.Trained {
		ranks[in.Gang.Rank] = true
		if in.Gang.MasterPort == 0 || in.Gang.Nodes != 3 {
			t.Errorf("rank %d told %+v; want 3 nodes and rank 0's port", in.Gang.Rank, in.Gang)
		}
	}
	if len(ranks) != 3 {
		t.Errorf("ranks %v; want 0, 1 and 2", ranks)
	}
}

func TestGangNodeLostWithoutNoticeCountsARestart(t *testing.T) {
	t.Parallel()
	f := &fakecloud.Cloud{
		Offerings: []capacity.Offering{fakecloud.SpotA},
		Ranks: map[int][]activities.TrainingOutcome{
			0: {"block"},
			1: {"silent"},
		},
	}
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.TrainingRunName, gangJob(2))
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != workflows.StateCompleted || st.NodeReplacements != 1 || st.Restarts[capacity.InstanceLost] != 1 {
		t.Fatalf("state %s, %d replacements, restarts %+v; want completed after replacing the silent node, counted",
			st.State, st.NodeReplacements, st.Restarts)
	}
	if len(f.Acquired) != 3 {
		t.Errorf("acquired %d; want 3 (the survivor kept)", len(f.Acquired))
	}
}

// A gang node on a machine that joined the base group and went silent is
// the machine's loss, not the instance's: booked node-lost, no restart
// counted (max_restarts 0 would end the run), no preemption, and the
// whole gang goes back as node-lost for the pool to place it again.
func TestGangNodeLostOnAJoinedMachineIsNoRestart(t *testing.T) {
	t.Parallel()
	f := &fakecloud.Cloud{
		Offerings: []capacity.Offering{fakecloud.SpotA},
		Ranks: map[int][]activities.TrainingOutcome{
			0: {"block"},
			1: {"silent"},
		},
		Tags: map[string]string{capacity.TagJoined: "dc-1"},
	}
	env := newEnv(t, f)
	js := gangJob(2)
	js.MaxRestarts = new(int)
	env.ExecuteWorkflow(workflows.TrainingRunName, js)
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != workflows.StateCompleted || st.Restarts[capacity.NodeLost] != 1 || st.Restarts.Total() != 0 || st.Preemptions != 0 || st.NodeReplacements != 0 {
		t.Fatalf("state %s, restarts %+v, %d preemptions, %d node replacements; want completed after one node-lost, nothing counted",
			st.State, st.Restarts, st.Preemptions, st.NodeReplacements)
	}
	if len(st.Failures) == 0 || st.Failures[0].Class != string(capacity.NodeLost) {
		t.Errorf("failures %+v; want the loss booked %s", st.Failures, capacity.NodeLost)
	}
	lost := 0
	for _, r := range f.ReleasedReasons() {
		if r == activities.ReleaseReason(capacity.NodeLost) {
			lost++
		}
	}
	if lost != 2 || len(f.Acquired) != 4 {
		t.Errorf("%d released as node-lost of %d acquired (%v); want the gang of 2 back as node-lost, then a gang of 2 again", lost, len(f.Acquired), f.ReleasedReasons())
	}
}

func TestGangTrainerFailureRestartsTheGang(t *testing.T) {
	t.Parallel()
	f := &fakecloud.Cloud{
		Offerings: []capacity.Offering{fakecloud.SpotA},
		Ranks: map[int][]activities.TrainingOutcome{
			0: {"block"},
			1: {activities.OutcomeFailed},
		},
	}
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.TrainingRunName, gangJob(2))
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != workflows.StateCompleted || st.Restarts[capacity.TrainerFault] != 1 || st.NodeReplacements != 0 {
		t.Fatalf("state %s, restarts %+v, %d replacements; want completed after one trainer restart of the whole gang",
			st.State, st.Restarts, st.NodeReplacements)
	}
	if len(f.Acquired) != 4 {
		t.Errorf("acquired %d; want 4: a failed trainer gives the gang back", len(f.Acquired))
	}
}

// elasticJob is a gang of nodes that may train on as few as min, waiting
// shrinkAfter for a lost node's replacement.
func elasticJob(nodes, min int, shrinkAfter time.Duration) spec.JobSpec {
	js := gangJob(nodes)
	js.Resources.MinNodes, js.Resources.ShrinkAfter = min, spec.Duration(shrinkAfter)
	return js
}

func TestElasticGang(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		outage      [2]int // acquisitions that find no stock
		shrinkAfter time.Duration
		ranks       map[int][]activities.TrainingOutcome
		// widths are the gang sizes its starts were told, in order.
		widths  []int
		resizes []cost.Resize // From and To only
		// acquired counts the instances: the gang's 3 and what followed.
		acquired int
	}{
		// The replacement and its retry within shrink_after find none:
		// the gang trains on 2, and grows back to 3 when stock returns.
		"shrinks and grows back": {outage: [2]int{3, 5}, shrinkAfter: time.Second,
			ranks:  map[int][]activities.TrainingOutcome{0: {"block", "block"}, 1: {"block", "block"}, 2: {activities.OutcomePreempted}},
			widths: []int{3, 2, 3}, resizes: []cost.Resize{{From: 3, To: 2}, {From: 2, To: 3}}, acquired: 4},
		// The replacement comes on a retry within shrink_after: the gang
		// never shrinks.
		"replaced within the bound": {outage: [2]int{3, 4}, shrinkAfter: 4 * time.Second,
			ranks:  map[int][]activities.TrainingOutcome{0: {"block"}, 1: {"block"}, 2: {activities.OutcomePreempted}},
			widths: []int{3, 3}, acquired: 4},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := &fakecloud.Cloud{
				Offerings: []capacity.Offering{fakecloud.SpotA},
				Outage:    tc.outage,
				Ranks:     tc.ranks, // the market takes rank 2
			}
			env := newEnv(t, f)
			env.ExecuteWorkflow(workflows.TrainingRunName, elasticJob(3, 2, tc.shrinkAfter))
			st, err := result(t, env)
			if err != nil {
				t.Fatal(err)
			}
			if st.State != workflows.StateCompleted || st.Preemptions != 1 {
				t.Fatalf("state %s, %d preemptions; want completed after 1", st.State, st.Preemptions)
			}
			var widths []int
			seen := map[int]bool{}
			for _, in := range f.Trained {
				if !seen[in.Attempt] {
					seen[in.Attempt] = true
					widths = append(widths, in.Gang.Nodes)
				}
			}
			if !slices.Equal(widths, tc.widths) {
				t.Errorf("the gang started %v wide; want %v", widths, tc.widths)
			}
			var resizes []cost.Resize
			for _, r := range st.Ledger.Resizes {
				resizes = append(resizes, cost.Resize{From: r.From, To: r.To})
			}
			if !slices.Equal(resizes, tc.resizes) {
				t.Errorf("ledger resizes %v; want %v", resizes, tc.resizes)
			}
			if len(f.Acquired) != tc.acquired {
				t.Errorf("acquired %d instances; want %d", len(f.Acquired), tc.acquired)
			}
			if st.NodesAsked != 3 {
				t.Errorf("nodes asked %d; want 3", st.NodesAsked)
			}
		})
	}
}
