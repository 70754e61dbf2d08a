package training

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/spec"
	"refuel/workflows"
	"refuel/workflows/internal/fakecloud"
)

// A run whose spot instance the market takes gives it back in the
// activity that acquires its replacement, and writes its search
// attributes once per workflow task: one write when the attempt ends,
// one when the replacement is got.
func TestRecoveryReleasesWithItsReplacementInOneTrip(t *testing.T) {
	t.Parallel()
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.SpotB}, Trainings: []activities.TrainingOutcome{activities.OutcomePreempted}}
	env := newEnv(t, f)
	var mu sync.Mutex
	var steps []string // the capacity and training activities started, and the attribute writes
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		switch n := info.ActivityType.Name; n {
		case activities.AcquireName, activities.ReleaseName, activities.ReplaceName, activities.RunTrainingName:
			mu.Lock()
			steps = append(steps, n)
			mu.Unlock()
		}
	})
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		var keys []string
		for k := range sa.GetUntypedValues() {
			keys = append(keys, k.GetName())
		}
		slices.Sort(keys)
		mu.Lock()
		steps = append(steps, "upsert "+strings.Join(keys, ","))
		mu.Unlock()
	}).Return(nil)
	env.ExecuteWorkflow(workflows.TrainingRunName, job(spec.TierFlexible))
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if st.Preemptions != 1 || st.Recoveries != 1 {
		t.Errorf("preemptions %d recoveries %d; want 1 and 1", st.Preemptions, st.Recoveries)
	}
	if got := f.ReleasedReasons(); len(got) != 2 || got[0] != activities.ReleasePreempted || got[1] != activities.ReleaseCompleted {
		t.Errorf("released %v; want preempted then completed", got)
	}
	first := slices.Index(steps, activities.RunTrainingName)
	last := first + 1 + slices.Index(steps[first+1:], activities.RunTrainingName)
	if first < 0 || last <= first {
		t.Fatalf("steps %q; want two training attempts", steps)
	}
	want := []string{
		// RefuelMarket is unset in the first write too; the mock is shown
		// only the attributes set.
		"upsert RefuelCostUSD,RefuelState", activities.ReplaceName,
		"upsert RefuelMarket,RefuelState", activities.RunTrainingName,
	}
	if got := slices.DeleteFunc(slices.Clone(steps[first+1:last+1]), isVersionWrite); !slices.Equal(got, want) {
		t.Errorf("the recovery's steps were\n%q\nwant\n%q", got, want)
	}
}

// isVersionWrite is the SDK's own write of a change ID the run met.
func isVersionWrite(step string) bool { return step == "upsert TemporalChangeVersion" }

// A Replace whose release the provider refused launched nothing: the run
// releases the lost instance on its own, then acquires.
func TestRecoveryWhoseReleaseFailedReleasesApart(t *testing.T) {
	t.Parallel()
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.SpotB}, Trainings: []activities.TrainingOutcome{activities.OutcomePreempted}}
	env := newEnv(t, f)
	env.OnActivity(activities.ReplaceName, mock.Anything, mock.Anything).
		Return(capacity.Instance{}, temporal.NewNonRetryableApplicationError("release of i-1 failed", activities.ReleaseFailedType, nil))
	env.ExecuteWorkflow(workflows.TrainingRunName, job(spec.TierFlexible))
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if st.Preemptions != 1 || st.Recoveries != 1 || len(st.Failures) != 0 {
		t.Errorf("preemptions %d recoveries %d failures %v; want 1, 1 and none", st.Preemptions, st.Recoveries, st.Failures)
	}
	if got := f.ReleasedReasons(); len(got) != 2 || got[0] != activities.ReleasePreempted || got[1] != activities.ReleaseCompleted {
		t.Errorf("released %v; want preempted then completed", got)
	}
	if len(f.Requests) != 2 {
		t.Errorf("%d acquisitions; want the first and the replacement", len(f.Requests))
	}
}

// A Replace that timed out may have ended before it released: the run
// releases the lost instance on its own, then tries again to acquire.
func TestRecoveryWhoseReplaceTimedOutReleasesApart(t *testing.T) {
	t.Parallel()
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.SpotB}, Trainings: []activities.TrainingOutcome{activities.OutcomePreempted}}
	env := newEnv(t, f)
	env.OnActivity(activities.ReplaceName, mock.Anything, mock.Anything).
		Return(capacity.Instance{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil)).Once()
	env.ExecuteWorkflow(workflows.TrainingRunName, job(spec.TierFlexible))
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if st.Preemptions != 1 || st.Recoveries != 1 {
		t.Errorf("preemptions %d recoveries %d; want 1 and 1", st.Preemptions, st.Recoveries)
	}
	if got := f.ReleasedReasons(); len(got) != 2 || got[0] != activities.ReleasePreempted || got[1] != activities.ReleaseCompleted {
		t.Errorf("released %v; want preempted then completed", got)
	}
}
