package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"refuel/pkg/serving"
	"refuel/workflows/capacitypool"
	"refuel/workflows/inference"
	"refuel/workflows/workload"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"refuel/jobs"
	"refuel/pkg/admission"
	"refuel/pkg/autoscale"
	"refuel/pkg/capacity"
	"refuel/pkg/spec"
	"refuel/workflows"
)

// fakeTemporal answers the calls these commands make. The embedded nil
// client makes any other call panic, so a test notices one it did not
// expect.
type fakeTemporal struct {
	client.Client
	workflows map[string]jobs.Workflow // by id; absent ids are not found
	startErr  error
	signals   []sentSignal
	cancelled []string
}

type sentSignal struct {
	id, name string
	arg      any
}

func (f *fakeTemporal) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	w, ok := f.workflows[id]
	if !ok {
		return nil, serviceerror.NewNotFound("workflow not found for ID: " + id)
	}
	status := enums.WORKFLOW_EXECUTION_STATUS_COMPLETED
	if w.Running {
		status = enums.WORKFLOW_EXECUTION_STATUS_RUNNING
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Type: &commonpb.WorkflowType{Name: w.Type}, Status: status,
	}}, nil
}

func (f *fakeTemporal) SignalWorkflow(_ context.Context, id, _, name string, arg any) error {
	f.signals = append(f.signals, sentSignal{id, name, arg})
	return nil
}

func (f *fakeTemporal) CancelWorkflow(_ context.Context, id, _ string) error {
	f.cancelled = append(f.cancelled, id)
	return nil
}

func (f *fakeTemporal) ExecuteWorkflow(context.Context, client.StartWorkflowOptions, any, ...any) (client.WorkflowRun, error) {
	return nil, f.startErr
}

var (
	runningRun     = jobs.Workflow{Type: workflows.TrainingRunName, Running: true}
	runningService = jobs.Workflow{Type: workflows.InferenceServiceName, Running: true}
	endedService   = jobs.Workflow{Type: workflows.InferenceServiceName}
)

func TestParseMetricsFlags(t *testing.T) {
	cases := map[string]struct {
		args     []string
		want     autoscale.Metrics
		reports  int
		badFlag  string // a *FlagError for this flag
		badUsage bool   // a usageError
	}{
		"one report":             {args: []string{"chat", "--qps", "12"}, want: autoscale.Metrics{QPS: 12}, reports: 1},
		"every field":            {args: []string{"--qps", "3.5", "chat", "--queue", "4", "--gpu-util", "0.8", "--replicas", "2"}, want: autoscale.Metrics{QPS: 3.5, QueueLength: 4, GPUUtilization: 0.8, Replicas: 2}, reports: 1},
		"zero qps is a report":   {args: []string{"chat", "--qps", "0"}, want: autoscale.Metrics{}, reports: 1},
		"every 5s for 2m":        {args: []string{"chat", "--qps", "1", "--every", "5s", "--for", "2m"}, want: autoscale.Metrics{QPS: 1}, reports: 24},
		"a partial interval":     {args: []string{"chat", "--qps", "1", "--every", "30s", "--for", "70s"}, want: autoscale.Metrics{QPS: 1}, reports: 3},
		"no qps":                 {args: []string{"chat", "--queue", "3"}, badFlag: "qps"},
		"negative qps":           {args: []string{"chat", "--qps", "-1"}, badFlag: "qps"},
		"negative queue":         {args: []string{"chat", "--qps", "1", "--queue", "-2"}, badFlag: "queue"},
		"utilisation as percent": {args: []string{"chat", "--qps", "1", "--gpu-util", "80"}, badFlag: "gpu-util"},
		"negative replicas":      {args: []string{"chat", "--qps", "1", "--replicas", "-1"}, badFlag: "replicas"},
		"every without for":      {args: []string{"chat", "--qps", "1", "--every", "5s"}, badFlag: "every"},
		"for without every":      {args: []string{"chat", "--qps", "1", "--for", "2m"}, badFlag: "every"},
		"zero interval":          {args: []string{"chat", "--qps", "1", "--every", "0s", "--for", "2m"}, badFlag: "every"},
		"for under every":        {args: []string{"chat", "--qps", "1", "--every", "1m", "--for", "10s"}, badFlag: "for"},
		"no id":                  {args: []string{"--qps", "1"}, badUsage: true},
		"two ids":                {args: []string{"chat", "search", "--qps", "1"}, badUsage: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fs := pflag.NewFlagSet("metrics", pflag.ContinueOnError)
			f := addMetricsFlags(fs)
			err := fs.Parse(tc.args)
			if err == nil {
				err = metricsCommand().Args(nil, fs.Args())
			}
			if err == nil {
				err = f.check(fs)
			}
			id := fs.Arg(0)
			var fe *FlagError
			var ue usageError
			switch {
			case tc.badFlag != "":
				if !errors.As(err, &fe) || fe.Flag != tc.badFlag || fe.Fix == "" {
					t.Errorf("error %v; want a *FlagError for --%s with a fix", err, tc.badFlag)
				}
			case tc.badUsage:
				if !errors.As(err, &ue) {
					t.Errorf("error %v; want a usage error", err)
				}
			case err != nil:
				t.Fatalf("load flags: %v", err)
			default:
				if id != "chat" || f.metrics != tc.want || f.reports() != tc.reports {
					t.Errorf("got %s %+v, %d reports; want chat %+v, %d reports", id, f.metrics, f.reports(), tc.want, tc.reports)
				}
			}
		})
	}
}

