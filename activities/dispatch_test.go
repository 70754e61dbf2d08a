package activities

import (
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflow/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// A RunTraining the cluster started a while ago without a heartbeat never
// reached its agent, which heartbeats as it takes one; one heartbeated,
// one not yet taken and one taken a moment ago are not lost. The newest
// pending RunTraining the run is not cancelling is the one asked about.
func TestReachOf(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *timestamppb.Timestamp { return timestamppb.New(now.Add(-ago)) }
	training := func(state enums.PendingActivityState, scheduled, started, beat time.Duration) *workflow.PendingActivityInfo {
		pa := &workflow.PendingActivityInfo{
			ActivityType: &commonpb.ActivityType{Name: RunTrainingName}, State: state, ScheduledTime: at(scheduled),
		}
		if started > 0 {
			pa.LastStartedTime = at(started)
		}
		if beat > 0 {
			pa.LastHeartbeatTime = at(beat)
		}
		return pa
	}
	other := &workflow.PendingActivityInfo{ActivityType: &commonpb.ActivityType{Name: ReplaceName}, State: enums.PENDING_ACTIVITY_STATE_STARTED,
		ScheduledTime: at(time.Minute), LastStartedTime: at(time.Minute)}
	for name, tc := range map[string]struct {
		pending []*workflow.PendingActivityInfo
		want    Reach
	}{
		"none pending":                  {pending: []*workflow.PendingActivityInfo{other}, want: ReachWaiting},
		"not taken yet":                 {pending: []*workflow.PendingActivityInfo{training(enums.PENDING_ACTIVITY_STATE_SCHEDULED, 10*time.Second, 0, 0)}, want: ReachWaiting},
		"taken a moment ago":            {pending: []*workflow.PendingActivityInfo{training(enums.PENDING_ACTIVITY_STATE_STARTED, 5*time.Second, time.Second, 0)}, want: ReachWaiting},
		"heartbeated":                   {pending: []*workflow.PendingActivityInfo{training(enums.PENDING_ACTIVITY_STATE_STARTED, 9*time.Second, 8*time.Second, 7*time.Second)}, want: ReachHeard},
		"started long ago, never heard": {pending: []*workflow.PendingActivityInfo{training(enums.PENDING_ACTIVITY_STATE_STARTED, 9*time.Second, 8*time.Second, 0)}, want: ReachLost},
		"the one being cancelled does not count": {pending: []*workflow.PendingActivityInfo{
			training(enums.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED, 20*time.Second, 19*time.Second, 0),
			training(enums.PENDING_ACTIVITY_STATE_STARTED, 9*time.Second, 8*time.Second, 7*time.Second),
		}, want: ReachHeard},
		"the newest counts": {pending: []*workflow.PendingActivityInfo{
			training(enums.PENDING_ACTIVITY_STATE_STARTED, 20*time.Second, 19*time.Second, 18*time.Second),
			training(enums.PENDING_ACTIVITY_STATE_STARTED, 9*time.Second, 8*time.Second, 0),
		}, want: ReachLost},
	} {
		if got := reachOf(tc.pending, now); got != tc.want {
			t.Errorf("%s: %s; want %s", name, got, tc.want)
		}
	}
}
