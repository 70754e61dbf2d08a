package workflows

import (
	"slices"
	"testing"
	"time"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

// spotRetriesEvery makes deadline runs on on-demand ask about spot every
// d of wall time (see slowTraining) for the test.
func spotRetriesEvery(t *testing.T, d time.Duration) {
	saved := DefaultRunOptions
	DefaultRunOptions.SpotRetryInterval, DefaultRunOptions.MaxSpotRetryInterval = d, 4*d
	t.Cleanup(func() { DefaultRunOptions = saved })
}

// A deadline run that fell back to on-demand goes back to spot once it
// has stock, without losing its place: the on-demand trainer stops at a
// checkpoint, its instance is released as a changeover, and training
// resumes on spot, which is paid for from the moment it was launched.
func TestDeadlineRunGoesBackToSpot(t *testing.T) {
	spotRetriesEvery(t, 50*time.Millisecond)
	cases := map[string]struct {
		trainings    []activities.TrainingOutcome
		stockAfter   int // acquisitions tried before spot has stock; 0: never
		deadline     time.Duration
		wantAcquired []capacity.Offering
		wantReleased []activities.ReleaseReason
		changeovers  int
		minProbes    int // tries of spot that found no stock, at least
		maxRequests  int // 0: no bound
		acquireTakes time.Duration
	}{
		"spot returns: change over": {
			trainings: []activities.TrainingOutcome{"block"}, stockAfter: 1, deadline: 100 * 24 * time.Hour,
			wantAcquired: []capacity.Offering{odA, spotA},
			wantReleased: []activities.ReleaseReason{activities.ReleaseChangeover, activities.ReleaseCompleted},
			changeovers:  1,
		},
		"spot never returns: finish on on-demand, tries backing off": {
			trainings: []activities.TrainingOutcome{"slow"}, deadline: 100 * 24 * time.Hour,
			wantAcquired: []capacity.Offering{odA},
			wantReleased: []activities.ReleaseReason{activities.ReleaseCompleted},
			minProbes:    1, maxRequests: 1 + 6, // backing off: 50+100+200 ms fit in 400 ms, not eight tries
		},
		"no slack for a changeover: never try": {
			trainings: []activities.TrainingOutcome{"slow"}, stockAfter: 1, deadline: time.Hour + 5*time.Minute,
			wantAcquired: []capacity.Offering{odA},
			wantReleased: []activities.ReleaseReason{activities.ReleaseCompleted},
			maxRequests:  1,
		},
		"the on-demand attempt completes while spot launches: spot given back unused": {
			trainings: []activities.TrainingOutcome{"slow"}, stockAfter: 1, deadline: 100 * 24 * time.Hour, acquireTakes: 2 * slowTraining,
			wantAcquired: []capacity.Offering{odA, spotA},
			wantReleased: []activities.ReleaseReason{activities.ReleaseCleanup, activities.ReleaseCompleted},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := &fakeCloud{offerings: []capacity.Offering{spotA, odA}, noStock: map[capacity.Market]bool{capacity.Spot: true},
				stockAfter: tc.stockAfter, trainings: tc.trainings, laterAcquireTakes: tc.acquireTakes}
			if tc.stockAfter == 0 {
				f.stockAfter = 1 << 30
			}
			env := newEnv(t, f)
			js := job(spec.TierDeadline)
			d := time.Now().Add(tc.deadline)
			js.Deadline = &d
			env.ExecuteWorkflow(TrainingRunName, js)
			st, err := result(t, env)
			if err != nil {
				t.Fatal(err)
			}
			var acquired []capacity.Offering
			for _, in := range f.acquired {
				acquired = append(acquired, in.Offering)
			}
			if !slices.Equal(acquired, tc.wantAcquired) {
				t.Errorf("acquired %v; want %v", acquired, tc.wantAcquired)
			}
			if got := f.releasedReasons(); !slices.Equal(got, tc.wantReleased) {
				t.Errorf("released %v; want %v", got, tc.wantReleased)
			}
			if len(f.released) != len(f.acquired) {
				t.Errorf("%d instances acquired, %d released", len(f.acquired), len(f.released))
			}
			if st.State != StateCompleted || st.Changeovers != tc.changeovers {
				t.Errorf("state %s, changeovers %d; want completed after %d", st.State, st.Changeovers, tc.changeovers)
			}
			probes := 0
			for _, fl := range st.Failures {
				if fl.Class == string(capacity.NoCapacity) && fl.Offering == spotA.Key() {
					probes++
				}
			}
			if probes < tc.minProbes {
				t.Errorf("%d tries of spot found no stock; want at least %d", probes, tc.minProbes)
			}
			if tc.maxRequests > 0 && len(f.requests) > tc.maxRequests {
				t.Errorf("%d acquisitions asked; want at most %d", len(f.requests), tc.maxRequests)
			}
			// Every instance held is in the ledger, closed, the unused
			// spot one included.
			if n := len(st.Ledger.Segments); n != len(f.acquired) {
				t.Errorf("ledger has %d segments; want one per instance (%d)", n, len(f.acquired))
			}
			if tc.changeovers > 0 {
				second := f.trained[1]
				if second.InstanceID != f.acquired[1].ID || second.Attempt <= f.trained[0].Attempt {
					t.Errorf("second attempt %d on %s; want a later attempt on the spot instance %s", second.Attempt, second.InstanceID, f.acquired[1].ID)
				}
				if st.Ledger.Segments[1].Market != string(capacity.Spot) {
					t.Errorf("second segment on %s; want spot", st.Ledger.Segments[1].Market)
				}
			}
		})
	}
}
