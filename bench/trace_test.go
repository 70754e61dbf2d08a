package main

import (
	"context"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"refuel/activities"
)

// The trace follows a RunTraining from the poll that brought it to the
// agent's first heartbeat, tells the agent's polls apart, and counts what
// the cluster refused but not what the client itself cancelled.
func TestAgentTraceFollowsARunTraining(t *testing.T) {
	tr := newAgentTrace(t.TempDir())
	call := func(method string, req, reply proto.Message, answer proto.Message, err error) {
		t.Helper()
		invoker := func(_ context.Context, _ string, _, reply any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
			if answer != nil {
				proto.Merge(reply.(proto.Message), answer)
			}
			return err
		}
		if got := tr.intercept(context.Background(), method, req, reply, nil, invoker); got != err {
			t.Fatalf("%s: %v; want the call's own %v", method, got, err)
		}
	}
	const queue = "refuel-node-i-1"
	poll := &workflowservice.PollActivityTaskQueueRequest{TaskQueue: &taskqueuepb.TaskQueue{Name: queue}}
	started := time.Now().Add(-time.Second)
	call("/temporal.api.workflowservice.v1.WorkflowService/PollActivityTaskQueue", poll, &workflowservice.PollActivityTaskQueueResponse{},
		&workflowservice.PollActivityTaskQueueResponse{}, nil) // an empty poll
	call("/temporal.api.workflowservice.v1.WorkflowService/PollActivityTaskQueue", poll, &workflowservice.PollActivityTaskQueueResponse{},
		&workflowservice.PollActivityTaskQueueResponse{
			TaskToken: []byte("token-1"), ActivityType: &commonpb.ActivityType{Name: activities.RunTrainingName},
			WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: "run-1"}, StartedTime: timestamppb.New(started),
		}, nil)
	beat := &workflowservice.RecordActivityTaskHeartbeatRequest{TaskToken: []byte("token-1")}
	call("/temporal.api.workflowservice.v1.WorkflowService/RecordActivityTaskHeartbeat", beat, &workflowservice.RecordActivityTaskHeartbeatResponse{}, nil, nil)
	call("/temporal.api.workflowservice.v1.WorkflowService/PollActivityTaskQueue", poll, &workflowservice.PollActivityTaskQueueResponse{},
		nil, status.Error(codes.Canceled, "the agent stopped"))
	call("/temporal.api.workflowservice.v1.WorkflowService/PollActivityTaskQueue", poll, &workflowservice.PollActivityTaskQueueResponse{},
		nil, status.Error(codes.ResourceExhausted, "namespace count limit"))

	s := tr.seen("run-1", started.Add(-time.Second))
	if s.queue != queue || s.received.IsZero() || s.beatSent.IsZero() || s.beatTaken.IsZero() || !s.started.Equal(started) {
		t.Errorf("seen %+v; want the RunTraining received on %s, its first heartbeat sent and taken", s, queue)
	}
	if got := tr.seen("run-1", started.Add(time.Second)); !got.received.IsZero() {
		t.Errorf("a RunTraining started after the last one was seen: %+v", got)
	}
	if got, want := tr.refusals(), "PollActivityTaskQueue: ResourceExhausted 1"; got != want {
		t.Errorf("refusals %q; want %q (a cancelled poll is the client's own)", got, want)
	}
	tr.mu.Lock()
	polls := len(tr.polls[queue])
	tr.mu.Unlock()
	if polls != 4 {
		t.Errorf("%d polls of %s traced; want 4", polls, queue)
	}
}
