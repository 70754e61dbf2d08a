package tests

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"refuel/workflows/training"

	"sigs.k8s.io/yaml"

	"refuel/jobs"
	"refuel/pkg/capacity"
	"refuel/pkg/spec"
	"refuel/workflows"
)

// TestStarterListCancelWait drives bin/starter as a pipeline would, against
// the embedded stack: submit --wait, list (its JSON lines and its query),
// cancel (the run checkpoints, releases its instance and ends cancelled),
// wait and status --watch, with the exit status each promises.
func TestStarterListCancelWait(t *testing.T) {
	parallel(t) // a stack of its own; it mostly waits on runs
	_, starter := refuelBinaries(t)
	s := startStack(t, nil)
	ctx := context.Background()
	dir := t.TempDir()
	cli := func(args ...string) cliResult {
		t.Helper()
		return runCLI(t, dir, starter, append(args, "--temporal-address", s.Address)...)
	}
	specFile := func(js spec.JobSpec) string {
		t.Helper()
		b, err := yaml.Marshal(js)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, js.ID+".yaml")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	long := quickJob("long", spec.TierFlexible)
	long.Team, long.Work = "nlp", spec.Duration(2*time.Minute)
	short := quickJob("short", spec.TierFlexible)
	impossible := quickJob("impossible", spec.TierFlexible)
	impossible.Resources.InstanceTypes = []string{"p9.mega"}

	if r := cli("submit", specFile(long)); r.code != 0 {
		t.Fatalf("submit long: exit %d\n%s", r.code, r.stderr)
	}
	r := cli("submit", specFile(short), "--wait", "--json")
	var e struct{ ID, Type, Result, State string }
	if err := json.Unmarshal([]byte(r.stdout), &e); err != nil || r.code != 0 || e.Result != "completed" || e.State != "completed" || e.Type != "training" {
		t.Errorf("submit --wait --json of a run that completes: exit %d, %q (%v)\n%s", r.code, r.stdout, err, r.stderr)
	}
	if r := cli("submit", specFile(impossible), "--wait"); r.code != 1 || !strings.Contains(r.stdout, "impossible failed") {
		t.Errorf("submit --wait of a run that fails: exit %d, stdout %q; want exit 1 saying it failed", r.code, r.stdout)
	}
	if r := cli("status", "impossible", "--watch"); r.code != 1 {
		t.Errorf("status --watch of a failed run: exit %d; want 1", r.code)
	}
	if r := cli("wait", "short"); r.code != 0 || !strings.HasPrefix(r.stdout, "short completed") {
		t.Errorf("wait on a completed run: exit %d, %q", r.code, r.stdout)
	}

	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := jobs.WaitFor(wctx, s.Client, "long", func(st training.Status) bool {
		return st.State == workflows.StateRunning && st.LastCheckpoint != nil
	}); err != nil {
		t.Fatal(err)
	}

	// Visibility catches up with the runs' search attributes in a moment.
	var rows map[string]map[string]any
	for deadline := time.Now().Add(30 * time.Second); ; {
		r := cli("list", "--json")
		rows = map[string]map[string]any{}
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			var row map[string]any
			if err := json.Unmarshal([]byte(line), &row); err != nil {
				t.Fatalf("list --json line %q: %v", line, err)
			}
			rows[row["id"].(string)] = row
		}
		if r.code == 0 && len(rows) == 3 && rows["long"]["state"] == "running" && rows["impossible"]["state"] != "pending" || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	for id, want := range map[string]map[string]any{
		"long":       {"type": "training", "state": "running", "team": "nlp", "tier": "flexible", "priority": 50.0},
		"short":      {"type": "training", "state": "completed", "team": "test"},
		"impossible": {"type": "training", "state": "failed:spec-mismatch", "team": "test"},
	} {
		row := rows[id]
		for k, v := range want {
			if row[k] != v {
				t.Errorf("list --json %s: %s = %v; want %v (row %v)", id, k, row[k], v, row)
			}
		}
		for _, k := range []string{"step", "total_steps", "cost_usd"} {
			if _, ok := row[k]; !ok {
				t.Errorf("list --json %s lacks %s: %v", id, k, row)
			}
		}
	}
	if rows["short"]["step"] != rows["short"]["total_steps"] || rows["short"]["total_steps"].(float64) <= 0 || rows["short"]["cost_usd"].(float64) <= 0 {
		t.Errorf("the completed run's row %v; want all its steps done and its cost", rows["short"])
	}
	if r := cli("list", "--query", `RefuelTeam="nlp"`); r.code != 0 || !strings.Contains(r.stdout, "long") || strings.Contains(r.stdout, "short") {
		t.Errorf("list --query RefuelTeam=nlp: exit %d\n%s", r.code, r.stdout)
	}
	if r := cli("list", "--query", `RefuelTeam=`); r.code != 1 || !strings.Contains(r.stderr, "--query") {
		t.Errorf("list with a broken query: exit %d, %q; want 1 naming --query", r.code, r.stderr)
	}

	r = cli("cancel", "long")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "long cancelled") {
		t.Errorf("cancel long: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	st, err := jobs.Status(ctx, s.Client, "long")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != workflows.StateCancelled || st.Instance != nil || st.LastCheckpoint == nil {
		t.Errorf("after cancel: state %s, instance %v, checkpoint %v; want cancelled, nothing held, a checkpoint kept", st.State, st.Instance, st.LastCheckpoint)
	}
	if left, _ := s.Cloud.List(ctx, map[string]string{capacity.TagRun: "long"}); len(left) != 0 {
		t.Errorf("instances of the cancelled run still running: %v", left)
	}
	if r := cli("wait", "long", "--json"); r.code != 1 || !strings.Contains(r.stdout, `"result":"cancelled"`) {
		t.Errorf("wait on a cancelled run: exit %d, %q; want 1 and result cancelled", r.code, r.stdout)
	}
	if r := cli("cancel", "short"); r.code != 1 || !strings.Contains(r.stderr, "already ended") {
		t.Errorf("cancel of an ended run: exit %d, %q", r.code, r.stderr)
	}

	// A run terminated from outside runs no code: wait and list still say so.
	doomed := quickJob("doomed", spec.TierFlexible)
	doomed.Work = spec.Duration(time.Minute)
	if _, err := jobs.Submit(ctx, s.Client, doomed); err != nil {
		t.Fatal(err)
	}
	if err := s.Client.TerminateWorkflow(ctx, "doomed", "", "test"); err != nil {
		t.Fatal(err)
	}
	if r := cli("wait", "doomed", "--json"); r.code != 1 || !strings.Contains(r.stdout, `"result":"terminated","state":"terminated"`) {
		t.Errorf("wait on a terminated run: exit %d, %q", r.code, r.stdout)
	}
	if r := cli("wait", "no-such-run"); r.code != 1 || !strings.Contains(r.stderr, "no workflow") {
		t.Errorf("wait on an unknown id: exit %d, %q", r.code, r.stderr)
	}

	// setup registers what is missing, and a namespace the cluster lacks.
	if r := cli("setup"); r.code != 0 || !strings.Contains(r.stdout, "search attributes registered in namespace default") || strings.Contains(r.stdout, "created") {
		t.Errorf("setup on the embedded server: exit %d, %q, %q", r.code, r.stdout, r.stderr)
	}
	// The first call succeeds: setup waits for the namespace it created to
	// be known before adding the search attributes.
	if r := cli("setup", "--namespace", "team-b"); r.code != 0 || !strings.Contains(r.stdout, "namespace team-b created") || !strings.Contains(r.stdout, "registered in namespace team-b") {
		t.Errorf("setup of a new namespace: exit %d, %q, %q", r.code, r.stdout, r.stderr)
	}
	if r := cli("list", "--namespace", "team-b", "--json"); r.code != 0 || strings.TrimSpace(r.stdout) != "" {
		t.Errorf("list in the new namespace: exit %d, %q, %q", r.code, r.stdout, r.stderr)
	}
}

