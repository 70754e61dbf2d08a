package inference

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/testsuite"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/capacity"
	"refuel/pkg/spec"
	"refuel/workflows"
	"refuel/workflows/internal/fakecloud"
	"refuel/workflows/workload"
)

func TestServiceWithoutPoolPlacesOnPublicOfferings(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		placement spec.Placement
		noStock   map[capacity.Market]bool
		asked     []capacity.Offering
		acquired  capacity.Market
		failures  []string
	}{
		"spot-first takes spot": {spec.PlacementSpotFirst, nil, []capacity.Offering{fakecloud.SpotA, fakecloud.OdA}, capacity.Spot, nil},
		// Acquire falls back within one call, so no failure is recorded.
		"spot-first falls back to on-demand": {spec.PlacementSpotFirst, map[capacity.Market]bool{capacity.Spot: true},
			[]capacity.Offering{fakecloud.SpotA, fakecloud.OdA}, capacity.OnDemand, nil},
		"on-demand never asks for spot": {spec.PlacementOnDemand, nil, []capacity.Offering{fakecloud.OdA}, capacity.OnDemand, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &serviceCloud{Cloud: &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.OdA, fakecloud.SpotA}, NoStock: tc.noStock}}
			env := newServiceEnv(t, c, &fakePool{absent: true})
			st := statusAt(t, env, 30*time.Second)
			runUntilCancelled(t, env, time.Minute, serviceSpec(func(s *spec.ServiceSpec) { s.MinReplicas, s.Placement = 2, tc.placement }))

			if st.Ready != 2 {
				t.Fatalf("%d ready; want 2", st.Ready)
			}
			for _, r := range st.Replicas {
				if r.Instance == nil || r.Instance.Market != string(tc.acquired) || r.Layer != admission.BurstLayer {
					t.Errorf("replica %s on %+v layer %s; want %s on burst", r.ID, r.Instance, r.Layer, tc.acquired)
				}
			}
			reqs := c.acquisitions()
			for _, req := range reqs {
				if !cmp.Equal(req.Offerings, tc.asked) {
					t.Errorf("asked for %v; want %v", req.Offerings, tc.asked)
				}
				if req.RunID != "svc" || req.Tags[capacity.TagPool] != "burst" || req.Tags[capacity.TagTeam] != "t" {
					t.Errorf("request run %q tags %v; want run svc, pool burst, team t", req.RunID, req.Tags)
				}
			}
			if len(reqs) != 2 || reqs[0].Attempt == reqs[1].Attempt {
				t.Errorf("%d acquisitions %+v; want 2 with their own attempts", len(reqs), reqs)
			}
			if c.listings != 1 {
				t.Errorf("offerings listed %d times; want once", c.listings)
			}
			var failures []string
			for _, f := range st.Failures {
				failures = append(failures, f.Class+" "+f.Offering)
			}
			if diff := cmp.Diff(failures, tc.failures); diff != "" {
				t.Errorf("failures got(-), want(+):\n%s", diff)
			}
		})
	}
}

