package inference

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"refuel/pkg/admission"
	"refuel/pkg/autoscale"
	"refuel/pkg/capacity"
	"refuel/pkg/spec"
	"refuel/workflows"
	"refuel/workflows/internal/fakecloud"
	"refuel/workflows/workload"
)

func TestServiceScalesOutToMaxThenInBurstMostExpensiveFirst(t *testing.T) {
	t.Parallel()
	c := &serviceCloud{Cloud: &fakecloud.Cloud{}}
	p := &fakePool{}
	env := newServiceEnv(t, c, p)
	// The pool puts the first replica on base, the others on burst.
	burst := []capacity.Offering{fakecloud.SpotA, fakecloud.OdA, fakecloud.SpotB}
	every(env, 10*time.Second, 5*time.Second, 20*time.Minute, func() {
		p.grant(env, func(n int, r admission.Request) (admission.Allocation, bool) {
			if n == 0 {
				return onBase(r), true
			}
			return onBurst(burst[(n-1)%len(burst)]), true
		})
	})
	reportQPS(env, 10*time.Second, 2*time.Minute, 1)
	reportQPS(env, 2*time.Minute+10*time.Second, 6*time.Minute, 20) // 10 replicas' worth
	reportQPS(env, 6*time.Minute+10*time.Second, 20*time.Minute, 1)
	before := statusAt(t, env, time.Minute+55*time.Second)
	peak := statusAt(t, env, 5*time.Minute)
	var afterPeak []string
	env.RegisterDelayedCallback(func() { afterPeak = p.refs(workflows.SignalPoolRelease) }, 8*time.Minute)
	after := statusAt(t, env, 19*time.Minute)
	runUntilCancelled(t, env, 20*time.Minute, serviceSpec(nil))

	if before.Ready != 1 || before.Replicas[0].Layer != admission.BaseLayer {
		t.Errorf("before the spike: %d ready %+v; want the min 1, on base", before.Ready, before.Replicas)
	}
	if peak.Ready != 4 || peak.Desired.Replicas != 4 || peak.Desired.Reason != "max_replicas" {
		t.Errorf("at the peak: %d ready, desired %+v; want 4 capped by max_replicas", peak.Ready, peak.Desired)
	}
	if m := peak.Market; m == nil || !strings.Contains(m.Why, "4 replicas: capped at max_replicas") || m.DecidedAt.IsZero() {
		t.Errorf("at the peak, market %+v; want why it holds 4 replicas, and when it decided", m)
	}
	if n := len(peak.Decisions); n == 0 || peak.Decisions[n-1].Explanation == "" {
		t.Errorf("decisions %+v; want each explained", peak.Decisions)
	}
	if n := len(p.requests()); n != 4 {
		t.Errorf("%d replicas requested; want 4, never beyond max_replicas", n)
	}
	if len(afterPeak) != 0 {
		t.Errorf("released %v within the downscale delay", afterPeak)
	}
	if after.Ready != 1 || after.Starting != 0 || !cmp.Equal(replicaIDs(*after), []string{"svc/r1"}) {
		t.Errorf("after the load fell: %d ready, %d starting, %v; want the base replica svc/r1 alone", after.Ready, after.Starting, replicaIDs(*after))
	}
	var got []string
	for _, in := range c.released() {
		got = append(got, in.Instance.Offering.Key()+" "+string(in.Reason))
	}
	want := []string{
		fakecloud.OdA.Key() + " scaled-in", fakecloud.SpotB.Key() + " scaled-in", fakecloud.SpotA.Key() + " scaled-in", // burst, most expensive first
		baseN1.Key() + " cleanup", // base only when the service ends
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("releases got(-), want(+):\n%s", diff)
	}
	if rel := p.refs(workflows.SignalPoolRelease); !cmp.Equal(sorted(rel), []string{"svc/r1", "svc/r2", "svc/r3", "svc/r4"}) {
		t.Errorf("pool told of releases %v; want every replica", rel)
	}
}

func sorted(xs []string) []string {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return xs
}

