package workflows

import (
	"math"
	"testing"
	"time"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/policy"
	"refuel/pkg/spec"
)

func TestTrainingRunRecoversFromPreemptionInAnotherZone(t *testing.T) {
	t.Parallel()
	f := &fakeCloud{offerings: []capacity.Offering{spotA, spotB, odA}, trainings: []activities.TrainingOutcome{activities.OutcomePreempted}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(TrainingRunName, job(spec.TierFlexible))
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if st.Preemptions != 1 || st.Recoveries != 1 {
		t.Errorf("preemptions %d recoveries %d; want 1 and 1", st.Preemptions, st.Recoveries)
	}
	if len(f.requests) != 2 {
		t.Fatalf("%d acquisitions; want 2", len(f.requests))
	}
	if z := f.requests[1].Offerings[0].Zone; z != "b" {
		t.Errorf("replacement tried zone %s first; want b, away from the zone that preempted", z)
	}
	for _, o := range f.requests[0].Offerings {
		if o.Market == capacity.OnDemand {
			t.Errorf("flexible run asked for on-demand %s", o.Key())
		}
	}
	if f.requests[0].Attempt == f.requests[1].Attempt {
		t.Error("replacement reused the idempotency attempt of the lost instance")
	}
	if got := f.releasedReasons(); len(got) != 2 || got[0] != activities.ReleasePreempted {
		t.Errorf("released %v; want preempted then completed", got)
	}
	if f.trained[1].Attempt != 2 {
		t.Errorf("second training attempt %d; want 2", f.trained[1].Attempt)
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
			f := &fakeCloud{offerings: []capacity.Offering{spotA, spotB}, poolLog: tc.log, trainings: []activities.TrainingOutcome{activities.OutcomePreempted}}
			env := newEnv(t, f)
			js := job(spec.TierFlexible)
			js.Checkpoint.MinInterval, js.Checkpoint.MaxInterval = spec.Duration(tc.min), spec.Duration(tc.max)
			env.ExecuteWorkflow(TrainingRunName, js)
			st, err := result(t, env)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.trained[0].CheckpointInterval; got.Round(time.Millisecond) != tc.want.Round(time.Millisecond) {
				t.Errorf("checkpoint interval %s; want %s", got, tc.want)
			}
			if st.CheckpointIntervalSecs != f.trained[1].CheckpointInterval.Seconds() {
				t.Errorf("status says %.1fs; the last attempt checkpointed every %s", st.CheckpointIntervalSecs, f.trained[1].CheckpointInterval)
			}
			first := f.released[0].Log
			// Time held is measured on the workflow's clock, which the test
			// suite does not move while an activity runs; the end-to-end
			// drill checks it.
			if first == nil || first.Preemptions != 1 {
				t.Errorf("the preempted instance's release taught %+v; want one preemption", first)
			}
			if last := f.released[len(f.released)-1].Log; last == nil || last.Preemptions != 0 {
				t.Errorf("the completed instance's release taught %+v; want no preemption", last)
			}
		})
	}
}
