package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"refuel/activities"
	"refuel/pkg/devenv"
	"refuel/pkg/spec"
	"refuel/workflows"
)

// StartDev starts a DevEnvironment whose workflow ID is the spec's id,
// recording who started it. The spec is validated first; an id taken by
// an environment that still runs (suspended ones included) is refused
// with *DuplicateError, and an id another kind of workflow has used with
// an error that says so, since its checkpoints may lie in the store
// under that id: in either case nothing is started. An environment that
// was deleted may be started again under its id, and restores its
// workspace if the deletion kept it.
func StartDev(ctx context.Context, c client.Client, ds spec.DevSpec, who string) (client.WorkflowRun, error) {
	ds.Normalize()
	if err := ds.Validate(); err != nil {
		return nil, err
	}
	switch w, err := Describe(ctx, c, ds.ID); {
	case errors.Is(err, ErrNoWorkflow):
	case err != nil:
		return nil, err
	case w.Type == workflows.DevEnvironmentName && w.Running:
		return nil, &DuplicateError{ID: ds.ID, Environment: true}
	case w.Type != workflows.DevEnvironmentName:
		return nil, fmt.Errorf("id %s was %s's: choose another id for the environment (its checkpoints and output may lie under that id in the store)", ds.ID, KindOf(w.Type))
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        ds.ID,
		TaskQueue: workflows.TaskQueue,
		// Running (or suspended) is the one time the id is taken.
		WorkflowIDReusePolicy:                    enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy:                 enums.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		StaticSummary:                            devSummary(ds, who),
		StaticDetails:                            devDetails(ds),
		Memo:                                     map[string]any{devenv.MemoWho: who},
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.AttrTeam.ValueSet(ds.Team), workflows.AttrTier.ValueSet(string(ds.Tier)),
			workflows.AttrPriority.ValueSet(int64(ds.Priority)), workflows.AttrState.ValueSet(string(devenv.StatePending))),
	}, workflows.DevEnvironmentName, ds)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return nil, &DuplicateError{ID: ds.ID, Environment: true}
	}
	return run, err
}

// devSummary is an environment's one line in the Web UI's list.
func devSummary(ds spec.DevSpec, who string) string {
	idle := "never stops when idle"
	if d := ds.Idle(); d > 0 {
		idle = "stops after " + idleTimeout(d) + " idle"
	}
	return fmt.Sprintf("%s: development environment of %s, %s, team %s, priority %d, %d GPU(s), %s",
		ds.ID, orDefault(who, "someone"), ds.Tier, orNone(ds.Team), ds.Priority, max(1, ds.Resources.GPUs), idle)
}

// devDetails is an environment's spec as a markdown list.
func devDetails(ds spec.DevSpec) string {
	r := ds.Resources
	lines := []string{
		"- **tier** " + string(ds.Tier) + devTierMeaning[ds.Tier],
		fmt.Sprintf("- **priority** %d; **team** %s", ds.Priority, orNone(ds.Team)),
		fmt.Sprintf("- **resources** %d GPU(s); types %s; zones %s; providers %s; max price %s",
			max(1, r.GPUs), list(r.InstanceTypes), list(r.Zones), list(r.Providers), price(r.MaxPricePerHour)),
		"- **command** `" + strings.Join(ds.Command, " ") + "`",
		fmt.Sprintf("- **workspace** %s, saved every %s", orDefault(ds.Workspace, "a directory of its own"), ds.SaveEvery()),
		"- **idle timeout** " + idleTimeout(ds.Idle()),
	}
	if ds.MaxDuration > 0 {
		lines = append(lines, "- **max duration** "+ds.MaxDuration.String())
	}
	if ds.BudgetUSD > 0 {
		lines = append(lines, fmt.Sprintf("- **budget** %.2f USD", ds.BudgetUSD))
	}
	return strings.Join(lines, "\n")
}

var devTierMeaning = map[spec.Tier]string{
	spec.TierCritical: " (base or on-demand capacity only)",
	spec.TierFlexible: " (spot allowed; replaced after a preemption, workspace restored)",
}

// idleTimeout says an idle timeout: a duration, or never for 0.
func idleTimeout(d time.Duration) string {
	if d <= 0 {
		return "never"
	}
	return d.String()
}

// requireDev refuses an id that names no development environment: a
// signal to another workflow would be buffered unhandled.
func requireDev(ctx context.Context, c client.Client, id string) (Workflow, error) {
	return RequireType(ctx, c, id, workflows.DevEnvironmentName, "starter dev commands act on development environments only")
}

// DevStatus asks an environment for its status.
func DevStatus(ctx context.Context, c client.Client, id string) (devenv.Status, error) {
	var st devenv.Status
	if _, err := requireDev(ctx, c, id); err != nil {
		return st, err
	}
	v, err := c.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
	if err != nil {
		return st, fmt.Errorf("status of %s: %w", id, err)
	}
	return st, v.Get(&st)
}

// LiveDev is what the environment's node agent reported in its latest
// heartbeat: its endpoint and use as of a second ago, fresher than the
// status (which hears of use only when it changes). Nil while no attempt
// runs.
func LiveDev(ctx context.Context, c client.Client, id string) *activities.DevProgress {
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return nil
	}
	for _, pa := range desc.GetPendingActivities() {
		if pa.GetActivityType().GetName() != activities.RunTrainingName || pa.GetHeartbeatDetails() == nil {
			continue
		}
		var p activities.Progress
		if converter.GetDefaultDataConverter().FromPayloads(pa.GetHeartbeatDetails(), &p) == nil && p.Dev != nil {
			return p.Dev
		}
	}
	return nil
}

