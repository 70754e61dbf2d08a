package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
)

// Setup makes a cluster ready for refuel: namespace registered (with
// retention, unless it exists) and attrs added to it. A namespace just
// registered is unknown for a while to the services that add search
// attributes (they refresh their namespace cache every few seconds), so
// Setup asks again every poll until they know it or ctx ends: one call
// on a fresh cluster succeeds.
func Setup(ctx context.Context, ws workflowservice.WorkflowServiceClient, op operatorservice.OperatorServiceClient,
	namespace string, retention time.Duration, attrs map[string]enums.IndexedValueType, poll time.Duration) (created bool, err error) {
	created, err = EnsureNamespace(ctx, ws, namespace, retention)
	if err != nil {
		return false, err
	}
	for {
		err = EnsureSearchAttributes(ctx, op, namespace, attrs)
		if err == nil || !namespaceUnknown(err) {
			return created, err
		}
		select {
		case <-ctx.Done():
			return created, fmt.Errorf("namespace %s is registered but the cluster does not know it yet: %w; run setup again, or give it longer with --wait", namespace, err)
		case <-time.After(poll):
		}
	}
}

// namespaceUnknown reports whether err says the namespace does not exist.
func namespaceUnknown(err error) bool {
	var nsNotFound *serviceerror.NamespaceNotFound
	var notFound *serviceerror.NotFound
	return errors.As(err, &nsNotFound) || errors.As(err, &notFound)
}
