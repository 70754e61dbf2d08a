package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"refuel/workflows"
)

// Ending is how a run or service ended, as `starter wait --json` prints it.
type Ending struct {
	ID   string `json:"id"`
	Type string `json:"type"` // training or service
	// Result is the workflow's close: completed, failed, cancelled,
	// terminated or timed-out.
	Result string `json:"result"`
	// State is the run's own last state (RefuelState): the same as Result
	// for a run that ended by itself, "failed:CLASS" for a failure with a
	// class, and "terminated" for a run stopped from outside, which runs no
	// code to say so.
	State string `json:"state"`
	// Error is why a run failed, from its close.
	Error string `json:"error,omitempty"`
	// Status is the run's (or service's) last answer to the status query,
	// when the worker could give it.
	Status json.RawMessage `json:"status,omitempty"`
}

// Succeeded reports whether the workload ended as it should: a run by
// completing its work, a service by being stopped (which Temporal
// records as a cancellation, and the service's state as stopped).
func (e Ending) Succeeded() bool {
	return e.Result == ResultCompleted || e.Result == ResultCancelled && e.State == string(workflows.StateStopped)
}

// The results of Ending.Result, and of a list row's while it runs.
const (
	ResultCompleted  = "completed"
	ResultFailed     = "failed"
	ResultCancelled  = "cancelled"
	ResultTerminated = "terminated"
	ResultTimedOut   = "timed-out"
	ResultRunning    = "running"
)

// ResultOf names a workflow execution status.
func ResultOf(s enums.WorkflowExecutionStatus) string {
	switch s {
	case enums.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return ResultCompleted
	case enums.WORKFLOW_EXECUTION_STATUS_FAILED:
		return ResultFailed
	case enums.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return ResultCancelled
	case enums.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return ResultTerminated
	case enums.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return ResultTimedOut
	case enums.WORKFLOW_EXECUTION_STATUS_RUNNING, enums.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return ResultRunning
	}
	return s.String()
}

// EndedError says a run or service ended without completing.
type EndedError struct{ Ending Ending }

func (e *EndedError) Error() string {
	msg := fmt.Sprintf("%s %s", e.Ending.ID, e.Ending.Result)
	if e.Ending.State != "" && e.Ending.State != e.Ending.Result {
		msg += fmt.Sprintf(" (state %s)", e.Ending.State)
	}
	if e.Ending.Error != "" {
		msg += ": " + e.Ending.Error
	}
	return msg
}

// StillRunningError says a wait gave up while the workflow goes on.
type StillRunningError struct {
	ID    string
	After time.Duration
}

func (e *StillRunningError) Error() string {
	return fmt.Sprintf("%s still running after %s (it goes on; wait again or raise --timeout)", e.ID, e.After)
}

// WaitEnding waits for the workflow, following continue-as-new, to close,
// then describes how. timeout 0 waits without limit; past it the error is
// *StillRunningError.
func WaitEnding(ctx context.Context, c client.Client, id string, timeout time.Duration) (Ending, error) {
	wctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	runErr := c.GetWorkflow(wctx, id, "").Get(wctx, nil)
	if wctx.Err() != nil {
		return Ending{}, &StillRunningError{ID: id, After: timeout}
	}
	return describeEnding(ctx, c, id, runErr)
}

// describeEnding reads how a closed workflow ended: its close status,
// its last RefuelState and its last status.
func describeEnding(ctx context.Context, c client.Client, id string, runErr error) (Ending, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return Ending{}, fmt.Errorf("describe %s: %w", id, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	e := Ending{ID: id, Type: KindName(info.GetType().GetName()), Result: ResultOf(info.GetStatus())}
	if p := info.GetSearchAttributes().GetIndexedFields()[workflows.AttrState.GetName()]; p != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &e.State)
	}
	switch e.Result {
	case ResultTerminated, ResultTimedOut:
		e.State = e.Result // the run ran no code to record it
	case ResultFailed:
		e.Error = FailureMessage(runErr)
	}
	if e.State == "" {
		e.State = e.Result
	}
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if v, err := c.QueryWorkflow(qctx, id, "", workflows.QueryStatus); err == nil {
		var raw json.RawMessage
		if v.Get(&raw) == nil {
			e.Status = raw
		}
	}
	return e, nil
}