func TestServeListsEveryFieldErrorWithItsFix(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	bad := "id: Chat!\npriority: 140\nmin_replicas: 3\nmax_replicas: 2\ntarget: {}\nplacement: anywhere\n"
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	root := newRoot(&bytes.Buffer{}, &bytes.Buffer{})
	root.SetArgs([]string{"serve", path})
	_, err := root.ExecuteC()
	var ve *spec.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v; want a *spec.ValidationError", err)
	}
	for _, field := range []string{"id", "priority", "max_replicas", "target", "placement"} {
		if !ve.Has(field) {
			t.Errorf("no error for %s in:\n%v", field, err)
		}
	}
	// The message main prints names the file and every fix.
	for _, want := range []string{path, "use spot-first or on-demand", "raise max_replicas or lower min_replicas"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message lacks %q:\n%v", want, err)
		}
	}
}

func TestServeExplainsATakenID(t *testing.T) {
	cases := map[string]struct {
		holder *jobs.Workflow
		want   string
	}{
		"by the running service": {&runningService, "service chat is already running: stop it first (starter stop-service chat)"},
		"by a training run":      {&runningRun, "id chat is taken by a training run that is still running"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &fakeTemporal{
				workflows: map[string]jobs.Workflow{"chat": *tc.holder},
				startErr:  serviceerror.NewWorkflowExecutionAlreadyStarted("already started", "", ""),
			}
			ss := spec.ServiceSpec{ID: "chat", MaxReplicas: 2, Target: spec.ScalingTarget{QPS: 5}}
			err := serve(context.Background(), c, ss, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v; want it to say %q", err, tc.want)
			}
		})
	}
}

// A signal to a workflow that does not handle it would be buffered
// silently, so commands refuse other workflow types before sending any.
func TestCommandsRefuseOtherWorkflowTypes(t *testing.T) {
	ctx := context.Background()
	cases := map[string]struct {
		run  func(c *fakeTemporal) error
		want string
	}{
		"pause a service": {func(c *fakeTemporal) error {
			return sendRunSignal(ctx, c, "pause", workflows.SignalPause, jobs.Pause, "chat", &bytes.Buffer{})
		}, "chat is an inference service, not a training run: only training runs pause and resume"},
		"resume a service": {func(c *fakeTemporal) error {
			return sendRunSignal(ctx, c, "resume", workflows.SignalResume, jobs.Resume, "chat", &bytes.Buffer{})
		}, "chat is an inference service, not a training run"},
		"pause the pool": {func(c *fakeTemporal) error {
			return sendRunSignal(ctx, c, "pause", workflows.SignalPause, jobs.Pause, workflows.PoolWorkflowID, &bytes.Buffer{})
		}, "is the capacity pool, not a training run"},
		"pause an unknown id": {func(c *fakeTemporal) error {
			return sendRunSignal(ctx, c, "pause", workflows.SignalPause, jobs.Pause, "nope", &bytes.Buffer{})
		}, "nope: no workflow with this id in the namespace"},
		"load a training run": {func(c *fakeTemporal) error {
			return sendMetrics(ctx, c, "train", metricsFlags{metrics: autoscale.Metrics{QPS: 1}}, &bytes.Buffer{})
		}, "train is a training run, not an inference service: only services take load reports"},
		"load an ended service": {func(c *fakeTemporal) error {
			return sendMetrics(ctx, c, "old", metricsFlags{metrics: autoscale.Metrics{QPS: 1}}, &bytes.Buffer{})
		}, "service old has ended"},
		"stop a training run": {func(c *fakeTemporal) error { return jobs.StopService(ctx, c, "train") },
			"train is a TrainingRun, not an InferenceService"},
		"stop an ended service": {func(c *fakeTemporal) error { return jobs.StopService(ctx, c, "old") },
			"service old has already ended"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &fakeTemporal{workflows: map[string]jobs.Workflow{
				"chat": runningService, "old": endedService, "train": runningRun,
				workflows.PoolWorkflowID: {Type: workflows.CapacityPoolName, Running: true},
			}}
			err := tc.run(c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v; want it to say %q", err, tc.want)
			}
			if len(c.signals) != 0 || len(c.cancelled) != 0 {
				t.Errorf("sent %v and cancelled %v; want nothing sent", c.signals, c.cancelled)
			}
		})
	}
}

