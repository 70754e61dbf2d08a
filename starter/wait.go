package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"refuel/jobs"
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

// Completed reports whether the run ended by completing its work.
func (e Ending) Completed() bool { return e.Result == resultCompleted }

const (
	resultCompleted  = "completed"
	resultFailed     = "failed"
	resultCancelled  = "cancelled"
	resultTerminated = "terminated"
	resultTimedOut   = "timed-out"
	resultRunning    = "running"
)

// resultOf names a workflow execution status.
func resultOf(s enums.WorkflowExecutionStatus) string {
	switch s {
	case enums.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return resultCompleted
	case enums.WORKFLOW_EXECUTION_STATUS_FAILED:
		return resultFailed
	case enums.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return resultCancelled
	case enums.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return resultTerminated
	case enums.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return resultTimedOut
	case enums.WORKFLOW_EXECUTION_STATUS_RUNNING, enums.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return resultRunning
	}
	return s.String()
}

// EndedError says a run or service ended without completing: exit 1.
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

func runWait(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("wait", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn := addConnFlags(fs)
	asJSON := fs.Bool("json", false, "print how it ended as one JSON object: id, type, result, state, error, status")
	timeout := fs.Duration("timeout", 0, "give up waiting after this long (exit 1; the run goes on); 0 waits for as long as it takes")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("give one run's or service's id: starter wait ID")
	}
	if *timeout < 0 {
		return usagef("--timeout %s: give a duration of 0 (no limit) or more, such as 2h", *timeout)
	}
	ctx := context.Background()
	c, err := conn.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := requireWorkload(ctx, c, pos[0]); err != nil {
		return err
	}
	e, err := waitEnding(ctx, c, pos[0], *timeout)
	if err != nil {
		return err
	}
	return reportEnding(stdout, e, *asJSON)
}

// requireWorkload checks that id names a training run or a service.
func requireWorkload(ctx context.Context, c client.Client, id string) (jobs.Workflow, error) {
	w, err := jobs.Describe(ctx, c, id)
	if err != nil {
		return w, err
	}
	if w.Type != workflows.TrainingRunName && w.Type != workflows.InferenceServiceName {
		return w, fmt.Errorf("%s is %s, not a training run or a service", id, kindOf(w.Type))
	}
	return w, nil
}

// reportEnding prints how a run ended and returns *EndedError unless it
// completed.
func reportEnding(stdout io.Writer, e Ending, asJSON bool) error {
	if asJSON {
		if err := json.NewEncoder(stdout).Encode(e); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(stdout, endingLine(e))
	}
	if !e.Completed() {
		return &EndedError{Ending: e}
	}
	return nil
}

// endingLine is how a run ended, in one line.
func endingLine(e Ending) string {
	line := fmt.Sprintf("%s %s", e.ID, e.Result)
	if e.State != "" && e.State != e.Result {
		line += " (state " + e.State + ")"
	}
	var st struct {
		Step       int64   `json:"step"`
		TotalSteps int64   `json:"total_steps"`
		CostUSD    float64 `json:"cost_usd"`
		Checkpoint *struct {
			Step int64 `json:"step"`
		} `json:"last_checkpoint"`
	}
	if len(e.Status) > 0 && json.Unmarshal(e.Status, &st) == nil {
		if st.TotalSteps > 0 {
			line += fmt.Sprintf(", step %d of %d", st.Step, st.TotalSteps)
		}
		if st.Checkpoint != nil {
			line += fmt.Sprintf(", last checkpoint at step %d", st.Checkpoint.Step)
		}
		line += fmt.Sprintf(", cost $%.4f", st.CostUSD)
	}
	if e.Error != "" {
		line += ": " + e.Error
	}
	return line
}

// waitEnding waits for the workflow, following continue-as-new, to close,
// then describes how. timeout 0 waits without limit.
func waitEnding(ctx context.Context, c client.Client, id string, timeout time.Duration) (Ending, error) {
	wctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	runErr := c.GetWorkflow(wctx, id, "").Get(wctx, nil)
	if wctx.Err() != nil {
		return Ending{}, fmt.Errorf("%s still running after %s (it goes on; wait again or raise --timeout)", id, timeout)
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
	e := Ending{ID: id, Type: kindName(info.GetType().GetName()), Result: resultOf(info.GetStatus())}
	if p := info.GetSearchAttributes().GetIndexedFields()[workflows.AttrState.GetName()]; p != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &e.State)
	}
	switch e.Result {
	case resultTerminated, resultTimedOut:
		e.State = e.Result // the run ran no code to record it
	case resultFailed:
		e.Error = failureMessage(runErr)
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

// failureMessage is the innermost cause of a run's failure: the run's own
// words, without the SDK's wrapping.
func failureMessage(err error) string {
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

// kindName is how list and wait name a workflow type.
func kindName(workflowType string) string {
	switch workflowType {
	case workflows.TrainingRunName:
		return "training"
	case workflows.InferenceServiceName:
		return "service"
	}
	return workflowType
}