func TestServiceLearnsLeadTimeFromMeasuredStartup(t *testing.T) {
	t.Parallel()
	c := &serviceCloud{Cloud: &fakecloud.Cloud{}}
	p := &fakePool{}
	env := newServiceEnv(t, c, p)
	// The pool takes 7 minutes to grant; the model loads in 2.
	env.RegisterDelayedCallback(func() {
		p.grant(env, func(_ int, r admission.Request) (admission.Allocation, bool) { return onBase(r), true })
	}, 7*time.Minute)
	loading := statusAt(t, env, 8*time.Minute)
	ready := statusAt(t, env, 10*time.Minute)
	runUntilCancelled(t, env, 11*time.Minute, serviceSpec(func(s *spec.ServiceSpec) {
		s.LeadTime, s.ModelLoad = "auto", spec.Duration(2*time.Minute)
	}))

	if loading.Starting != 1 || loading.Replicas[0].Instance == nil || loading.LeadTimeSeconds != autoscale.DefaultLeadTime.Seconds() {
		t.Errorf("while loading: %d starting, %+v, lead %.0fs; want starting with its instance, the default lead",
			loading.Starting, loading.Replicas, loading.LeadTimeSeconds)
	}
	if ready.Ready != 1 || ready.LeadTimeSeconds != (9*time.Minute).Seconds() {
		t.Fatalf("after: %d ready, lead %.0fs; want 1 ready and a 540 s lead (7 min provision + 2 min load)", ready.Ready, ready.LeadTimeSeconds)
	}
	if r := ready.Replicas[0]; r.ReadyAt == nil || r.ReadyAt.Sub(r.RequestedAt) != 9*time.Minute {
		t.Errorf("replica %+v; want ready 9 min after its request", r)
	}
}

func TestServiceTakesFromTheWarmPoolFirst(t *testing.T) {
	t.Parallel()
	c := &serviceCloud{Cloud: &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA}}}
	env := newServiceEnv(t, c, &fakePool{absent: true})
	reportQPS(env, 10*time.Second, 2*time.Minute, 1)
	reportQPS(env, 2*time.Minute+10*time.Second, 6*time.Minute, 3) // 2 replicas' worth
	before := statusAt(t, env, 2*time.Minute)
	after := statusAt(t, env, 5*time.Minute)
	runUntilCancelled(t, env, 6*time.Minute, serviceSpec(func(s *spec.ServiceSpec) {
		s.WarmPool, s.ModelLoad = 1, spec.Duration(time.Minute)
	}))

	if before.Ready != 1 || before.Warm != 1 || len(before.Replicas) != 2 || before.Replicas[1].State != ReplicaWarm {
		t.Fatalf("before: %d ready, %d warm, %+v; want r1 ready and r2 warm", before.Ready, before.Warm, before.Replicas)
	}
	warm := before.Replicas[1]
	var taken *ReplicaStatus
	for _, r := range after.Replicas {
		if r.ID == warm.ID {
			taken = &r
		}
	}
	if taken == nil || taken.State != ReplicaReady || taken.Instance.ID != warm.Instance.ID {
		t.Fatalf("after: %+v; want the warm instance %s serving as %s", after.Replicas, warm.Instance.ID, warm.ID)
	}
	if after.Ready != 2 || after.Warm != 1 || len(c.acquisitions()) != 3 {
		t.Errorf("after: %d ready, %d warm, %d acquisitions; want 2 ready, the warm pool refilled, 3 instances in all",
			after.Ready, after.Warm, len(c.acquisitions()))
	}
	// Its cold start-up was not measured again: the lead stays fixed at
	// 1m anyway, so check the start-up the status implies instead.
	var spike time.Time
	for _, d := range after.Decisions {
		if d.Replicas == 2 {
			spike = d.Time
		}
	}
	if spike.IsZero() || taken.ReadyAt.Sub(spike) != time.Minute {
		t.Errorf("decided 2 replicas at %v, warm replica ready at %v; want ready one model load (1m) later", spike, taken.ReadyAt)
	}
}