func TestPauseAndStopReachTheirWorkflow(t *testing.T) {
	ctx := context.Background()
	c := &fakeTemporal{workflows: map[string]jobs.Workflow{"chat": runningService, "train": runningRun}}
	if err := sendRunSignal(ctx, c, "pause", workflows.SignalPause, jobs.Pause, "train", &bytes.Buffer{}); err != nil {
		t.Fatalf("pause a run: %v", err)
	}
	if err := jobs.StopService(ctx, c, "chat"); err != nil {
		t.Fatalf("stop a service: %v", err)
	}
	if diff := cmp.Diff([]sentSignal{{"train", workflows.SignalPause, nil}}, c.signals, cmp.AllowUnexported(sentSignal{})); diff != "" {
		t.Errorf("signals got(-), want(+):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"chat"}, c.cancelled); diff != "" {
		t.Errorf("cancelled got(-), want(+):\n%s", diff)
	}
}

func TestSendMetricsRepeats(t *testing.T) {
	c := &fakeTemporal{workflows: map[string]jobs.Workflow{"chat": runningService}}
	f := metricsFlags{metrics: autoscale.Metrics{QPS: 12, QueueLength: 3}, every: 10 * time.Millisecond, span: 30 * time.Millisecond}
	var out bytes.Buffer
	start := time.Now()
	if err := sendMetrics(context.Background(), c, "chat", f, &out); err != nil {
		t.Fatal(err)
	}
	if len(c.signals) != 3 {
		t.Fatalf("sent %d reports; want 3", len(c.signals))
	}
	var last time.Time
	for i, s := range c.signals {
		m, ok := s.arg.(autoscale.Metrics)
		if s.id != "chat" || s.name != workflows.SignalMetrics || !ok {
			t.Fatalf("signal %d is %+v; want metrics to chat", i, s)
		}
		if m.QPS != 12 || m.QueueLength != 3 || m.At.Before(start) || !m.At.After(last) {
			t.Errorf("report %d is %+v; want 12 qps, queue 3, stamped after the one before", i, m)
		}
		last = m.At
	}
	if got := c.signals[2].arg.(autoscale.Metrics).At.Sub(c.signals[0].arg.(autoscale.Metrics).At); got < 2*f.every-time.Millisecond {
		t.Errorf("three reports spanned %s; want them %s apart", got, f.every)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasSuffix(lines[2], "chat <- 12 qps, queue 3, gpu 0% over the ready replicas (report 3 of 3)") {
		t.Errorf("output:\n%s\nwant one line per report, the last ending in report 3 of 3", out.String())
	}
}

func TestPoolNotRunningSaysHowToStartOne(t *testing.T) {
	cases := map[string]map[string]jobs.Workflow{
		"never started": {},
		"ended":         {workflows.PoolWorkflowID: {Type: workflows.CapacityPoolName}},
	}
	for name, known := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := poolStatus(context.Background(), &fakeTemporal{workflows: known}, "default")
			for _, want := range []string{"no capacity pool is running in namespace default", "--pools FILE", "examples/pools.yaml"} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("error %v; want it to say %q", err, want)
				}
			}
		})
	}
}

