package training

import (
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/policy"
	"refuel/pkg/spec"
	"refuel/workflows"
	"refuel/workflows/internal/fakecloud"
	"refuel/workflows/workload"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
)

func TestTrainingRunRecoversFromPreemptionInAnotherZone(t *testing.T) {
	t.Parallel()
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.SpotB, fakecloud.OdA}, Trainings: []activities.TrainingOutcome{activities.OutcomePreempted}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.TrainingRunName, job(spec.TierFlexible))
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if st.Preemptions != 1 || st.Recoveries != 1 {
		t.Errorf("preemptions %d recoveries %d; want 1 and 1", st.Preemptions, st.Recoveries)
	}
	if len(f.Requests) != 2 {
		t.Fatalf("%d acquisitions; want 2", len(f.Requests))
	}
	if z := f.Requests[1].Offerings[0].Zone; z != fakecloud.SpotB.Zone {
		t.Errorf("replacement tried zone %s first; want %s, away from the zone that preempted", z, fakecloud.SpotB.Zone)
	}
	for _, o := range f.Requests[0].Offerings {
		if o.Market == capacity.OnDemand {
			t.Errorf("flexible run asked for on-demand %s", o.Key())
		}
	}
	if f.Requests[0].Attempt == f.Requests[1].Attempt {
		t.Error("replacement reused the idempotency attempt of the lost instance")
	}
	if got := f.ReleasedReasons(); len(got) != 2 || got[0] != activities.ReleasePreempted {
		t.Errorf("released %v; want preempted then completed", got)
	}
	if f.Trained[1].Attempt != 2 {
		t.Errorf("second training attempt %d; want 2", f.Trained[1].Attempt)
	}
}

// interval: auto checkpoints at the Young/Daly optimum of what runs
// measured on the pool so far, within the spec's bounds, and each
// released instance adds what it taught to the pool's log.
func TestAutoCheckpointIntervalLearnsFromThePool(t *testing.T) {
	t.Parallel()
	measured := policy.CheckpointLog{Held: 9 * time.Hour, Preemptions: 2, Writes: 4, WriteTime: 2 * time.Minute}
	for name, tc := range map[string]struct {
		log      policy.CheckpointLog
		min, max time.Duration
		want     time.Duration
	}{
		"nothing measured: the lower bound": {policy.CheckpointLog{}, 0, 0, spec.DefaultMinCheckpointInterval},
		// write 30s, MTBP (9h + 1h prior) / 3 = 12000s: sqrt(2*30*12000).
		"measured pool":        {measured, 0, 0, time.Duration(math.Sqrt(2*30*12000) * float64(time.Second))},
		"clamped to the upper": {measured, time.Minute, 5 * time.Minute, 5 * time.Minute},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.SpotB}, PoolLog: tc.log, Trainings: []activities.TrainingOutcome{activities.OutcomePreempted}}
			env := newEnv(t, f)
			js := job(spec.TierFlexible)
			js.Checkpoint.MinInterval, js.Checkpoint.MaxInterval = spec.Duration(tc.min), spec.Duration(tc.max)
			env.ExecuteWorkflow(workflows.TrainingRunName, js)
			st, err := result(t, env)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Trained[0].CheckpointInterval; got.Round(time.Millisecond) != tc.want.Round(time.Millisecond) {
				t.Errorf("checkpoint interval %s; want %s", got, tc.want)
			}
			if st.CheckpointIntervalSecs != f.Trained[1].CheckpointInterval.Seconds() {
				t.Errorf("status says %.1fs; the last attempt checkpointed every %s", st.CheckpointIntervalSecs, f.Trained[1].CheckpointInterval)
			}
			first := f.Released[0].Log
			// Time held is measured on the workflow's clock, which the test
			// suite does not move while an activity runs; the end-to-end
			// drill checks it.
			if first == nil || first.Preemptions != 1 {
				t.Errorf("the preempted instance's release taught %+v; want one preemption", first)
			}
			if last := f.Released[len(f.Released)-1].Log; last == nil || last.Preemptions != 0 {
				t.Errorf("the completed instance's release taught %+v; want no preemption", last)
			}
		})
	}
}

