package activities

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"refuel/pkg/capacity"
)

// How long acquiring an instance can take, which the janitor's grace
// must outlast: until a run's Acquire activity returns, the run cannot
// have recorded the instance it launched.
const (
	// AcquireAttemptTimeout bounds one try of the Acquire activity (its
	// StartToCloseTimeout).
	AcquireAttemptTimeout = 3 * time.Minute
	// MaxAcquireTime bounds the Acquire activity with all its retries (its
	// ScheduleToCloseTimeout).
	MaxAcquireTime = 10 * time.Minute
	// JanitorGrace is how long the janitor leaves an instance alone after
	// its launch: MaxAcquireTime, and a minute for the run to record it.
	JanitorGrace = MaxAcquireTime + time.Minute
)

// Janitor holds the activities that find instances no run owns.
type Janitor struct {
	Providers []capacity.Provider
	Client    client.Client
	// Deployment is the deployment whose instances the janitor looks
	// after (TagDeployment); others' are not its to release. Empty means
	// DefaultDeployment.
	Deployment string
	// Grace protects instances launched moments ago, whose run may not
	// have recorded them yet; 0 means JanitorGrace.
	Grace time.Duration
	Now   func() time.Time
}

// ListManagedInstances lists every running instance refuel launched for
// the janitor's deployment, and every stopped one where a provider stops
// instances.
func (a *Janitor) ListManagedInstances(ctx context.Context) ([]ManagedInstance, error) {
	var out []ManagedInstance
	for _, p := range a.Providers {
		tags := map[string]string{capacity.TagManagedBy: capacity.ManagedBy, capacity.TagDeployment: deploymentOf(a.Deployment)}
		insts, err := p.List(ctx, tags)
		if err != nil {
			return nil, err
		}
		// A stopped instance (a warm-pool entry) still costs its volume:
		// one no run owns is released as a running one is.
		if s, ok := p.(capacity.Stopper); ok {
			stopped, err := s.ListStopped(ctx, tags)
			if err != nil {
				return nil, err
			}
			insts = append(insts, stopped...)
		}
		for _, inst := range insts {
			out = append(out, ManagedInstance{Instance: inst, RunID: inst.Tags[capacity.TagRun]})
		}
	}
	return out, nil
}

// RunOwnsInstance reports whether the run named on an instance is still
// running and holds that instance (or may be about to record it).
func (a *Janitor) RunOwnsInstance(ctx context.Context, in OwnershipInput) (bool, error) {
	if in.RunID == "" {
		return false, nil
	}
	desc, err := a.Client.DescribeWorkflowExecution(ctx, in.RunID, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if desc.GetWorkflowExecutionInfo().GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return false, nil
	}
	resp, err := a.Client.QueryWorkflow(ctx, in.RunID, "", "status")
	if err != nil {
		return true, nil // a running run that cannot answer now keeps its instance
	}
	var raw json.RawMessage
	if err := resp.Get(&raw); err == nil && statusHolds(raw, in.InstanceID) {
		return true, nil
	}
	return a.recentlyLaunched(ctx, in.InstanceID), nil
}

// instanceRef is how any workflow's status names an instance it holds.
type instanceRef struct {
	ID string `json:"id"`
}

// statusHolds reports whether a status query's answer names the
// instance: a training run's `instance`, or one of an inference
// service's `replicas[].instance` (warm-pool instances included).
func statusHolds(raw json.RawMessage, instanceID string) bool {
	var st struct {
		Instance *instanceRef `json:"instance"`
		Replicas []struct {
			Instance *instanceRef `json:"instance"`
		} `json:"replicas"`
	}
	if json.Unmarshal(raw, &st) != nil {
		return false
	}
	if st.Instance != nil && st.Instance.ID == instanceID {
		return true
	}
	for _, r := range st.Replicas {
		if r.Instance != nil && r.Instance.ID == instanceID {
			return true
		}
	}
	return false
}

func (a *Janitor) recentlyLaunched(ctx context.Context, id string) bool {
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	for _, p := range a.Providers {
		inst, _, err := p.Describe(ctx, id)
		if err == nil {
			grace := a.Grace
			if grace == 0 {
				grace = JanitorGrace
			}
			return now().Sub(inst.LaunchedAt) < grace
		}
	}
	return false
}
