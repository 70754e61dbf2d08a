package tests

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"refuel/workflows/registry"
	"refuel/workflows/training"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"sigs.k8s.io/yaml"

	"refuel/jobs"
	"refuel/pkg/spec"
)

// TestSubmittedRunCarriesItsEstimate drives bin/starter as a pipeline
// would: submit --dry-run prints the estimate and starts nothing; submit
// keeps the estimate with the run, whose status and Web UI details show
// it, and once it has completed what it cost and when it ended beside
// it; the run's history, the estimate in its memo, replays.
func TestSubmittedRunCarriesItsEstimate(t *testing.T) {
	parallel(t) // a stack of its own; it mostly waits on its run
	_, starter := refuelBinaries(t)
	s := startStack(t, nil)
	ctx := context.Background()
	dir := t.TempDir()
	js := quickJob("estimated", spec.TierFlexible)
	b, err := yaml.Marshal(js)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// The estimate reads the built-in market: this stack's local cloud has
	// none, and an empty memory in dir.
	cli := func(args ...string) cliResult {
		t.Helper()
		return runCLI(t, dir, starter, append(args, "--temporal-address", s.Address, "--data-dir", dir, "--provider", "sim", "--windows", "4")...)
	}

	r := cli("submit", file, "--dry-run", "--json")
	var dry struct{ Cases []map[string]any }
	if err := json.Unmarshal([]byte(r.stdout), &dry); r.code != 0 || err != nil || len(dry.Cases) == 0 {
		t.Fatalf("submit --dry-run --json: exit %d, %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	var missing *serviceerror.NotFound
	if _, err := s.Client.DescribeWorkflowExecution(ctx, js.ID, ""); !errors.As(err, &missing) {
		t.Fatalf("after a dry run, describing %s: %v; want not found: a dry run starts nothing", js.ID, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("a dry run left %d entries in its data dir; want only the spec: it writes nothing", len(entries))
	}

	if r := cli("submit", file, "--wait"); r.code != 0 || !strings.Contains(r.stderr, "estimate: $") {
		t.Fatalf("submit --wait: exit %d; want 0 and the estimate\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	st, err := jobs.FinalStatus(ctx, s.Client, js.ID)
	if err != nil {
		t.Fatal(err)
	}
	e := st.Estimate
	if e == nil || e.Name != "as written" || e.Tier != spec.TierFlexible || !strings.Contains(e.Basis, "built-in market") || e.CostUSD.P90 <= 0 {
		t.Fatalf("a completed run's status carries estimate %+v; want the spec as written, from the built-in market", e)
	}
	if o := e.Outcome; o == nil || o.CostUSD != st.CostUSD || o.FinishHours <= 0 || o.FinishHours > time.Hour.Hours() {
		t.Errorf("outcome %+v beside a run that cost $%v; want what it cost and that it ended within the hour", o, st.CostUSD)
	}
	if r := runCLI(t, dir, starter, "status", js.ID, "--temporal-address", s.Address); r.code != 0 || !strings.Contains(r.stdout, "estimated  at submit: $") || !strings.Contains(r.stdout, "ended") {
		t.Errorf("starter status of the completed run:\n%s\nwant the estimate beside the outcome", r.stdout)
	}
	if cur := currentDetails(t, ctx, s.Client, js.ID); !strings.Contains(cur, "estimated at submit: $") || !strings.Contains(cur, "after submit") {
		t.Errorf("the Web UI's details:\n%s\nwant the estimate beside what the run cost and when it ended", cur)
	}

	var events []*historypb.HistoryEvent
	iter := s.Client.GetWorkflowHistory(ctx, js.ID, "", false, 0)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	if events[0].GetWorkflowExecutionStartedEventAttributes().GetMemo().GetFields()[training.MemoEstimate] == nil {
		t.Fatal("the run's start event holds no estimate in its memo")
	}
	replayer := worker.NewWorkflowReplayer()
	registry.New().Register(replayer)
	opts := worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: js.ID}}
	if err := replayer.ReplayWorkflowHistoryWithOptions(nil, &historypb.History{Events: events}, opts); err != nil {
		t.Errorf("replay of the run that read its estimate: %v", err)
	}
	recordHistory(t, s.Client, js.ID, "estimate-in-memo")
}
