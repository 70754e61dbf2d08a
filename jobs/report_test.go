package jobs

import (
	"testing"

	"refuel/workflows/training"

	"github.com/google/go-cmp/cmp"
	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"

	"refuel/activities"
)

// A run's status takes the step of its agent's latest report and the
// newer checkpoint, and step and checkpoint never contradict each other.
func TestWithReport(t *testing.T) {
	ck := func(step int64) *activities.CheckpointRef { return &activities.CheckpointRef{Step: step} }
	progressAt := func(step, total int64, c *activities.CheckpointRef) training.Status {
		var st training.Status
		st.Step, st.TotalSteps, st.LastCheckpoint = step, total, c
		return st
	}
	for name, tc := range map[string]struct {
		st   training.Status
		p    activities.Progress
		want training.Status
	}{
		"before the first checkpoint": {
			st:   progressAt(0, 0, nil),
			p:    activities.Progress{Step: 149, TotalSteps: 1200},
			want: progressAt(149, 1200, nil),
		},
		"a checkpoint not signalled yet": {
			st:   progressAt(210, 1200, ck(200)),
			p:    activities.Progress{Step: 530, TotalSteps: 1200, Checkpoint: ck(500)},
			want: progressAt(530, 1200, ck(500)),
		},
		"a checkpoint signalled after the heartbeat": {
			st:   progressAt(510, 1200, ck(500)),
			p:    activities.Progress{Step: 490, TotalSteps: 1200, Checkpoint: ck(400)},
			want: progressAt(500, 1200, ck(500)),
		},
		"resumed after a loss": {
			st:   progressAt(548, 1200, ck(500)),
			p:    activities.Progress{Step: 505, TotalSteps: 1200},
			want: progressAt(505, 1200, ck(500)),
		},
		"restoring, before the trainer's first step": {
			st:   progressAt(548, 1200, ck(500)),
			p:    activities.Progress{TotalSteps: 1200},
			want: progressAt(500, 1200, ck(500)),
		},
		"a step behind the checkpoint": {
			st:   progressAt(100, 0, ck(100)),
			p:    activities.Progress{Step: 120, Checkpoint: ck(300)},
			want: progressAt(300, 0, ck(300)),
		},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, withReport(tc.st, tc.p)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// The report is the newest attempt's on the run's instance: not a gang's
// other rank's, nor that of an instance the run lost.
func TestLatestReportIsTheRunsInstancesNewestAttempt(t *testing.T) {
	beat := func(name string, p activities.Progress) *workflowpb.PendingActivityInfo {
		details, err := converter.GetDefaultDataConverter().ToPayloads(p)
		if err != nil {
			t.Fatal(err)
		}
		return &workflowpb.PendingActivityInfo{ActivityType: &commonpb.ActivityType{Name: name}, HeartbeatDetails: details}
	}
	pending := []*workflowpb.PendingActivityInfo{
		beat(activities.RunTrainingName, activities.Progress{Attempt: 2, InstanceID: "i-lost", Step: 548}),
		beat(activities.RunTrainingName, activities.Progress{Attempt: 3, InstanceID: "i-rank1", Step: 900}),
		beat(activities.RunTrainingName, activities.Progress{Attempt: 3, InstanceID: "i-now", Step: 505}),
		beat(activities.RunTrainingName, activities.Progress{Attempt: 2, InstanceID: "i-now", Step: 10}),
		beat("Acquire", activities.Progress{Attempt: 4, InstanceID: "i-now", Step: 999}),
		{ActivityType: &commonpb.ActivityType{Name: activities.RunTrainingName}}, // no heartbeat yet
	}
	p, ok := latestReport(pending, nil, "i-now")
	if !ok || p.Attempt != 3 || p.Step != 505 {
		t.Errorf("latestReport: %+v, %v; want attempt 3's on i-now at step 505", p, ok)
	}
	if _, ok := latestReport(pending, nil, "i-other"); ok {
		t.Error("a report of an instance the run does not hold")
	}
}