func TestServiceAsksThePoolAndAcquiresWhatItGrants(t *testing.T) {
	t.Parallel()
	c := &serviceCloud{Cloud: &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA}}}
	p := &fakePool{}
	env := newServiceEnv(t, c, p)
	env.RegisterDelayedCallback(func() {
		p.grant(env, func(n int, r admission.Request) (admission.Allocation, bool) { return onBase(r), n == 0 })
	}, 20*time.Second)
	env.RegisterDelayedCallback(func() {
		p.grant(env, func(int, admission.Request) (admission.Allocation, bool) {
			return onBurst(fakecloud.SpotB, fakecloud.SpotA), true
		})
	}, 30*time.Second)
	queued := statusAt(t, env, 25*time.Second)
	st := statusAt(t, env, time.Minute)
	runUntilCancelled(t, env, 2*time.Minute, serviceSpec(func(s *spec.ServiceSpec) { s.MinReplicas = 2 }))

	s := serviceSpec(func(s *spec.ServiceSpec) { s.MinReplicas = 2 })
	s.Normalize()
	var want []admission.Request
	for _, id := range []string{"svc/r1", "svc/r2"} {
		want = append(want, admission.Request{ID: id, Kind: admission.Service, Owner: "svc", Team: "t", Priority: 60,
			Tier: spec.TierDeadline, Resources: s.Resources})
	}
	if diff := cmp.Diff(p.requests(), want); diff != "" {
		t.Errorf("pool requests got(-), want(+):\n%s", diff)
	}
	if queued.Ready != 1 || queued.Starting != 1 || queued.Replicas[1].Instance != nil {
		t.Errorf("before the second grant: %d ready, %d starting, %+v; want r2 waiting with no instance", queued.Ready, queued.Starting, queued.Replicas)
	}
	reqs := c.acquisitions()
	if len(reqs) != 2 {
		t.Fatalf("%d acquisitions; want 2", len(reqs))
	}
	if base := reqs[0]; !cmp.Equal(base.Offerings, []capacity.Offering{baseN1}) ||
		base.Tags[capacity.TagNode] != "n1" || base.Tags[capacity.TagPool] != "base" {
		t.Errorf("base acquisition %+v; want the node's offering, tagged node n1 and pool base", base)
	}
	if burst := reqs[1]; !cmp.Equal(burst.Offerings, []capacity.Offering{fakecloud.SpotB, fakecloud.SpotA}) || burst.Tags[capacity.TagPool] != "burst" {
		t.Errorf("burst acquisition %+v; want the granted offerings in order, tagged pool burst", burst)
	}
	if diff := cmp.Diff(p.args(workflows.SignalPoolBind), []any{workflows.PoolBind{ID: "svc/r2", Offering: fakecloud.SpotB}}); diff != "" {
		t.Errorf("binds got(-), want(+):\n%s", diff)
	}
	if st.Ready != 2 || st.Replicas[0].Layer != admission.BaseLayer || st.Replicas[1].Layer != admission.BurstLayer {
		t.Errorf("status %+v; want r1 on base and r2 on burst, both ready", st.Replicas)
	}
	if c.listings != 0 {
		t.Errorf("listed offerings %d times; the pool's grant says what to acquire", c.listings)
	}
}

func TestServiceSetPriority(t *testing.T) {
	t.Parallel()
	c := &serviceCloud{Cloud: &fakecloud.Cloud{}}
	p := &fakePool{}
	env := newServiceEnv(t, c, p)
	env.RegisterDelayedCallback(func() {
		p.grant(env, func(n int, r admission.Request) (admission.Allocation, bool) { return onBase(r), n == 0 })
	}, 10*time.Second)
	var rejected, accepted error
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(workflows.UpdatePriority, "bad", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { rejected = err }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, 150)
		env.UpdateWorkflow(workflows.UpdatePriority, "good", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { accepted = err }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, 70)
	}, time.Minute)
	st := statusAt(t, env, 2*time.Minute)
	runUntilCancelled(t, env, 3*time.Minute, serviceSpec(func(s *spec.ServiceSpec) { s.MinReplicas = 2 }))

	if rejected == nil || !strings.Contains(rejected.Error(), "0 (lowest) to 100") {
		t.Errorf("priority 150 not rejected with a fix: %v", rejected)
	}
	if accepted != nil || st.Priority != 70 {
		t.Errorf("priority 70: err %v, status priority %d", accepted, st.Priority)
	}
	// r1 was granted; only r2 still waits in the pool's queue.
	if diff := cmp.Diff(p.args(workflows.SignalPoolPriority), []any{workflows.PoolPriority{ID: "svc/r2", Priority: 70}}); diff != "" {
		t.Errorf("priority signals got(-), want(+):\n%s", diff)
	}
}

func TestServiceYieldReleasesAndRequestsAReplacement(t *testing.T) {
	t.Parallel()
	c := &serviceCloud{Cloud: &fakecloud.Cloud{}}
	p := &fakePool{}
	env := newServiceEnv(t, c, p)
	env.RegisterDelayedCallback(func() {
		p.grant(env, func(_ int, r admission.Request) (admission.Allocation, bool) { return onBurst(fakecloud.OdA), true })
	}, 10*time.Second)
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(workflows.UpdatePriority, "up", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Error(err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, 90)
	}, 30*time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.SignalYield, workflows.YieldRequest{ID: "svc/r1", Reason: "moving to base"})
	}, time.Minute)
	st := statusAt(t, env, 90*time.Second)
	runUntilCancelled(t, env, 2*time.Minute, serviceSpec(nil))

	if got := c.released(); len(got) == 0 || got[0].Reason != activities.ReleaseYielded || got[0].Instance.Offering != fakecloud.OdA {
		t.Errorf("releases %+v; want the yielded replica's instance first, reason yielded", got)
	}
	if rel := p.refs(workflows.SignalPoolRelease); len(rel) == 0 || rel[0] != "svc/r1" {
		t.Errorf("pool releases %v; want svc/r1 first", rel)
	}
	reqs := p.requests()
	if len(reqs) != 2 || reqs[1].ID != "svc/r2" || reqs[1].Priority != 90 {
		t.Errorf("requests %+v; want a replacement svc/r2 at the new priority 90", reqs)
	}
	if !cmp.Equal(replicaIDs(*st), []string{"svc/r2"}) || st.Starting != 1 {
		t.Errorf("after the yield: %v, %d starting; want the replacement waiting", replicaIDs(*st), st.Starting)
	}
	if want := fakecloud.OdA.PricePerHour * 50 / 3600; math.Abs(st.CostUSD-want) > 1e-9 {
		t.Errorf("cost $%.6f; want $%.6f for 50 s of the yielded on-demand instance", st.CostUSD, want)
	}
}

