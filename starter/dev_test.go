package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"refuel/activities"
	"refuel/jobs"
	"refuel/pkg/devenv"
	"refuel/pkg/spec"
	"refuel/workflows"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata")

// devFake answers what the dev commands ask of Temporal: starts, status
// queries and the wait for an end, beside fakeTemporal's descriptions
// and signals. A delete signal ends the environment, as the workflow
// does.
type devFake struct {
	*fakeTemporal
	statuses map[string]devenv.Status
	starts   []client.StartWorkflowOptions
	inputs   []any
}

func newDevFake(known map[string]jobs.Workflow, statuses map[string]devenv.Status) *devFake {
	return &devFake{fakeTemporal: &fakeTemporal{workflows: known}, statuses: statuses}
}

type fakeRun struct {
	client.WorkflowRun
	id string
}

func (r fakeRun) GetID() string                  { return r.id }
func (r fakeRun) GetRunID() string               { return "run-" + r.id }
func (r fakeRun) Get(context.Context, any) error { return nil }

type encodedStatus struct{ v any }

func (e encodedStatus) HasValue() bool { return true }
func (e encodedStatus) Get(ptr any) error {
	b, err := json.Marshal(e.v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, ptr)
}

func (f *devFake) ExecuteWorkflow(_ context.Context, o client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	if f.startErr != nil {
		return nil, f.startErr
	}
	f.starts = append(f.starts, o)
	f.inputs = append(f.inputs, args...)
	return fakeRun{id: o.ID}, nil
}

func (f *devFake) QueryWorkflow(_ context.Context, id, _, name string, _ ...any) (converter.EncodedValue, error) {
	st, ok := f.statuses[id]
	if !ok || name != workflows.QueryStatus {
		return nil, serviceerror.NewNotFound("no status for " + id)
	}
	return encodedStatus{st}, nil
}

func (f *devFake) GetWorkflow(_ context.Context, id, _ string) client.WorkflowRun {
	return fakeRun{id: id}
}

func (f *devFake) SignalWorkflow(ctx context.Context, id, runID, name string, arg any) error {
	if name == workflows.SignalDelete {
		w := f.workflows[id]
		w.Running = false
		f.workflows[id] = w
	}
	return f.fakeTemporal.SignalWorkflow(ctx, id, runID, name, arg)
}

var (
	runningDev = jobs.Workflow{Type: workflows.DevEnvironmentName, Running: true}
	deletedDev = jobs.Workflow{Type: workflows.DevEnvironmentName}
	endedRun   = jobs.Workflow{Type: workflows.TrainingRunName}
)

// parseDevUp parses up's arguments as cobra does and returns the spec
// they describe.
func parseDevUp(args []string) (spec.DevSpec, error) {
	cmd := &cobra.Command{Use: "up"}
	f := addDevUpFlags(cmd.Flags())
	if err := cmd.Flags().Parse(args); err != nil {
		return spec.DevSpec{}, err
	}
	return devSpecOf(cmd, f, cmd.Flags().Args())
}

