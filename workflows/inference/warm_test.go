package inference

import (
	"errors"
	"slices"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/capacity"
	"refuel/pkg/spec"
	"refuel/workflows"
	"refuel/workflows/internal/fakecloud"
)

// A warm-pool entry is a stopped instance where its provider can stop
// it (on-demand burst), started when scale-out takes it; anywhere else
// it stays running at full price, as before.
func TestServiceStopsItsWarmEntriesWhereItCan(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		offering capacity.Offering
		cloud    func(*serviceCloud)
		// onBase grants every replica a base machine through the pool.
		onBase bool
		// wantStopped: the warm entry is stopped before the spike, and
		// started when taken.
		wantStopped bool
		// startFails: the start finds the instance gone; the entry is
		// released and a cold replica replaces it.
		startFails bool
	}{
		{name: "on-demand on a provider that stops", offering: fakecloud.OdA, wantStopped: true},
		{name: "spot is never stopped", offering: fakecloud.SpotA},
		{name: "a provider that cannot stop", offering: fakecloud.OdA, cloud: func(c *serviceCloud) { c.cannotStop = true }},
		{name: "a base machine is never stopped", onBase: true},
		{name: "a start that fails is replaced", offering: fakecloud.OdA, wantStopped: true, startFails: true,
			cloud: func(c *serviceCloud) { c.failStart = true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &serviceCloud{Cloud: &fakecloud.Cloud{Offerings: []capacity.Offering{tt.offering}}}
			if tt.cloud != nil {
				tt.cloud(c)
			}
			p := &fakePool{absent: !tt.onBase}
			env := newServiceEnv(t, c, p)
			if tt.onBase {
				every(env, 5*time.Second, 5*time.Second, 6*time.Minute, func() {
					p.grant(env, func(_ int, r admission.Request) (admission.Allocation, bool) { return onBase(r), true })
				})
			}
			reportQPS(env, 10*time.Second, 2*time.Minute, 1)
			reportQPS(env, 2*time.Minute+10*time.Second, 6*time.Minute, 3) // 2 replicas' worth
			before := statusAt(t, env, 2*time.Minute)
			after := statusAt(t, env, 5*time.Minute)
			final := runUntilCancelled(t, env, 6*time.Minute, serviceSpec(func(s *spec.ServiceSpec) {
				s.WarmPool, s.ModelLoad = 1, spec.Duration(time.Minute)
			}))

			if before.Ready != 1 || before.Warm != 1 || len(before.Replicas) != 2 {
				t.Fatalf("before: %d ready, %d warm, %+v; want r1 ready and r2 warm", before.Ready, before.Warm, before.Replicas)
			}
			warm := before.Replicas[1]
			stops, starts := c.stoppedAndStarted()
			if tt.wantStopped {
				if warm.State != ReplicaStopped || warm.StoppedPricePerHour != 0.02 {
					t.Errorf("warm entry %+v; want stopped at $0.02/h", warm)
				}
				if v := before.Ledger.VolumeHours(before.Ledger.Segments[0].Start.Add(2 * time.Minute)); v <= 0 {
					t.Errorf("ledger %+v; want the stopped time booked as volume hours", before.Ledger)
				}
			} else {
				if warm.State != ReplicaWarm || warm.StoppedPricePerHour != 0 || len(stops) != 0 || len(starts) != 0 {
					t.Errorf("warm entry %+v, stops %v, starts %v; want it running, never stopped", warm, stops, starts)
				}
				for _, seg := range before.Ledger.Segments {
					if seg.Stopped {
						t.Errorf("ledger segment %+v stopped; want every one at full price", seg)
					}
				}
			}
			var taken *ReplicaStatus
			for _, r := range after.Replicas {
				if r.ID == warm.ID {
					taken = &r
				}
			}
			switch {
			case tt.startFails:
				if taken != nil || after.Ready != 2 || !slices.ContainsFunc(c.released(), func(in activities.ReleaseInput) bool {
					return in.Instance.ID == warm.Instance.ID && in.Reason == activities.ReleaseFailed
				}) {
					t.Errorf("after: %+v, released %+v; want %s released as failed and 2 ready", after.Replicas, c.released(), warm.ID)
				}
			case taken == nil || taken.State != ReplicaReady || taken.Instance.ID != warm.Instance.ID:
				t.Errorf("after: %+v; want the warm instance %s serving as %s", after.Replicas, warm.Instance.ID, warm.ID)
			case tt.wantStopped && !slices.Contains(starts, warm.Instance.ID):
				t.Errorf("starts %v; want %s started when taken", starts, warm.Instance.ID)
			}
			if tt.wantStopped && !tt.startFails {
				// The refilled warm pool is stopped too.
				if n := len(stops); n != 2 || after.Warm != 1 {
					t.Errorf("stops %v, %d warm; want the refilled entry stopped as well", stops, after.Warm)
				}
			}
			// Cancelling gives every instance back, stopped or running.
			released := map[string]bool{}
			for _, in := range c.released() {
				released[in.Instance.ID] = true
			}
			for _, inst := range c.Acquired {
				if !released[inst.ID] {
					t.Errorf("instance %s not released; want every one given back", inst.ID)
				}
			}
			if len(final.Replicas) != 0 {
				t.Errorf("final replicas %+v; want none", final.Replicas)
			}
		})
	}
}