// Faults restart a run, waiting longer after each, and past the spec's
// max_restarts fail it, naming the cause; preemptions with a notice do
// not count.
func TestRestartsAreCappedAndBackOff(t *testing.T) {
	t.Parallel()
	repeat := func(n int, o activities.TrainingOutcome) []activities.TrainingOutcome {
		return slices.Repeat([]activities.TrainingOutcome{o}, n)
	}
	cases := map[string]struct {
		trainings   []activities.TrainingOutcome
		maxRestarts *int
		wantType    string // "" completes
		want        workload.Restarts
	}{
		"three trainer failures are tolerated": {trainings: repeat(3, activities.OutcomeFailed), want: workload.Restarts{capacity.TrainerFault: 3}},
		"a fourth fails the run":               {trainings: repeat(4, activities.OutcomeFailed), wantType: "TrainerFailed", want: workload.Restarts{capacity.TrainerFault: 4}},
		"instances going silent":               {trainings: repeat(4, "silent"), wantType: "InstanceLost", want: workload.Restarts{capacity.InstanceLost: 4}},
		"an agent failing":                     {trainings: repeat(4, "agent-failed"), wantType: "AgentFailed", want: workload.Restarts{capacity.AgentFault: 4}},
		"causes share one cap": {trainings: []activities.TrainingOutcome{activities.OutcomeFailed, "silent", "agent-failed", "silent"},
			wantType: "InstanceLost", want: workload.Restarts{capacity.TrainerFault: 1, capacity.AgentFault: 1, capacity.InstanceLost: 2}},
		"preemptions with notice are no faults": {trainings: repeat(6, activities.OutcomePreempted)},
		"max_restarts 0 tolerates none":         {trainings: repeat(1, "silent"), maxRestarts: new(int), wantType: "InstanceLost", want: workload.Restarts{capacity.InstanceLost: 1}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.SpotB}, Trainings: tc.trainings}
			env := newEnv(t, f)
			js := job(spec.TierFlexible)
			js.MaxRestarts = tc.maxRestarts
			env.ExecuteWorkflow(workflows.TrainingRunName, js)
			var st Status
			_, err := result(t, env)
			var app *temporal.ApplicationError
			switch {
			case tc.wantType == "" && err != nil:
				t.Fatalf("run failed: %v", err)
			case tc.wantType != "" && (!errors.As(err, &app) || app.Type() != tc.wantType || !strings.Contains(err.Error(), "max_restarts")):
				t.Fatalf("error %v; want %s naming max_restarts", err, tc.wantType)
			}
			st = queryStatus(t, env)
			if !maps.Equal(st.Restarts, tc.want) {
				t.Errorf("restarts %+v; want %+v", st.Restarts, tc.want)
			}
			if got, want := len(f.Released), len(f.Acquired); got != want {
				t.Errorf("released %d of %d instances", got, want)
			}
		})
	}
}

// The waits before acquiring again grow after each fault.
func TestRestartWaitsGrow(t *testing.T) {
	t.Parallel()
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA}, Trainings: []activities.TrainingOutcome{"silent", "silent", "silent"}}
	env := newEnv(t, f)
	var at []time.Time
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == activities.AcquireName {
			at = append(at, env.Now())
		}
	})
	env.ExecuteWorkflow(workflows.TrainingRunName, job(spec.TierFlexible))
	if _, err := result(t, env); err != nil {
		t.Fatal(err)
	}
	if len(at) != 4 {
		t.Fatalf("%d acquisitions; want 4", len(at))
	}
	base := workload.DefaultRunOptions().RestartBackoff
	for i := 1; i < len(at); i++ {
		gap, want := at[i].Sub(at[i-1]), base<<(i-1)
		if gap < want*4/5 || gap > want*6/5 {
			t.Errorf("wait before acquisition %d: %s; want %s give or take a fifth", i+1, gap, want)
		}
	}
}

// A run none of whose checkpoints verifies fails as a checkpoint failure
// rather than train again from step 0.
func TestNoCheckpointThatVerifiesFailsTheRun(t *testing.T) {
	t.Parallel()
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA}, Trainings: []activities.TrainingOutcome{"bad-checkpoints"}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.TrainingRunName, job(spec.TierFlexible))
	_, err := result(t, env)
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != capacity.CheckpointFault.Remedy().Type {
		t.Fatalf("error %v; want a checkpoint failure", err)
	}
	if st := queryStatus(t, env); len(st.Failures) != 1 || st.Failures[0].Class != string(capacity.CheckpointFault) || len(f.Acquired) != 1 || len(f.Released) != 1 {
		t.Errorf("failures %+v after %d acquisitions and %d releases; want one checkpoint failure on one instance, released", st.Failures, len(f.Acquired), len(f.Released))
	}
}