func TestDevUpFromFlags(t *testing.T) {
	file := filepath.Join("..", "examples", "dev-http.yaml")
	cases := map[string]struct {
		args     []string
		want     *spec.DevSpec
		badFlag  string // a *FlagError for this flag
		badUsage string // a usage error saying this
		badField string // a *spec.ValidationError naming this field
	}{
		"flags and a command": {
			args: []string{"--id", "scratch", "--gpus", "2", "--tier", "flexible", "--idle", "45m", "--priority", "70", "--team", "research", "--", "python3", "-m", "http.server"},
			want: &spec.DevSpec{ID: "scratch", Team: "research", Priority: 70, Tier: spec.TierFlexible, Resources: spec.Resources{GPUs: 2},
				Command: []string{"python3", "-m", "http.server"}, WorkspaceInterval: spec.Duration(spec.DefaultWorkspaceInterval), IdleTimeout: durp(45 * time.Minute)},
		},
		"the defaults": {
			args: []string{"--id", "scratch", "--gpus", "1", "--", "sleep", "infinity"},
			want: &spec.DevSpec{ID: "scratch", Tier: spec.TierCritical, Resources: spec.Resources{GPUs: 1}, Command: []string{"sleep", "infinity"},
				WorkspaceInterval: spec.Duration(spec.DefaultWorkspaceInterval), IdleTimeout: durp(spec.DefaultIdleTimeout)},
		},
		"idle 0: never":          {args: []string{"--id", "s", "--gpus", "1", "--idle", "0", "--", "x"}, want: &spec.DevSpec{ID: "s", Tier: spec.TierCritical, Resources: spec.Resources{GPUs: 1}, Command: []string{"x"}, WorkspaceInterval: spec.Duration(spec.DefaultWorkspaceInterval), IdleTimeout: durp(0)}},
		"no gpus":                {args: []string{"--id", "s", "--", "x"}, badFlag: "gpus"},
		"a negative idle":        {args: []string{"--id", "s", "--gpus", "1", "--idle", "-5m", "--", "x"}, badFlag: "idle"},
		"an absurd idle":         {args: []string{"--id", "s", "--gpus", "1", "--idle", "10000h", "--", "x"}, badFlag: "idle"},
		"a deadline tier":        {args: []string{"--id", "s", "--gpus", "1", "--tier", "deadline", "--", "x"}, badFlag: "tier"},
		"no id":                  {args: []string{"--gpus", "1", "--", "x"}, badFlag: "id"},
		"no command after --":    {args: []string{"--id", "s", "--gpus", "1", "--"}, badUsage: "the command after --: is required"},
		"words before --":        {args: []string{"--id", "s", "--gpus", "1", "oops", "--", "x"}, badUsage: `"oops" before --`},
		"a file and flags":       {args: []string{file, "--gpus", "1"}, badUsage: "--gpus describe an environment without a file"},
		"two files":              {args: []string{file, file}, badUsage: "give one DevSpec file"},
		"nothing":                {args: nil, badUsage: "give one DevSpec file"},
		"a file":                 {args: []string{file}, want: nil},
		"a file with bad fields": {args: []string{writeFile(t, "id: s\ncommand: [x]\nworkspace: work\n")}, badField: "workspace"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseDevUp(tc.args)
			var fe *FlagError
			var ue usageError
			var ve *spec.ValidationError
			switch {
			case tc.badFlag != "":
				if !errors.As(err, &fe) || fe.Flag != tc.badFlag || fe.Fix == "" || exitCode(err) != exitUsage {
					t.Errorf("error %v; want a *FlagError for --%s with a fix (exit 2)", err, tc.badFlag)
				}
			case tc.badUsage != "":
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.badUsage) {
					t.Errorf("error %v; want a usage error saying %q", err, tc.badUsage)
				}
			case tc.badField != "":
				if !errors.As(err, &ve) || !ve.Has(tc.badField) {
					t.Errorf("error %v; want a field error on %s", err, tc.badField)
				}
			case err != nil:
				t.Fatal(err)
			case tc.want == nil:
				if got.ID != "scratch" || got.Priority != 70 {
					t.Errorf("the example read as %+v", got)
				}
			default:
				if diff := cmp.Diff(*tc.want, got); diff != "" {
					t.Errorf("got(-), want(+):\n%s", diff)
				}
			}
		})
	}
}