var t0 = time.Date(2025, 3, 4, 9, 0, 0, 0, time.UTC)

func at(d time.Duration) *time.Time {
	t := t0.Add(d)
	return &t
}

// lineWith returns the fields of the one output line that starts with
// prefix once trimmed.
func lineWith(t *testing.T, out, prefix string) []string {
	t.Helper()
	var found []string
	for line := range strings.Lines(out) {
		if strings.HasPrefix(strings.TrimSpace(line), prefix) {
			if found != nil {
				t.Fatalf("two lines start with %q:\n%s", prefix, out)
			}
			found = strings.Fields(line)
		}
	}
	if found == nil {
		t.Fatalf("no line starts with %q:\n%s", prefix, out)
	}
	return found
}

func TestPrintServiceStatus(t *testing.T) {
	base := inference.Status{
		ID: "chat", Team: "serving", Tier: "deadline", Priority: 90, State: workflows.StateRunning,
		MinReplicas: 1, MaxReplicas: 3, StartedAt: t0,
		Desired: autoscale.Decision{Replicas: 3, Warm: 1, Reason: "qps 28 over 10 per replica"},
		Ready:   1, Starting: 1, Warm: 0, LeadTimeSeconds: 150.4, CostUSD: 1.23456,
	}
	placed := base
	placed.LastMetrics = &autoscale.Metrics{At: *at(5 * time.Minute), QPS: 28, QueueLength: 4, GPUUtilization: 0.85, Replicas: 1}
	placed.Replicas = []inference.ReplicaStatus{
		{ID: "chat/r1", State: inference.ReplicaReady, Layer: admission.BaseLayer, Instance: &workload.InstanceRef{
			ID: "i-base-1", Offering: "base/p3.2xlarge/dc-1/on-demand", Market: "on-demand", Zone: "dc-1", PricePerHour: 1.2}},
		{ID: "chat/r2", State: inference.ReplicaStarting},
		{ID: "chat/r3", State: inference.ReplicaWarm, Layer: admission.BurstLayer, Instance: &workload.InstanceRef{
			ID: "i-77", Market: "spot", Zone: "us-west-2a", PricePerHour: 0.9701}},
	}
	expected := 6.94
	placed.Desired.Forecast = &autoscale.Forecast{Forecaster: "peak-1L", At: *at(10 * time.Minute), Load: 7.44, Margin: 0.51,
		Now: 7.2, NowAt: *at(5 * time.Minute), Expected: &expected}
	placed.Failures = []workload.Failure{{Class: "capacity", Offering: "sim/p3.2xlarge/us-west-2b/spot", Message: "no spot stock", Time: *at(3 * time.Minute)}}
	for i := range 7 {
		placed.Decisions = append(placed.Decisions, inference.DecisionRecord{Time: *at(time.Duration(i) * time.Minute), Replicas: i + 1, Reason: "step"})
	}
	served := base
	served.Mode, served.Endpoint = inference.ModeServing, "127.0.0.1:9000"
	served.Traffic = &serving.Traffic{RPS: 12.5, InFlight: 3, Queued: 1, LatencyP50Seconds: 0.0123, LatencyP99Seconds: 0.25, Errors: 2, SLOShare: 0.987}
	served.Replicas = []inference.ReplicaStatus{{ID: "chat/r1", State: inference.ReplicaDraining, Endpoint: "127.0.0.1:8001"}}
	capacityOnly := base
	capacityOnly.Mode = inference.ModeCapacityOnly
	held := base
	held.AcquiringHeldUntil = at(10 * time.Minute)
	held.ReplicasLost = 2

	cases := map[string]struct {
		st     inference.Status
		fields map[string][]string // a line's prefix: all its fields
		absent []string
	}{
		"placed replicas, load, decisions and a failure": {
			st: placed,
			fields: map[string][]string{
				"service":   strings.Fields("service chat (team serving, tier deadline, priority 90)"),
				"state":     strings.Fields("state running since 2025-03-04T09:00:00Z"),
				"desired":   strings.Fields("desired 3 replicas, 1 warm (qps 28 over 10 per replica); bounds 1..3"),
				"fleet":     strings.Fields("fleet 1 ready, 1 starting, 0 warm"),
				"load":      strings.Fields("load 28 qps, queue 4, gpu 85% over 1 replicas at 09:05:00"),
				"forecast":  strings.Fields("forecast peak-1L expects 7.4 replicas' load at 09:10:00 (margin 0.5)"),
				"for 09:05": strings.Fields("for 09:05:00 it expected 6.9, and 7.2 came"),
				"lead time": strings.Fields("lead time 2m30s"),
				"cost":      strings.Fields("cost $1.2346"),
				"ID":        strings.Fields("ID STATE LAYER MARKET ZONE INSTANCE $/H ENDPOINT"),
				"chat/r1":   strings.Fields("chat/r1 ready base on-demand dc-1 i-base-1 1.2000 -"),
				"chat/r2":   strings.Fields("chat/r2 starting - - - - - -"),
				"chat/r3":   strings.Fields("chat/r3 warm burst spot us-west-2a i-77 0.9701 -"),
				"decisions": strings.Fields("decisions 09:02:00 3 replicas, 0 warm: step"),
				"09:06:00":  strings.Fields("09:06:00 7 replicas, 0 warm: step"),
				"failure":   strings.Fields("failure 09:03:00 capacity sim/p3.2xlarge/us-west-2b/spot: no spot stock"),
			},
			// Only the newest five decisions are listed.
			absent: []string{"09:00:00 1 replicas", "09:01:00 2 replicas", "acquiring", "none reported"},
		},
		"nothing yet": {
			st: base,
			fields: map[string][]string{
				"load":     strings.Fields("load none reported yet (starter load chat --qps N)"),
				"replicas": strings.Fields("replicas none"),
			},
			absent: []string{"decisions", "failure", "acquiring", "lost", "forecast"},
		},
		"serving through its balancer": {
			st: served,
			fields: map[string][]string{
				"endpoint": strings.Fields("endpoint http://127.0.0.1:9000"),
				"traffic":  strings.Fields("traffic 12.5 req/s, 3 in flight, 1 queued, p50 12ms p99 250ms, 2 errors, 98.7% within the SLO"),
				"chat/r1":  strings.Fields("chat/r1 draining - - - - - 127.0.0.1:8001"),
			},
		},
		"capacity-only": {
			st: capacityOnly,
			fields: map[string][]string{
				"endpoint": strings.Fields("endpoint none: capacity-only (no command), its replicas hold instances and serve nothing"),
				"load":     strings.Fields("load none reported yet (starter metrics chat --qps N (capacity-only: no endpoint to send requests to))"),
			},
			absent: []string{"traffic"},
		},
		"acquisitions held, replicas lost": {
			st: held,
			fields: map[string][]string{
				"acquiring": strings.Fields("acquiring held until 09:10:00 after failures that retrying at once cannot cure"),
				"lost":      strings.Fields("lost 2 replicas whose instance the cloud took back, each replaced"),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			printServiceStatus(&out, tc.st)
			for prefix, want := range tc.fields {
				if diff := cmp.Diff(want, lineWith(t, out.String(), prefix)); diff != "" {
					t.Errorf("line %q got(-), want(+):\n%s", prefix, diff)
				}
			}
			for _, s := range tc.absent {
				if strings.Contains(out.String(), s) {
					t.Errorf("output has %q:\n%s", s, out.String())
				}
			}
		})
	}
}

