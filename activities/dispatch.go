package activities

import (
	"context"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"
)

// TrainingReachName is the local activity that says whether a run's
// RunTraining reached its agent.
const TrainingReachName = "TrainingReach"

// Reach is where a run's RunTraining stands with its agent, as the
// cluster sees it.
type Reach string

const (
	// ReachWaiting: no agent took it yet, or one took it a moment ago.
	ReachWaiting Reach = "waiting"
	// ReachHeard: its agent heartbeats it.
	ReachHeard Reach = "heard"
	// ReachLost: the cluster started it a while ago and heard no
	// heartbeat: the task never reached the agent, which heartbeats as it
	// takes one.
	ReachLost Reach = "lost"
)

// lostAfter is how long a started RunTraining goes without its first
// heartbeat before the cluster's start is taken for one that never
// reached the agent.
const lostAfter = 2 * time.Second

// ReachInput names the run whose RunTraining is asked about: the newest
// one pending that the run is not cancelling.
type ReachInput struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
}

// Dispatch holds the activity that asks the cluster about a run's
// RunTraining. Client is the worker's own.
type Dispatch struct {
	Client client.Client
	Now    func() time.Time
}

// TrainingReach says whether the run's RunTraining reached its agent.
func (d *Dispatch) TrainingReach(ctx context.Context, in ReachInput) (Reach, error) {
	desc, err := d.Client.DescribeWorkflowExecution(ctx, in.WorkflowID, in.RunID)
	if err != nil {
		return "", err
	}
	now := time.Now()
	if d.Now != nil {
		now = d.Now()
	}
	return reachOf(desc.GetPendingActivities(), now), nil
}

// reachOf is where the newest RunTraining pending, and not being
// cancelled, stands at now.
func reachOf(pending []*workflow.PendingActivityInfo, now time.Time) Reach {
	var newest *workflow.PendingActivityInfo
	for _, pa := range pending {
		if pa.GetActivityType().GetName() != RunTrainingName || pa.GetState() == enums.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED {
			continue
		}
		if newest == nil || pa.GetScheduledTime().AsTime().After(newest.GetScheduledTime().AsTime()) {
			newest = pa
		}
	}
	switch {
	case newest == nil:
		return ReachWaiting // it ended meanwhile: the run reads its result
	case newest.GetLastHeartbeatTime() != nil:
		return ReachHeard
	case newest.GetState() == enums.PENDING_ACTIVITY_STATE_STARTED && now.Sub(newest.GetLastStartedTime().AsTime()) >= lostAfter:
		return ReachLost
	}
	return ReachWaiting
}