func durp(d time.Duration) *spec.Duration {
	v := spec.Duration(d)
	return &v
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "dev.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A start names the workflow by the spec's id with its who, team, tier
// and priority; a taken id starts nothing.
func TestDevUp(t *testing.T) {
	ds := spec.DevSpec{ID: "scratch", Team: "research", Priority: 70, Command: []string{"x"}}
	cases := map[string]struct {
		known    map[string]jobs.Workflow
		startErr error
		want     string // an error saying this; "" for a start
	}{
		"a new id":                {},
		"a deleted environment's": {known: map[string]jobs.Workflow{"scratch": deletedDev}},
		"a running environment's": {known: map[string]jobs.Workflow{"scratch": runningDev}, want: `an environment with id "scratch" already exists (running or suspended): resume it (starter dev resume scratch)`},
		"a training run's":        {known: map[string]jobs.Workflow{"scratch": endedRun}, want: "id scratch was a training run's: choose another id"},
		"a start that races another": {startErr: serviceerror.NewWorkflowExecutionAlreadyStarted("started", "", ""),
			want: `an environment with id "scratch" already exists`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			known := tc.known
			if known == nil {
				known = map[string]jobs.Workflow{}
			}
			c := newDevFake(known, nil)
			c.startErr = tc.startErr
			var out bytes.Buffer
			err := devUp(context.Background(), c, ds, "ana@laptop", &out)
			if tc.want != "" {
				var dup *jobs.DuplicateError
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %v; want it to say %q", err, tc.want)
				}
				if strings.Contains(tc.want, "already exists") && !errors.As(err, &dup) {
					t.Errorf("error %T; want a *jobs.DuplicateError", err)
				}
				if len(c.starts) != 0 {
					t.Errorf("started %v; want nothing started", c.starts)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(c.starts) != 1 {
				t.Fatalf("%d starts; want 1", len(c.starts))
			}
			o := c.starts[0]
			if o.ID != "scratch" || o.TaskQueue != workflows.TaskQueue || o.WorkflowIDConflictPolicy != enums.WORKFLOW_ID_CONFLICT_POLICY_FAIL ||
				o.WorkflowIDReusePolicy != enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE || !o.WorkflowExecutionErrorWhenAlreadyStarted ||
				o.Memo[devenv.MemoWho] != "ana@laptop" || !strings.Contains(o.StaticSummary, "development environment of ana@laptop") {
				t.Errorf("start options %+v", o)
			}
			in, ok := c.inputs[0].(spec.DevSpec)
			if !ok || in.ID != "scratch" || in.Idle() != spec.DefaultIdleTimeout || in.Tier != spec.TierCritical {
				t.Errorf("input %+v; want the normalised spec", c.inputs[0])
			}
			if !strings.Contains(out.String(), "starter dev connect scratch") {
				t.Errorf("output:\n%s", out.String())
			}
		})
	}
}

// Each command sends its signal to an environment, and nothing to any
// other workflow or an ended environment.
func TestDevSignals(t *testing.T) {
	ctx := context.Background()
	cases := map[string]struct {
		run  func(c *devFake) error
		want []sentSignal
		err  string
	}{
		"stop":   {run: func(c *devFake) error { return jobs.StopDev(ctx, c, "scratch") }, want: []sentSignal{{"scratch", workflows.SignalStop, nil}}},
		"resume": {run: func(c *devFake) error { return jobs.ResumeDev(ctx, c, "scratch") }, want: []sentSignal{{"scratch", workflows.SignalResume, nil}}},
		"touch":  {run: func(c *devFake) error { return jobs.TouchDev(ctx, c, "scratch") }, want: []sentSignal{{"scratch", workflows.SignalTouch, nil}}},
		"delete, keeping the workspace": {
			run: func(c *devFake) error {
				return devDelete(ctx, c, "scratch", true, time.Minute, io.Discard, io.Discard)
			},
			want: []sentSignal{{"scratch", workflows.SignalDelete, devenv.DeleteRequest{KeepWorkspace: true}}},
		},
		"delete": {
			run: func(c *devFake) error {
				return devDelete(ctx, c, "scratch", false, time.Minute, io.Discard, io.Discard)
			},
			want: []sentSignal{{"scratch", workflows.SignalDelete, devenv.DeleteRequest{}}},
		},
		"stop a training run": {run: func(c *devFake) error { return jobs.StopDev(ctx, c, "train") },
			err: "train is a training run, not a development environment"},
		"touch an unknown id": {run: func(c *devFake) error { return jobs.TouchDev(ctx, c, "nope") }, err: "no workflow with this id"},
		"resume a deleted environment": {run: func(c *devFake) error { return jobs.ResumeDev(ctx, c, "old") },
			err: "environment old has ended: start it again with starter dev up"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := newDevFake(map[string]jobs.Workflow{"scratch": runningDev, "old": deletedDev, "train": runningRun},
				map[string]devenv.Status{"scratch": {ID: "scratch", State: devenv.StateDeleted}})
			err := tc.run(c)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v; want it to say %q", err, tc.err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, c.signals, cmp.AllowUnexported(sentSignal{})); diff != "" {
				t.Errorf("signals got(-), want(+):\n%s", diff)
			}
		})
	}
}

