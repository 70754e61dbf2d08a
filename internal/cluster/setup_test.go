package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
)

// freshCluster is a cluster with no namespace, whose operator service
// knows a namespace only unknownFor calls after it was registered, as
// a real frontend's namespace cache does.
type freshCluster struct {
	workflowservice.WorkflowServiceClient
	operatorservice.OperatorServiceClient
	registered bool
	unknownFor int
	attrs      map[string]enums.IndexedValueType
}

func (f *freshCluster) DescribeNamespace(context.Context, *workflowservice.DescribeNamespaceRequest, ...grpc.CallOption) (*workflowservice.DescribeNamespaceResponse, error) {
	if !f.registered {
		return nil, serviceerror.NewNamespaceNotFound("refuel")
	}
	return &workflowservice.DescribeNamespaceResponse{}, nil
}

func (f *freshCluster) RegisterNamespace(context.Context, *workflowservice.RegisterNamespaceRequest, ...grpc.CallOption) (*workflowservice.RegisterNamespaceResponse, error) {
	f.registered = true
	return &workflowservice.RegisterNamespaceResponse{}, nil
}

func (f *freshCluster) known() error {
	if !f.registered {
		return serviceerror.NewNamespaceNotFound("refuel")
	}
	if f.unknownFor > 0 {
		f.unknownFor--
		return serviceerror.NewNotFound("Namespace refuel is not found.")
	}
	return nil
}

func (f *freshCluster) ListSearchAttributes(context.Context, *operatorservice.ListSearchAttributesRequest, ...grpc.CallOption) (*operatorservice.ListSearchAttributesResponse, error) {
	if err := f.known(); err != nil {
		return nil, err
	}
	return &operatorservice.ListSearchAttributesResponse{CustomAttributes: f.attrs}, nil
}

func (f *freshCluster) AddSearchAttributes(_ context.Context, req *operatorservice.AddSearchAttributesRequest, _ ...grpc.CallOption) (*operatorservice.AddSearchAttributesResponse, error) {
	if err := f.known(); err != nil {
		return nil, err
	}
	for k, v := range req.GetSearchAttributes() {
		f.attrs[k] = v
	}
	return &operatorservice.AddSearchAttributesResponse{}, nil
}

func TestSetupSucceedsOnItsFirstCallOnAFreshCluster(t *testing.T) {
	attrs := map[string]enums.IndexedValueType{"RefuelTeam": enums.INDEXED_VALUE_TYPE_KEYWORD, "RefuelPriority": enums.INDEXED_VALUE_TYPE_INT}
	for name, tc := range map[string]struct {
		unknownFor int
		timeout    time.Duration
		wantErr    string
	}{
		"known at once":       {unknownFor: 0, timeout: time.Second},
		"known after a while": {unknownFor: 3, timeout: time.Second},
		"never known in time": {unknownFor: 1 << 30, timeout: 50 * time.Millisecond, wantErr: "registered but the cluster does not know it yet"},
	} {
		t.Run(name, func(t *testing.T) {
			f := &freshCluster{unknownFor: tc.unknownFor, attrs: map[string]enums.IndexedValueType{}}
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			created, err := Setup(ctx, f, f, "refuel", 72*time.Hour, attrs, time.Millisecond)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v; want it to say %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !created || len(f.attrs) != len(attrs) {
				t.Fatalf("created %v, attributes %v, error %v; want the namespace created and every attribute added", created, f.attrs, err)
			}
		})
	}
}
