package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
)

// EnsureSearchAttributes registers in namespace those of attrs it lacks, so
// operators can filter runs by them. The dev server calls it on every start,
// because a database made by an older refuel may lack newer attributes, and
// `starter setup` calls it against an external cluster. An attribute that
// already exists with another type is an error: changing its type would break
// the queries and the workflows that set it.
func EnsureSearchAttributes(ctx context.Context, op operatorservice.OperatorServiceClient, namespace string, attrs map[string]enums.IndexedValueType) error {
	missing, err := missingSearchAttributes(ctx, op, namespace, attrs)
	if err != nil || len(missing) == 0 {
		return err
	}
	_, err = op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace:        namespace,
		SearchAttributes: missing,
	})
	if err != nil {
		return fmt.Errorf("add search attributes %v to namespace %s: %w", slices.Sorted(maps.Keys(missing)), namespace, err)
	}

	// Look again: on SQL visibility the server skips, without an error, a
	// name that another client added in the meantime, possibly with another
	// type.
	still, err := missingSearchAttributes(ctx, op, namespace, attrs)
	if err != nil {
		return err
	}
	if len(still) > 0 {
		return fmt.Errorf("search attributes %v are still missing from namespace %s after adding them", slices.Sorted(maps.Keys(still)), namespace)
	}
	return nil
}

// missingSearchAttributes returns those of attrs not defined in namespace,
// or an error naming every attribute defined with a different type.
func missingSearchAttributes(ctx context.Context, op operatorservice.OperatorServiceClient, namespace string, attrs map[string]enums.IndexedValueType) (map[string]enums.IndexedValueType, error) {
	resp, err := op.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, fmt.Errorf("list search attributes of namespace %s: %w", namespace, err)
	}

	missing := map[string]enums.IndexedValueType{}
	var conflicts []error
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		want := attrs[name]
		if got, ok := resp.GetSystemAttributes()[name]; ok {
			conflicts = append(conflicts, fmt.Errorf("search attribute %s is a system attribute (%s) in namespace %s; refuel needs a custom %s", name, got, namespace, want))
			continue
		}
		got, ok := resp.GetCustomAttributes()[name]
		switch {
		case !ok:
			missing[name] = want
		case got != want:
			conflicts = append(conflicts, fmt.Errorf("search attribute %s has type %s in namespace %s but refuel needs %s; remove it or use another namespace", name, got, namespace, want))
		}
	}
	if len(conflicts) > 0 {
		return nil, errors.Join(conflicts...)
	}
	return missing, nil
}