func TestReleaseOrder(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	spotAt3 := fakecloud.SpotA
	spotAt3.PricePerHour = fakecloud.OdA.PricePerHour
	placed := func(id string, state ReplicaState, layer admission.Layer, o capacity.Offering, acquired time.Duration) *Replica {
		return &Replica{ID: id, State: state, Layer: layer, Lease: &workload.Lease{Instance: capacity.Instance{ID: "i-" + id, Offering: o}, Since: t0.Add(acquired)}}
	}
	queued := func(id string) *Replica { return &Replica{ID: id, State: ReplicaStarting} }
	cases := map[string]struct {
		replicas []*Replica
		want     []string
	}{
		"what holds no instance goes first": {
			[]*Replica{placed("r1", ReplicaReady, admission.BurstLayer, fakecloud.OdA, 0), queued("r2"), queued("r3")},
			[]string{"r2", "r3", "r1"}},
		"burst before base, most expensive first, spot before on-demand at equal price": {
			[]*Replica{
				placed("r1", ReplicaReady, admission.BaseLayer, baseN1, 0),
				placed("r2", ReplicaReady, admission.BurstLayer, fakecloud.SpotA, 0),
				placed("r3", ReplicaReady, admission.BurstLayer, fakecloud.OdA, 0),
				placed("r4", ReplicaReady, admission.BurstLayer, spotAt3, 0),
			},
			[]string{"r4", "r3", "r2", "r1"}},
		"loading before serving at equal price": {
			[]*Replica{placed("r1", ReplicaReady, admission.BurstLayer, fakecloud.SpotA, 0), placed("r2", ReplicaStarting, admission.BurstLayer, fakecloud.SpotA, time.Minute)},
			[]string{"r2", "r1"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, r := range releaseOrder(tc.replicas) {
				got = append(got, r.ID)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("got(-), want(+):\n%s", diff)
			}
		})
	}
}

// A serving replica's lease is its ServiceReplica child's; the service
// knows its instance from what the child reported (RunsOn). Scale-in
// still gives back burst before base and the dearest first, where
// before it went by id and kept an on-demand replica over base ones.
func TestServingScaleInGivesBackBurstBeforeBase(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	on := func(id, market string, price float64) *Replica {
		return &Replica{ID: id, State: ReplicaReady, RunsOn: &workload.InstanceRef{ID: "i-" + id, Market: market, PricePerHour: price, Since: t0}}
	}
	rs := []*Replica{on("r2", "base", 1.2), on("r3", "on-demand", 3.06), on("r5", "base", 1.2), on("r7", "on-demand", 3.06), on("r8", "spot", 0.97)}
	var got []string
	for _, r := range releaseOrder(rs) {
		got = append(got, r.ID)
	}
	if want := []string{"r3", "r7", "r8", "r2", "r5"}; !slices.Equal(got, want) {
		t.Errorf("release order %v; want %v (burst, the dearest first, then base)", got, want)
	}
	got = got[:0]
	for _, r := range releaseOrderUnplaced(rs) {
		got = append(got, r.ID)
	}
	if want := []string{"r2", "r3", "r5", "r7", "r8"}; !slices.Equal(got, want) {
		t.Errorf("the recorded order %v; want %v (by id)", got, want)
	}
}

// A service whose metrics stop (a load generator stopped with Ctrl-C)
// does not stay sized for its last reading: once no report came for
// MetricsStaleAfter it goes to min_replicas, and its status says why.
func TestServiceScalesInWhenMetricsGoStale(t *testing.T) {
	t.Parallel()
	c := &serviceCloud{Cloud: &fakecloud.Cloud{}}
	p := &fakePool{}
	env := newServiceEnv(t, c, p)
	every(env, 10*time.Second, 5*time.Second, 15*time.Minute, func() {
		p.grant(env, func(n int, r admission.Request) (admission.Allocation, bool) { return onBurst(fakecloud.SpotA), true })
	})
	reportQPS(env, 10*time.Second, 3*time.Minute, 6) // 3 replicas' worth, then silence
	loaded := statusAt(t, env, 3*time.Minute)
	stale := statusAt(t, env, 14*time.Minute)
	runUntilCancelled(t, env, 15*time.Minute, serviceSpec(nil))

	if loaded.Desired.Replicas != 3 {
		t.Fatalf("under load: desired %+v; want 3", loaded.Desired)
	}
	if stale.Desired.Replicas != 1 || stale.Desired.Reason != "metrics stale; min_replicas" || stale.Ready != 1 {
		t.Errorf("after the metrics stopped: desired %+v, %d ready; want min_replicas' 1, because the metrics are stale", stale.Desired, stale.Ready)
	}
	if m := stale.Market; m == nil || !strings.Contains(m.Why, "no metrics came for") {
		t.Errorf("market %+v; want it to say no metrics came", m)
	}
}