// signalDev sends an environment that still runs one signal.
func signalDev(ctx context.Context, c client.Client, id, signal string, arg any) error {
	w, err := requireDev(ctx, c, id)
	if err != nil {
		return err
	}
	if !w.Running {
		return fmt.Errorf("environment %s has ended: start it again with starter dev up", id)
	}
	if err := c.SignalWorkflow(ctx, id, "", signal, arg); err != nil {
		return fmt.Errorf("%s %s: %w", signal, id, err)
	}
	return nil
}

// StopDev asks an environment to save its workspace, give its instance
// back and wait, suspended.
func StopDev(ctx context.Context, c client.Client, id string) error {
	return signalDev(ctx, c, id, workflows.SignalStop, nil)
}

// ResumeDev asks a suspended environment to acquire again and restore
// its workspace.
func ResumeDev(ctx context.Context, c client.Client, id string) error {
	return signalDev(ctx, c, id, workflows.SignalResume, nil)
}

// TouchDev counts as activity now: the idle clock starts again.
func TouchDev(ctx context.Context, c client.Client, id string) error {
	return signalDev(ctx, c, id, workflows.SignalTouch, nil)
}

// DeleteDev asks an environment to give its instance back and end,
// deleting its workspace unless keep, and waits up to timeout (0: without
// limit) for it to end; the ending's status is its last.
func DeleteDev(ctx context.Context, c client.Client, id string, keep bool, timeout time.Duration) (Ending, error) {
	if err := signalDev(ctx, c, id, workflows.SignalDelete, devenv.DeleteRequest{KeepWorkspace: keep}); err != nil {
		return Ending{}, err
	}
	return WaitEnding(ctx, c, id, timeout)
}

// DevRow is one environment as DevList reads it; `starter dev list
// --json` prints one a line.
type DevRow struct {
	ID          string  `json:"id"`
	State       string  `json:"state"`
	Who         string  `json:"who,omitempty"`
	Team        string  `json:"team"`
	Tier        string  `json:"tier"`
	Priority    int     `json:"priority"`
	Endpoint    string  `json:"endpoint,omitempty"`
	IdleSeconds float64 `json:"idle_seconds"`
	// IdleTimeout is the environment's idle_timeout, "0s" for never; ""
	// when it did not answer.
	IdleTimeout string  `json:"idle_timeout,omitempty"`
	CostUSD     float64 `json:"cost_usd"`
	IdleCostUSD float64 `json:"idle_cost_usd"`
	// Result is the workflow's: running, or how it closed.
	Result    string     `json:"result"`
	StartedAt time.Time  `json:"started_at"`
	ClosedAt  *time.Time `json:"closed_at,omitempty"`
}

// devListQuery is the visibility query of environments matching filter,
// each listed once, by its latest run.
func devListQuery(filter string) string {
	q := fmt.Sprintf("WorkflowType = %q AND ExecutionStatus != \"ContinuedAsNew\"", workflows.DevEnvironmentName)
	if filter != "" {
		q += " AND (" + filter + ")"
	}
	return q
}

// DevList lists the environments the visibility filter matches (all
// when it is empty), at most limit, the most recently started first:
// each from its search attributes and memo, then from its answer to the
// status query; one that does not answer keeps what visibility says.
func DevList(ctx context.Context, c client.Client, filter string, limit int) ([]DevRow, error) {
	query := devListQuery(filter)
	found, err := listExecutions(ctx, c, query, limit)
	if err != nil {
		return nil, fmt.Errorf("list environments (%s): %w", query, err)
	}
	rows := make([]DevRow, len(found))
	for i, e := range found {
		lr := listRowOf(e)
		rows[i] = DevRow{ID: lr.ID, State: lr.State, Team: lr.Team, Tier: lr.Tier, Priority: lr.Priority, CostUSD: lr.CostUSD,
			Result: lr.Result, StartedAt: lr.StartedAt, ClosedAt: lr.ClosedAt}
		if p := e.GetMemo().GetFields()[devenv.MemoWho]; p != nil {
			_ = converter.GetDefaultDataConverter().FromPayload(p, &rows[i].Who)
		}
	}
	sem := make(chan struct{}, listQueries)
	var wg sync.WaitGroup
	for i := range rows {
		if rows[i].Result != ResultRunning {
			continue // an ended environment has nothing more to say
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			v, err := c.QueryWorkflow(qctx, rows[i].ID, "", workflows.QueryStatus)
			var st devenv.Status
			if err == nil && v.Get(&st) == nil {
				addDevStatus(&rows[i], st)
			}
		}()
	}
	wg.Wait()
	return rows, nil
}

// addDevStatus fills a row in from the environment's status.
func addDevStatus(r *DevRow, st devenv.Status) {
	if st.State != "" {
		r.State = string(st.State)
	}
	r.Priority, r.Endpoint, r.IdleSeconds = st.Priority, st.Endpoint, st.IdleSeconds
	r.IdleTimeout, r.CostUSD, r.IdleCostUSD = st.IdleTimeout.String(), st.CostUSD, st.IdleCostUSD
	if st.Who != "" {
		r.Who = st.Who
	}
}