// A replica's spot instance that the cloud takes back (or serves a
// notice on) is found by the service's check, released as preempted and
// replaced; the others keep serving.
func TestServiceReplacesAReplicaTheCloudTookBack(t *testing.T) {
	t.Parallel()
	for _, state := range []capacity.State{capacity.StateTerminated, capacity.StateInterrupted} {
		t.Run(string(state), func(t *testing.T) {
			c := &serviceCloud{Cloud: &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.OdA}}}
			env := newServiceEnv(t, c, &fakePool{absent: true})
			env.RegisterDelayedCallback(func() { c.take(c.Acquired[0].ID, state) }, time.Minute)
			before := statusAt(t, env, 50*time.Second)
			after := statusAt(t, env, 3*time.Minute)
			runUntilCancelled(t, env, 4*time.Minute, serviceSpec(func(s *spec.ServiceSpec) { s.MinReplicas = 2 }))

			if before.Ready != 2 || before.ReplicasLost != 0 {
				t.Fatalf("before: %d ready, %d lost; want 2 ready", before.Ready, before.ReplicasLost)
			}
			rel := c.released()
			if len(rel) == 0 || rel[0].Reason != activities.ReleasePreempted || rel[0].Instance.ID != c.Acquired[0].ID {
				t.Fatalf("releases %+v; want %s's first, reason preempted", rel, c.Acquired[0].ID)
			}
			var kept string // the replica whose instance stayed
			for _, r := range before.Replicas {
				if r.Instance != nil && r.Instance.ID != c.Acquired[0].ID {
					kept = r.ID
				}
			}
			if want := []string{kept, "svc/r3"}; after.Ready != 2 || after.ReplicasLost != 1 || !cmp.Equal(replicaIDs(*after), want) {
				t.Errorf("after: %d ready %v, %d lost; want %v serving, 1 lost", after.Ready, replicaIDs(*after), after.ReplicasLost, want)
			}
			if n := len(c.acquisitions()); n != 3 {
				t.Errorf("%d acquisitions; want 3: two, then the replacement", n)
			}
			found := false
			for _, f := range after.Failures {
				found = found || (f.Class == "instance-lost" && f.Offering == fakecloud.SpotA.Key() && strings.Contains(f.Message, string(state)))
			}
			if !found {
				t.Errorf("failures %+v; want an instance-lost on %s saying %s", after.Failures, fakecloud.SpotA.Key(), state)
			}
		})
	}
}

func TestServiceAcquisitionFailuresBackOff(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		cloud    *fakecloud.Cloud
		attempts func(int) bool
		class    capacity.Class
		held     bool
	}{
		"quota backs off 1, 2, 4 min": {&fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.OdA}, FailAll: capacity.Quota},
			func(n int) bool { return n == 4 }, capacity.Quota, true},
		"no capacity retries each decision": {&fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.OdA},
			NoStock: map[capacity.Market]bool{capacity.Spot: true, capacity.OnDemand: true}},
			func(n int) bool { return n >= 55 && n <= 61 }, capacity.NoCapacity, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &serviceCloud{Cloud: tc.cloud}
			env := newServiceEnv(t, c, &fakePool{absent: true})
			st := statusAt(t, env, 9*time.Minute+55*time.Second)
			runUntilCancelled(t, env, 10*time.Minute, serviceSpec(nil))

			if n := len(c.acquisitions()); !tc.attempts(n) {
				t.Errorf("%d acquisitions in 10 min", n)
			}
			if len(st.Failures) == 0 || len(st.Failures) > workload.MaxFailures || st.Failures[len(st.Failures)-1].Class != string(tc.class) {
				t.Errorf("%d failures, last %+v; want at most %d, the last %s", len(st.Failures), st.Failures, workload.MaxFailures, tc.class)
			}
			if (st.AcquiringHeldUntil != nil) != tc.held || st.Starting != 1 {
				t.Errorf("held until %v with %d starting; want held: %v, the replica still wanted", st.AcquiringHeldUntil, st.Starting, tc.held)
			}
		})
	}
}