// A stopped warm entry is carried across continue-as-new as it is: the
// next run neither stops nor acquires it again, and starts it when
// scale-out takes it.
func TestServiceCarriesAStoppedWarmEntry(t *testing.T) {
	t.Parallel()
	c := &serviceCloud{Cloud: &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.OdA}}}
	env := newServiceEnv(t, c, &fakePool{absent: true})
	env.RegisterDelayedCallback(func() { env.SetContinueAsNewSuggested(true) }, time.Minute)
	reportQPS(env, 10*time.Second, 50*time.Second, 1)
	s := serviceSpec(func(s *spec.ServiceSpec) { s.WarmPool, s.ModelLoad = 1, spec.Duration(time.Minute) })
	env.ExecuteWorkflow(workflows.InferenceServiceName, s)
	var next *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &next) {
		t.Fatalf("error %v; want continue-as-new", err)
	}
	var carried spec.ServiceSpec
	var carry *ServiceState
	if err := converter.GetDefaultDataConverter().FromPayloads(next.Input, &carried, &carry); err != nil {
		t.Fatal(err)
	}
	if carry == nil || len(carry.Replicas) != 2 || !carry.Replicas[1].Stopped || carry.Replicas[1].StoppedPricePerHour != 0.02 {
		t.Fatalf("carry %+v; want r1 serving and r2 stopped at $0.02/h", carry)
	}
	warm := carry.Replicas[1].Instance.ID
	stoppedCarry := *carry
	runningCarry := *carry // as a run before stopped entries hands it on
	runningCarry.Replicas = []*Replica{carry.Replicas[0], new(Replica)}
	*runningCarry.Replicas[1] = *carry.Replicas[1]
	runningCarry.Replicas[1].Stopped, runningCarry.Replicas[1].StoppedPricePerHour = false, 0

	for name, tc := range map[string]struct {
		carry *ServiceState
		// stops are the instances the next run stops: the refilled
		// entry's, and the carried one's if it came running.
		stops int
	}{
		"carried stopped": {&stoppedCarry, 1},
		"carried running": {&runningCarry, 2},
	} {
		t.Run(name, func(t *testing.T) {
			// The same cloud, holding the carried instances: a new one
			// would name its first instance as the first run's, and
			// which of those two became the warm entry is a race.
			c2 := &serviceCloud{Cloud: &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.OdA}, Acquired: slices.Clone(c.Acquired)}}
			env2 := newServiceEnv(t, c2, &fakePool{absent: true})
			before := statusAt(t, env2, 5*time.Second)
			reportQPS(env2, 10*time.Second, 5*time.Minute, 3) // 2 replicas' worth
			st := statusAt(t, env2, 4*time.Minute)
			runUntilCancelled(t, env2, 5*time.Minute, carried, tc.carry)
			stops, starts := c2.stoppedAndStarted()
			if len(before.Replicas) != 2 || before.Replicas[1].State != ReplicaStopped {
				t.Errorf("next run, at first: %+v; want the carried entry stopped", before.Replicas)
			}
			if !slices.Equal(starts, []string{warm}) || st.Ready != 2 {
				t.Errorf("next run: started %v, %d ready; want the carried %s started and 2 ready", starts, st.Ready, warm)
			}
			// Its one acquisition is the refilled warm entry's.
			if n := len(c2.acquisitions()); n != 1 || len(stops) != tc.stops || (tc.stops == 2) != slices.Contains(stops, warm) {
				t.Errorf("next run: %d acquisitions, stopped %v; want the refilled entry acquired, %d stopped", n, stops, tc.stops)
			}
		})
	}
}
