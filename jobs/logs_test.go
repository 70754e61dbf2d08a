package jobs

import (
	"context"
	"errors"
	"strings"
	"testing"

	"refuel/workflows/training"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// historyClient serves a run's first history event, and its status
// when it has one.
type historyClient struct {
	client.Client
	input  *commonpb.Payloads
	status *training.Status
}

func (h historyClient) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	if h.status == nil {
		return nil, errors.New("no worker answers the query")
	}
	return statusValue{*h.status}, nil
}

type statusValue struct{ st training.Status }

func (v statusValue) HasValue() bool { return true }
func (v statusValue) Get(p any) error {
	*p.(*training.Status) = v.st
	return nil
}

func (h historyClient) GetWorkflowHistory(context.Context, string, string, bool, enums.HistoryEventFilterType) client.HistoryEventIterator {
	return &oneEvent{ev: &historypb.HistoryEvent{
		EventType: enums.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{
			WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{Input: h.input},
		},
	}}
}

type oneEvent struct{ ev *historypb.HistoryEvent }

func (o *oneEvent) HasNext() bool { return o.ev != nil }
func (o *oneEvent) Next() (*historypb.HistoryEvent, error) {
	ev := o.ev
	o.ev = nil
	return ev, nil
}

func TestStoreURL(t *testing.T) {
	dc := converter.GetDefaultDataConverter()
	payloads := func(v ...any) *commonpb.Payloads {
		p, err := dc.ToPayloads(v...)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := map[string]struct {
		input    *commonpb.Payloads
		status   *training.Status
		fallback string
		want     string
		wantErr  string
	}{
		"the spec's store": {
			input: payloads(map[string]any{"id": "j", "checkpoint": map[string]any{"url": "s3://bucket/ckpt"}}, nil), fallback: "file:///x",
			want: "s3://bucket/ckpt",
		},
		"the store the status records": {
			input: payloads(map[string]any{"id": "j"}), status: &training.Status{RunRecord: training.RunRecord{StoreURL: "file:///worker/data/checkpoints"}},
			fallback: "file:///here/.refuel/checkpoints", want: "file:///worker/data/checkpoints",
		},
		"a status from before runs said": {
			input: payloads(map[string]any{"id": "j", "checkpoint": map[string]any{"url": "s3://bucket/ckpt"}}), status: &training.Status{},
			want: "s3://bucket/ckpt",
		},
		"the worker's default": {input: payloads(map[string]any{"id": "j"}), fallback: "file:///data/checkpoints", want: "file:///data/checkpoints"},
		"no default":           {input: payloads(map[string]any{"id": "j"}), wantErr: "pass the worker's store as --checkpoint-url"},
		"no input":             {input: nil, wantErr: "started with no JobSpec"},
		"undecodable (encrypted)": {
			input:   &commonpb.Payloads{Payloads: []*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("binary/encrypted")}, Data: []byte{1, 2}}}},
			wantErr: "are the same codec keys set as the worker's?",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := StoreURL(context.Background(), historyClient{input: tc.input, status: tc.status}, dc, "j", tc.fallback)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