func TestServiceLine(t *testing.T) {
	st := inference.Status{State: workflows.StateRunning, Desired: autoscale.Decision{Replicas: 3, Warm: 1, Reason: "qps"},
		Ready: 2, Starting: 1, Warm: 1, CostUSD: 0.5, LastMetrics: &autoscale.Metrics{QPS: 28}}
	want := "09:00:00 running   want 3+1 warm (qps)  ready 2 starting 1 warm 1  28 qps  $0.5000"
	if got := serviceLine(st, t0); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestPrintPool(t *testing.T) {
	dc := capacity.Offering{Provider: "base", InstanceType: "p3.2xlarge", Zone: "dc-1", Market: "on-demand", GPUs: 1, PricePerHour: 1.2}
	spot := capacity.Offering{Provider: "sim", InstanceType: "p3.2xlarge", Zone: "us-west-2a", Market: "spot", GPUs: 1, PricePerHour: 0.9701}
	od := capacity.Offering{Provider: "sim", InstanceType: "p3.2xlarge", Zone: "us-west-2a", Market: "on-demand", GPUs: 1, PricePerHour: 3.06}
	now := t0.Add(time.Hour)
	busy := capacitypool.Status{
		Base: 2, Burst: 2, BaseGPUs: 2, FreeBaseGPUs: 0, Preemptions: 1, Moves: 2, Generation: 3, History: 412,
		// The pool answers in admission order; the paused request keeps its place.
		Waiting: []capacitypool.QueuedRequest{
			{Request: admission.Request{ID: "sweep-b", Kind: admission.Training, Team: "research", Priority: 20, EnqueuedAt: t0}, EffectivePriority: 30},
			{Request: admission.Request{ID: "eval", Kind: admission.Training, Priority: 25, EnqueuedAt: t0.Add(30 * time.Minute),
				Paused: true, PausedAt: t0.Add(50 * time.Minute)}, EffectivePriority: 26.67},
			{Request: admission.Request{ID: "chat/r4", Kind: admission.Service, Team: "serving", Priority: 10, EnqueuedAt: t0.Add(59 * time.Minute)}, EffectivePriority: 10.17,
				Why: "behind sweep-b, admitted first"},
		},
		Running: []admission.Allocation{
			{Request: admission.Request{ID: "llm", Kind: admission.Training}, Layer: admission.BaseLayer, Node: "dc-0", Offerings: []capacity.Offering{dc}, Bound: true},
			{Request: admission.Request{ID: "chat/r1", Kind: admission.Service}, Layer: admission.BaseLayer, Node: "dc-1", Offerings: []capacity.Offering{dc}, Bound: true, Yielding: true},
			{Request: admission.Request{ID: "sweep-a", Kind: admission.Training}, Layer: admission.BurstLayer, Pool: "aws", Offerings: []capacity.Offering{spot}, Bound: true},
			{Request: admission.Request{ID: "vision", Kind: admission.Training}, Layer: admission.BurstLayer, Pool: "aws", Offerings: []capacity.Offering{spot, od}},
		},
	}
	cases := map[string]struct {
		st     capacitypool.Status
		fields map[string][]string // a line's prefix: all its fields
	}{
		"queue and allocations": {
			st: busy,
			fields: map[string][]string{
				"base":       strings.Fields("base 2 of 2 GPUs used, 0 free (2 allocations)"),
				"burst":      strings.Fields("burst 2 instances"),
				"preempted":  strings.Fields("preempted 1, moved from burst to base 2"),
				"generation": strings.Fields("generation 3 (412 history events)"),
				"1 ":         strings.Fields("1 sweep-b training research 20 30.0 1h0m0s queued"),
				"2 ":         strings.Fields("2 eval training - 25 26.7 20m0s paused"),
				"3 ":         strings.Fields("3 chat/r4 service serving 10 10.2 1m0s queued"),
				"3.":         strings.Fields("3. chat/r4: behind sweep-b, admitted first"),
				"llm":        strings.Fields("llm training base dc-0 running base/p3.2xlarge/dc-1/on-demand $1.2000/h"),
				"chat/r1":    strings.Fields("chat/r1 service base dc-1 yielding base/p3.2xlarge/dc-1/on-demand $1.2000/h"),
				"sweep-a":    strings.Fields("sweep-a training burst aws running sim/p3.2xlarge/us-west-2a/spot $0.9701/h"),
				"vision":     strings.Fields("vision training burst aws acquiring sim/p3.2xlarge/us-west-2a/spot (+1 more to try)"),
			},
		},
		"idle": {
			st: capacitypool.Status{BaseGPUs: 4, FreeBaseGPUs: 4, Waiting: []capacitypool.QueuedRequest{}, Running: []admission.Allocation{}},
			fields: map[string][]string{
				"base":    strings.Fields("base 0 of 4 GPUs used, 4 free (0 allocations)"),
				"waiting": strings.Fields("waiting none"),
				"running": strings.Fields("running none"),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			printPool(&out, tc.st, now)
			for prefix, want := range tc.fields {
				if diff := cmp.Diff(want, lineWith(t, out.String(), prefix)); diff != "" {
					t.Errorf("line %q got(-), want(+):\n%s", prefix, diff)
				}
			}
		})
	}
}