// FailureMessage is the innermost cause of a run's failure: the run's own
// words, without the SDK's wrapping.
func FailureMessage(err error) string {
	if err == nil {
		return ""
	}
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// KindName is how list and wait name a workflow type.
func KindName(workflowType string) string {
	switch workflowType {
	case workflows.TrainingRunName:
		return "training"
	case workflows.InferenceServiceName:
		return "service"
	case workflows.DevEnvironmentName:
		return "dev"
	case workflows.ServiceReplicaName:
		return "replica"
	}
	return workflowType
}

// Workload checks that id names a training run or a service.
func Workload(ctx context.Context, c client.Client, id string) (Workflow, error) {
	w, err := Describe(ctx, c, id)
	if err != nil {
		return w, err
	}
	if w.Type == workflows.ServiceReplicaName {
		return w, fmt.Errorf("%s is %s, not a training run or a service: use its service's id, %s", id, KindOf(w.Type), ServiceOfReplica(id))
	}
	if w.Type != workflows.TrainingRunName && w.Type != workflows.InferenceServiceName {
		return w, fmt.Errorf("%s is %s, not a training run or a service", id, KindOf(w.Type))
	}
	return w, nil
}

// workflowKinds name workflow types as people know them.
var workflowKinds = map[string]string{
	workflows.TrainingRunName:      "a training run",
	workflows.InferenceServiceName: "an inference service",
	workflows.DevEnvironmentName:   "a development environment",
	workflows.CapacityPoolName:     "the capacity pool",
	workflows.ServiceReplicaName:   "a service's replica",
}

// ServiceOfReplica is the service a replica's id belongs to: replicas
// are named SERVICE/rN.
func ServiceOfReplica(id string) string {
	if i := strings.LastIndex(id, "/r"); i > 0 {
		return id[:i]
	}
	return id
}

// KindOf names a workflow type with its article: "a training run".
func KindOf(workflowType string) string {
	if k, ok := workflowKinds[workflowType]; ok {
		return k
	}
	return "a " + workflowType + " workflow"
}

// RequireType refuses an id that names another type of workflow than
// want, saying what to do instead. Signals need this: one sent to a
// workflow that does not handle it is accepted and silently buffered.
func RequireType(ctx context.Context, c client.Client, id, want, instead string) (Workflow, error) {
	w, err := Describe(ctx, c, id)
	if err != nil {
		return w, err
	}
	if w.Type != want {
		return w, fmt.Errorf("%s is %s, not %s: %s", id, KindOf(w.Type), KindOf(want), instead)
	}
	return w, nil
}

// Cancel asks a run or service to cancel and waits until it has ended: a
// run checkpoints, releases its instance and leaves the pool; a service
// gives back every replica. One that has already ended is an error that
// says how it ended.
func Cancel(ctx context.Context, c client.Client, id string, timeout time.Duration, progress io.Writer) (Ending, error) {
	w, err := Workload(ctx, c, id)
	if err != nil {
		return Ending{}, err
	}
	if !w.Running {
		e, err := describeEnding(ctx, c, id, nil)
		if err != nil {
			return e, err
		}
		return e, fmt.Errorf("%s has already ended (%s): there is nothing to cancel", id, e.Result)
	}
	err = c.CancelWorkflow(ctx, id, "")
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return Ending{}, fmt.Errorf("%s ended while being cancelled: starter wait %s says how", id, id)
	}
	if err != nil {
		return Ending{}, fmt.Errorf("cancel %s: %w", id, err)
	}
	fmt.Fprintf(progress, "cancellation of %s requested; waiting for its final checkpoint and releases\n", id)
	return WaitEnding(ctx, c, id, timeout)
}
