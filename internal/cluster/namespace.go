package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// EnsureNamespace registers namespace with the given retention of closed
// workflows unless it exists. A fresh cluster (the Temporal server image
// without auto-setup) has none, and nothing runs without one.
func EnsureNamespace(ctx context.Context, ws workflowservice.WorkflowServiceClient, namespace string, retention time.Duration) (created bool, err error) {
	_, err = ws.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	var notFound *serviceerror.NamespaceNotFound
	if err == nil || !errors.As(err, &notFound) {
		if err != nil {
			return false, fmt.Errorf("describe namespace %s: %w", namespace, err)
		}
		return false, nil
	}
	_, err = ws.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: namespace, WorkflowExecutionRetentionPeriod: durationpb.New(retention),
		Description: "refuel's training runs, services and capacity pool",
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return false, fmt.Errorf("register namespace %s: %w", namespace, err)
	}
	return err == nil, nil
}