// TestStarterInterrupt is `starter interrupt`: a real notice to the
// instance a running run holds, and the recovery reported as the drill
// reports it.
func TestStarterInterrupt(t *testing.T) {
	parallel(t)
	_, starter := refuelBinaries(t)
	s := startStack(t, nil)
	ctx := context.Background()
	cli := func(args ...string) cliResult {
		t.Helper()
		return runCLI(t, t.TempDir(), starter, append(args, "--temporal-address", s.Address)...)
	}
	js := quickJob("interrupted", spec.TierFlexible)
	js.Work = spec.Duration(20 * time.Second)
	if _, err := jobs.Submit(ctx, s.Client, js); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := jobs.WaitFor(wctx, s.Client, js.ID, func(st training.Status) bool {
		return st.State == workflows.StateRunning && st.LastCheckpoint != nil
	}); err != nil {
		t.Fatal(err)
	}
	if r := cli("interrupt", js.ID, "--node", "1"); r.code != 1 || !strings.Contains(r.stderr, "one-node run") {
		t.Errorf("interrupt --node 1 of a one-node run: exit %d, %q; want 1 naming its only rank", r.code, r.stderr)
	}
	r := cli("interrupt", js.ID, "--grace", "5s", "--json")
	var rep jobs.InterruptReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 {
		t.Fatalf("interrupt --json: exit %d, %q (%v)\n%s", r.code, r.stdout, err, r.stderr)
	}
	t.Logf("interrupt report: %s", strings.TrimSpace(r.stdout))
	if !rep.Passed || rep.ReplacementInstance == "" || rep.ReplacementInstance == rep.InterruptedInstance ||
		rep.ResumedFromStep < rep.CheckpointStep || rep.RecoverySeconds < rep.ReplacementSeconds {
		t.Errorf("interrupt report %+v; want a recovery onto another instance from the checkpoint seen at the notice", rep)
	}
	if r := cli("wait", js.ID); r.code != 0 {
		t.Errorf("wait after the interruption: exit %d, %q, %q", r.code, r.stdout, r.stderr)
	}
	st, err := jobs.Status(ctx, s.Client, js.ID)
	if err != nil || st.Preemptions != 1 || st.Recoveries != 1 {
		t.Errorf("status after the interruption: preemptions %d, recoveries %d (%v); want one of each", st.Preemptions, st.Recoveries, err)
	}
	if r := cli("interrupt", js.ID); r.code != 1 || !strings.Contains(r.stderr, "has ended") {
		t.Errorf("interrupt of an ended run: exit %d, %q", r.code, r.stderr)
	}
}