func TestDevDeleteSaysWhatBecameOfTheWorkspace(t *testing.T) {
	for keep, want := range map[bool]string{
		true:  "deleted scratch, its workspace kept: starter dev up with id scratch restores it\n",
		false: "deleted scratch, its workspace deleted\n",
	} {
		c := newDevFake(map[string]jobs.Workflow{"scratch": runningDev}, map[string]devenv.Status{"scratch": {State: devenv.StateDeleted}})
		var out bytes.Buffer
		if err := devDelete(context.Background(), c, "scratch", keep, time.Minute, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		if out.String() != want {
			t.Errorf("keep %v: %q; want %q", keep, out.String(), want)
		}
	}
}

// connect prints a running environment's endpoint; of one without, it
// says what to do, sending nothing.
func TestDevConnect(t *testing.T) {
	cases := map[string]struct {
		st   devenv.Status
		out  string
		want string
	}{
		"running":   {st: devenv.Status{ID: "scratch", State: devenv.StateRunning, Endpoint: "10.0.0.7:8080"}, out: "10.0.0.7:8080\n"},
		"suspended": {st: devenv.Status{ID: "scratch", State: devenv.StateSuspended, Reason: "idle for 30m0s"}, want: "scratch is suspended (idle for 30m0s): resume it with starter dev resume scratch, then connect again"},
		"moving":    {st: devenv.Status{ID: "scratch", State: devenv.StateMoving}, want: "scratch is moving, without an endpoint yet: wait for it with starter dev status scratch --watch"},
		"failed":    {st: devenv.Status{ID: "scratch", State: devenv.StateFailed, Reason: "the command exited"}, want: "scratch failed (the command exited)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := newDevFake(map[string]jobs.Workflow{"scratch": runningDev}, map[string]devenv.Status{"scratch": tc.st})
			var out bytes.Buffer
			err := devConnect(context.Background(), c, "scratch", 0, &out, io.Discard)
			switch {
			case tc.want != "":
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %v; want it to say %q", err, tc.want)
				}
			case err != nil:
				t.Fatal(err)
			case out.String() != tc.out:
				t.Errorf("printed %q; want %q", out.String(), tc.out)
			}
			if len(c.signals) != 0 {
				t.Errorf("sent %v", c.signals)
			}
		})
	}
}

// echoServer answers each line with its name and the line.
func echoServer(t *testing.T, name string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					fmt.Fprintf(c, "%s: %s\n", name, sc.Text())
				}
			}()
		}
	}()
	return l.Addr().String()
}

// The forward joins each connection to the endpoint of the moment: it
// follows an environment that moved, and closes a connection while the
// environment has none.
func TestForwardFollowsTheEndpoint(t *testing.T) {
	first, second := echoServer(t, "first"), echoServer(t, "second")
	endpoints := make(chan func() (string, error), 3)
	endpoints <- func() (string, error) { return first, nil }
	endpoints <- func() (string, error) { return "", errors.New("scratch is moving") }
	endpoints <- func() (string, error) { return second, nil }
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var log syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- forward(ctx, l, func(context.Context) (string, error) { return (<-endpoints)() }, &log)
	}()
	say := func(line string) (string, error) {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintln(c, line)
		c.(*net.TCPConn).CloseWrite()
		b, err := io.ReadAll(c)
		return string(b), err
	}
	if got, err := say("hello"); got != "first: hello\n" || err != nil {
		t.Errorf("first connection read %q, %v", got, err)
	}
	if got, _ := say("anyone?"); got != "" {
		t.Errorf("a connection while moving read %q; want it closed", got)
	}
	if got, err := say("again"); got != "second: again\n" || err != nil {
		t.Errorf("after the move read %q, %v", got, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("forward: %v", err)
	}
	if !strings.Contains(log.String(), "closed: scratch is moving") {
		t.Errorf("log:\n%s", log.String())
	}
}

