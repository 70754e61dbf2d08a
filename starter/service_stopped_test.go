package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"refuel/workflows/inference"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"refuel/pkg/autoscale"
	"refuel/workflows"
)

// The plain status of a stopped service: stopped since it was stopped,
// wanting nothing.
func TestStoppedServiceView(t *testing.T) {
	st := inference.Status{
		ID: "chat-13b", Team: "serving", Tier: "deadline", Placement: "spot-first", Priority: 90, State: workflows.StateStopped,
		MinReplicas: 1, MaxReplicas: 3, StartedAt: viewTime, StoppedAt: func() *time.Time { t := viewTime.Add(95 * time.Minute); return &t }(),
		Desired:         autoscale.Decision{Reason: "stopped"},
		LeadTimeSeconds: 150, CostUSD: 1.2346,
		LastMetrics: &autoscale.Metrics{At: viewTime.Add(90 * time.Minute), QPS: 28, QueueLength: 4, GPUUtilization: 0.85, Replicas: 2},
	}
	var out strings.Builder
	printServiceStatus(&out, st)
	golden(t, "service-status-stopped.golden", out.String())
}

// stoppingService is a service that is stopped after some load reports:
// the next is refused as the cluster refuses a signal to a closed
// workflow, and the service's close says it was stopped.
type stoppingService struct {
	client.Client
	reports, stopAfter int
	state              string // RefuelState once stopped
}

func (s *stoppingService) SignalWorkflow(context.Context, string, string, string, any) error {
	if s.reports == s.stopAfter {
		return serviceerror.NewNotFound("workflow execution already completed")
	}
	s.reports++
	return nil
}

func (s *stoppingService) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	info := &workflowpb.WorkflowExecutionInfo{Type: &commonpb.WorkflowType{Name: workflows.InferenceServiceName}, Status: enums.WORKFLOW_EXECUTION_STATUS_RUNNING}
	if s.reports == s.stopAfter {
		state, err := converter.GetDefaultDataConverter().ToPayload(s.state)
		if err != nil {
			return nil, err
		}
		info.Status = enums.WORKFLOW_EXECUTION_STATUS_CANCELED
		info.SearchAttributes = &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{workflows.AttrState.GetName(): state}}
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: info}, nil
}

func (s *stoppingService) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	return nil, errors.New("no worker in this test")
}

// A load generator whose service is stopped ends saying so, as a
// success; one whose service ended otherwise fails.
func TestLoadEndsWhenTheServiceStops(t *testing.T) {
	f := metricsFlags{metrics: autoscale.Metrics{QPS: 12}, every: time.Millisecond, span: 5 * time.Millisecond}
	for name, tc := range map[string]struct {
		state   string
		wantErr string
		want    string
	}{
		"stopped":   {state: "stopped", want: "service chat-13b stopped after 2 of 5 reports: there is no more load to report\n"},
		"cancelled": {state: "cancelled", wantErr: "chat-13b cancelled"},
	} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			err := sendMetrics(context.Background(), &stoppingService{stopAfter: 2, state: tc.state}, "chat-13b", f, &out)
			lines := strings.SplitAfter(out.String(), "\n")
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v; want it to say %q", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Errorf("error %v; want none", err)
			case tc.want != "" && lines[len(lines)-2] != tc.want:
				t.Errorf("output:\n%s\nwant it to end with %q", out.String(), tc.want)
			}
		})
	}
}
