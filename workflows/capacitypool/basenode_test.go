package capacitypool

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/pool"
	"refuel/workflows"
)

// A machine joins with the deployment's token, the pool hears each of
// its states, and one with a wrong token is refused and tells the pool
// nothing.
func TestBaseNode(t *testing.T) {
	token := []byte("0123456789abcdef0123")
	node := pool.Node{Name: "gpu-01", InstanceType: "a100-1x", GPUs: 1}
	cases := map[string]struct {
		token    []byte
		presence error // how NodePresence ends
		drain    bool
		want     []admission.NodeState
		refused  bool
	}{
		"leaves": {token: token, want: []admission.NodeState{"ready", "left"}},
		// and its process joins again after a restart: one machine.
		"goes silent, rejoins": {token: token, presence: errors.New("heartbeat timeout"), want: []admission.NodeState{"ready", "lost", "ready", "left"}},
		"drains, leaves":       {token: token, drain: true, want: []admission.NodeState{"ready", "draining", "left"}},
		// A drain outlives the machine going silent: its process joins
		// again draining, not ready.
		"drains, goes silent, rejoins": {token: token, drain: true, presence: errors.New("heartbeat timeout"),
			want: []admission.NodeState{"ready", "draining", "lost", "draining", "left"}},
		"wrong token": {token: []byte("not-the-token-0123456"), refused: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: BaseNodeID(node.Name)})
			env.RegisterWorkflowWithOptions(BaseNode, workflow.RegisterOptions{Name: workflows.BaseNodeName})
			joins := &activities.Joins{Token: token, HeartbeatTimeout: 10 * time.Second}
			env.RegisterActivityWithOptions(joins.Verify, activity.RegisterOptions{Name: activities.VerifyJoinName})
			env.RegisterActivityWithOptions(func(_ context.Context, in activities.PresenceInput) error {
				if in.Session == "s1" {
					return tc.presence
				}
				return nil
			}, activity.RegisterOptions{Name: activities.NodePresenceName})
			var told []admission.NodeState
			env.OnSignalExternalWorkflow(mock.Anything, workflows.PoolWorkflowID, "", workflows.SignalPoolNode, mock.Anything).Return(
				func(_, _, _, _ string, arg any) error {
					told = append(told, arg.(NodeChange).State)
					return nil
				})
			if tc.drain {
				// NodePresence ends at once: drain in the join's task.
				drained := false
				env.SetOnLocalActivityCompletedListener(func(*activity.Info, converter.EncodedValue, error) {
					if !drained { // the first join's; the operator drains once
						drained = true
						env.SignalWorkflow(workflows.SignalDrain, nil)
					}
				})
			}
			var joinErr error
			join := func(session string) {
				req := JoinRequest{Node: node, Session: session, Proof: pool.JoinProof(tc.token, node.Name, session)}
				env.UpdateWorkflow(workflows.UpdateJoin, "join-"+session, &testsuite.TestUpdateCallback{
					OnReject:   func(err error) { joinErr = err },
					OnAccept:   func() {},
					OnComplete: func(_ any, err error) { joinErr = err },
				}, req)
			}
			env.RegisterDelayedCallback(func() { join("s1") }, time.Second)
			env.RegisterDelayedCallback(func() { join("s2") }, time.Hour)
			env.ExecuteWorkflow(workflows.BaseNodeName, node.Name)
			if err := env.GetWorkflowError(); err != nil {
				t.Fatalf("workflow failed: %v", err)
			}
			if (joinErr != nil) != tc.refused {
				t.Errorf("join error %v, refused %v", joinErr, tc.refused)
			}
			if diff := cmp.Diff(told, tc.want, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("pool told got(-), want(+):\n%s", diff)
			}
		})
	}
}