// The plain views, against golden files (go test ./starter -run
// TestDevViews -update rewrites them).
func TestDevViews(t *testing.T) {
	now := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return now.Add(d) }
	ptr := func(t time.Time) *time.Time { return &t }
	running := devenv.Status{
		ID: "scratch", Who: "ana@laptop", Team: "research", Priority: 70, Tier: "critical", State: devenv.StateRunning,
		Since: at(-time.Hour), Endpoint: "127.0.0.1:41234", Serving: true, IdleSeconds: 100, IdleTimeout: spec.Duration(30 * time.Minute),
		LastActive: ptr(at(-5 * time.Minute)),
		Instance:   &devenv.Instance{ID: "i-base-1", Offering: "base/p3.2xlarge/dc-1/on-demand", Market: "on-demand", Zone: "dc-1", Layer: "base", PricePerHour: 1.2, Since: at(-time.Hour)},
		CostUSD:    1.2, IdleCostUSD: 0.1, ActiveHours: 0.9167, IdleHours: 0.0833, BudgetUSD: 50,
		Workspace: devenv.Workspace{Path: "/srv/refuel/workspaces/scratch", StoreURL: "file:///var/lib/refuel/checkpoints/scratch/",
			LastSave: &devenv.Save{Step: 12, Time: at(-2 * time.Minute), URL: "file:///x", Bytes: 3 << 20}},
		Moves: 1, LostWorkSeconds: 0, Attempt: 2, StartedAt: at(-3 * time.Hour),
	}
	quiet := &activities.DevProgress{Endpoint: "127.0.0.1:41234", Serving: true, Since: at(-time.Hour), LastActive: at(-10 * time.Minute), Usage: devenv.Sample{}}
	inUse := &activities.DevProgress{Endpoint: "127.0.0.1:41234", Serving: true, Since: at(-time.Hour), LastActive: at(-3 * time.Second), InUse: true,
		Usage: devenv.Sample{Connections: 2, GPUUtilization: 0.45, GPUKnown: true}}
	suspended := devenv.Status{
		ID: "scratch", Who: "ana@laptop", Team: "research", Priority: 70, Tier: "critical", State: devenv.StateSuspended,
		Reason: "idle for 30m0s: the workspace saved, the instance given back", Since: at(-20 * time.Minute), IdleTimeout: spec.Duration(30 * time.Minute),
		CostUSD: 1.7, IdleCostUSD: 0.6, ActiveHours: 0.9, IdleHours: 0.5,
		Workspace: devenv.Workspace{Path: "/srv/refuel/workspaces/scratch", StoreURL: "file:///var/lib/refuel/checkpoints/scratch/",
			LastSave: &devenv.Save{Step: 13, Time: at(-20 * time.Minute), Bytes: 3 << 20}},
		Moves: 2, Preemptions: 1, LostWorkSeconds: 42,
		Failures: []devenv.Failure{{Class: "no-capacity", Offering: "sim/p3.2xlarge/us-west-2a/spot", Message: "no spot stock", Time: at(-50 * time.Minute)}},
	}
	failed := devenv.Status{ID: "nb", Tier: "flexible", State: devenv.StateFailed, Since: at(-time.Minute),
		Reason: "the command exited with code 127 after 0s, before its endpoint ever answered; its last lines:\njupyter: command not found"}
	var b strings.Builder
	for _, v := range []struct {
		name string
		st   devenv.Status
		live *activities.DevProgress
	}{
		{"running, quiet (from the agent's heartbeat)", running, quiet},
		{"running, in use", running, inUse},
		{"running, no heartbeat yet", running, nil},
		{"suspended", suspended, nil},
		{"failed", failed, nil},
	} {
		fmt.Fprintf(&b, "== status: %s\n", v.name)
		printDevStatus(&b, v.st, v.live, now)
		fmt.Fprintf(&b, "== watch line: %s\n%s\n", v.name, devLine(v.st, v.live, now))
	}
	b.WriteString("== list\n")
	printDevList(&b, []jobs.DevRow{
		{ID: "scratch", State: "running", Who: "ana@laptop", Team: "research", Priority: 70, Endpoint: "127.0.0.1:41234", IdleSeconds: 100,
			IdleTimeout: "30m0s", CostUSD: 1.2, IdleCostUSD: 0.1, StartedAt: at(-3 * time.Hour)},
		{ID: "nb", State: "suspended", Team: "vision", Priority: 70, IdleTimeout: "0s", CostUSD: 0.5, StartedAt: at(-25 * time.Hour)},
		{ID: "old", State: "deleted", Priority: 70, Result: "completed", StartedAt: at(-30 * time.Second)},
	}, now)
	b.WriteString("== an empty list\n")
	printDevList(&b, nil, now)
	golden(t, "dev-views.golden", b.String())
}

// syncBuffer is a buffer several goroutines write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: write it with go test ./starter -run %s -update", err, t.Name())
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs, got(-) want(+) reversed; rewrite with -update if intended:\n%s", path, diff)
	}
}
