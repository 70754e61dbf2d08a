package inference

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/mock"
	sdk "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/autoscale"
	"refuel/pkg/capacity"
	"refuel/pkg/spec"
	"refuel/workflows"
	"refuel/workflows/internal/fakecloud"
)

// baseN1 is a machine of the dedicated base group.
var baseN1 = capacity.Offering{Provider: "fake", InstanceType: "gpu.1x", Zone: "a", Market: capacity.Base, GPUs: 1, PricePerHour: 0.5}

// serviceCloud is Cloud as a service sees it: it counts listings and
// keeps releases in the order the workflow scheduled them (activities
// run concurrently, so the order they ran in says nothing).
type serviceCloud struct {
	*fakecloud.Cloud
	listings int
	releases []scheduledRelease
	// lost are instances the cloud took back, by id, with their state.
	lost map[string]capacity.State
	// cannotStop makes it a provider without capacity.Stopper; failStart
	// makes every start find the instance gone. stops and starts are the
	// instances stopped and started, in order.
	cannotStop, failStart bool
	stops, starts         []string
}

// StopInstance stops any on-demand instance, as a capacity.Stopper does,
// at a volume price of 0.02 an hour.
func (c *serviceCloud) StopInstance(_ context.Context, inst capacity.Instance) (activities.StopResult, error) {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	switch {
	case c.cannotStop:
		return activities.StopResult{Reason: "provider fake cannot stop instances"}, nil
	case inst.Offering.Market != capacity.OnDemand:
		return activities.StopResult{Reason: "a spot instance is reclaimed, not stopped"}, nil
	}
	c.stops = append(c.stops, inst.ID)
	return activities.StopResult{Stopped: true, PricePerHour: 0.02}, nil
}

func (c *serviceCloud) StartInstance(_ context.Context, inst capacity.Instance) (capacity.Instance, error) {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	if c.failStart {
		return capacity.Instance{}, temporal.NewNonRetryableApplicationError("instance "+inst.ID+" not found", "instance-lost", nil)
	}
	c.starts = append(c.starts, inst.ID)
	return inst, nil
}

func (c *serviceCloud) stoppedAndStarted() (stops, starts []string) {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	return slices.Clone(c.stops), slices.Clone(c.starts)
}

func (c *serviceCloud) LostInstances(_ context.Context, insts []capacity.Instance) ([]activities.LostInstance, error) {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	var out []activities.LostInstance
	for _, i := range insts {
		if st, ok := c.lost[i.ID]; ok {
			out = append(out, activities.LostInstance{ID: i.ID, State: st})
		}
	}
	return out, nil
}

// take marks an instance as taken back by the cloud.
func (c *serviceCloud) take(id string, st capacity.State) {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	if c.lost == nil {
		c.lost = map[string]capacity.State{}
	}
	c.lost[id] = st
}

type scheduledRelease struct {
	seq int // the activity ID: the order the workflow scheduled it in
	in  activities.ReleaseInput
}

func (c *serviceCloud) ListOfferings(ctx context.Context, in activities.OfferingsInput) ([]capacity.Offering, error) {
	c.Mu.Lock()
	c.listings++
	c.Mu.Unlock()
	return c.Cloud.ListOfferings(ctx, in)
}

func (c *serviceCloud) Release(ctx context.Context, in activities.ReleaseInput) error {
	seq, err := strconv.Atoi(activity.GetInfo(ctx).ActivityID)
	if err != nil {
		return err
	}
	c.Mu.Lock()
	defer c.Mu.Unlock()
	c.releases = append(c.releases, scheduledRelease{seq, in})
	return nil
}

func (c *serviceCloud) released() []activities.ReleaseInput {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	rs := slices.Clone(c.releases)
	slices.SortFunc(rs, func(a, b scheduledRelease) int { return a.seq - b.seq })
	out := make([]activities.ReleaseInput, len(rs))
	for i, r := range rs {
		out[i] = r.in
	}
	return out
}

func (c *serviceCloud) acquisitions() []capacity.Request {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	return slices.Clone(c.Requests)
}

// fakePool stands in for the capacity pool workflow: it keeps every
// signal a service sends it, and grants what a test says. absent makes
// every signal fail, as when no pool runs.
type fakePool struct {
	mu      sync.Mutex
	absent  bool
	sent    []sentSignal
	granted []string
}

type sentSignal struct {
	name string
	arg  any
}

func (p *fakePool) signal(_, _, _, name string, arg any) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.absent {
		return errors.New("workflow not found: " + workflows.PoolWorkflowID)
	}
	p.sent = append(p.sent, sentSignal{name, arg})
	return nil
}

func (p *fakePool) args(name string) []any {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []any
	for _, s := range p.sent {
		if s.name == name {
			out = append(out, s.arg)
		}
	}
	return out
}

// requests are the replicas asked for, in replica order: replicas ask
// from coroutines of their own, and the test suite runs their signals'
// mocks in no fixed order.
func (p *fakePool) requests() []admission.Request {
	var out []admission.Request
	for _, a := range p.args(workflows.SignalPoolRequest) {
		out = append(out, a.(admission.Request))
	}
	slices.SortStableFunc(out, func(a, b admission.Request) int {
		if len(a.ID) != len(b.ID) {
			return len(a.ID) - len(b.ID)
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

func (p *fakePool) refs(name string) []string {
	var out []string
	for _, a := range p.args(name) {
		out = append(out, a.(workflows.PoolRef).ID)
	}
	return out
}

// grant admits every request not granted yet, placing the n-th (from 0)
// where place says; place returns false to leave it queued.
func (p *fakePool) grant(env *testsuite.TestWorkflowEnvironment, place func(n int, r admission.Request) (admission.Allocation, bool)) {
	for n, r := range p.requests() {
		p.mu.Lock()
		done := slices.Contains(p.granted, r.ID)
		p.mu.Unlock()
		if done {
			continue
		}
		a, ok := place(n, r)
		if !ok {
			continue
		}
		a.Request = r
		p.mu.Lock()
		p.granted = append(p.granted, r.ID)
		p.mu.Unlock()
		env.SignalWorkflow(workflows.SignalCapacityGranted, a)
	}
}

func onBase(admission.Request) admission.Allocation {
	return admission.Allocation{Layer: admission.BaseLayer, Node: "n1", Offerings: []capacity.Offering{baseN1}}
}

func onBurst(offerings ...capacity.Offering) admission.Allocation {
	return admission.Allocation{Layer: admission.BurstLayer, Pool: "public", Offerings: offerings}
}

// newServiceEnv is a test environment running the service on c with p;
// register, if given, registers more workflows before any mock.
func newServiceEnv(t *testing.T, c *serviceCloud, p *fakePool, register ...func(*testsuite.TestWorkflowEnvironment)) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	for _, r := range register {
		r(env)
	}
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "svc"})
	env.RegisterWorkflowWithOptions((&Services{Options: DefaultOptions()}).InferenceService, workflow.RegisterOptions{Name: workflows.InferenceServiceName})
	for name, fn := range map[string]any{
		activities.ListOfferingsName: c.ListOfferings, activities.AcquireName: c.Acquire, activities.ReleaseName: c.Release,
		activities.LostInstancesName: c.LostInstances, activities.StopInstanceName: c.StopInstance, activities.StartInstanceName: c.StartInstance,
	} {
		env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
	env.OnSignalExternalWorkflow(mock.Anything, workflows.PoolWorkflowID, "", mock.Anything, mock.Anything).Return(p.signal)
	return env
}

func serviceSpec(edit func(*spec.ServiceSpec)) spec.ServiceSpec {
	s := spec.ServiceSpec{
		ID: "svc", Team: "t", Priority: 60, MinReplicas: 1, MaxReplicas: 4,
		Target: spec.ScalingTarget{QPS: 2}, LeadTime: "1m", DownscaleDelay: spec.Duration(2 * time.Minute),
	}
	if edit != nil {
		edit(&s)
	}
	return s
}

// every calls f at from, from+step, … up to to.
func every(env *testsuite.TestWorkflowEnvironment, step, from, to time.Duration, f func()) {
	for at := from; at <= to; at += step {
		env.RegisterDelayedCallback(f, at)
	}
}

// reportQPS sends a metrics report every 10 s from from to to.
func reportQPS(env *testsuite.TestWorkflowEnvironment, from, to time.Duration, qps float64) {
	every(env, 10*time.Second, from, to, func() { env.SignalWorkflow(workflows.SignalMetrics, autoscale.Metrics{QPS: qps}) })
}

func queryService(t *testing.T, env *testsuite.TestWorkflowEnvironment) Status {
	t.Helper()
	v, err := env.QueryWorkflow(workflows.QueryStatus)
	if err != nil {
		t.Fatal(err)
	}
	var st Status
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// statusAt queries status at a moment of workflow time.
func statusAt(t *testing.T, env *testsuite.TestWorkflowEnvironment, at time.Duration) *Status {
	st := new(Status)
	env.RegisterDelayedCallback(func() { *st = queryService(t, env) }, at)
	return st
}

// runUntilCancelled runs the service until it is cancelled at end.
func runUntilCancelled(t *testing.T, env *testsuite.TestWorkflowEnvironment, end time.Duration, args ...any) Status {
	t.Helper()
	env.RegisterDelayedCallback(env.CancelWorkflow, end)
	env.ExecuteWorkflow(workflows.InferenceServiceName, args...)
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	var canceled *temporal.CanceledError
	if err := env.GetWorkflowError(); !errors.As(err, &canceled) {
		t.Fatalf("error %v; want cancelled", err)
	}
	var st Status
	if err := canceled.Details(&st); err != nil {
		t.Fatalf("cancellation carries no final status: %v", err)
	}
	return st
}

func replicaIDs(st Status) []string {
	var ids []string
	for _, r := range st.Replicas {
		ids = append(ids, r.ID)
	}
	return ids
}

func TestServiceCancelReleasesEverything(t *testing.T) {
	t.Parallel()
	c := &serviceCloud{Cloud: &fakecloud.Cloud{}}
	p := &fakePool{}
	env := newServiceEnv(t, c, p)
	// r1 and r2 serve, r3 (the warm pool's) stays queued.
	env.RegisterDelayedCallback(func() {
		p.grant(env, func(n int, r admission.Request) (admission.Allocation, bool) {
			return map[int]admission.Allocation{0: onBase(r), 1: onBurst(fakecloud.SpotA)}[n], n < 2
		})
	}, 10*time.Second)
	st := runUntilCancelled(t, env, time.Minute, serviceSpec(func(s *spec.ServiceSpec) { s.MinReplicas, s.WarmPool = 2, 1 }))

	var released []string
	for _, in := range c.released() {
		released = append(released, in.Instance.ID)
		if in.Reason != activities.ReleaseCleanup {
			t.Errorf("released %s for %s; want cleanup", in.Instance.ID, in.Reason)
		}
	}
	var acquired []string
	for _, inst := range c.Acquired {
		acquired = append(acquired, inst.ID)
	}
	if len(acquired) != 2 || !cmp.Equal(sorted(released), sorted(acquired)) {
		t.Errorf("released %v; want every instance acquired, %v, once", released, acquired)
	}
	if rel := sorted(p.refs(workflows.SignalPoolRelease)); !cmp.Equal(rel, []string{"svc/r1", "svc/r2", "svc/r3"}) {
		t.Errorf("pool told of %v; want every replica, the queued warm one too", rel)
	}
	if st.State != workflows.StateStopped || len(st.Replicas) != 0 {
		t.Errorf("final status %s with %v; want cancelled with nothing held", st.State, replicaIDs(st))
	}
	if st.Mode != ModeCapacityOnly || st.Serving != nil || st.Endpoint != "" {
		t.Errorf("status mode %q serving %+v endpoint %q; want capacity-only, with nothing for a balancer", st.Mode, st.Serving, st.Endpoint)
	}
}

func TestInvalidServiceSpecIsRejected(t *testing.T) {
	t.Parallel()
	env := newServiceEnv(t, &serviceCloud{Cloud: &fakecloud.Cloud{}}, &fakePool{})
	env.ExecuteWorkflow(workflows.InferenceServiceName, serviceSpec(func(s *spec.ServiceSpec) { s.MaxReplicas, s.Priority = 0, 101 }))
	err := env.GetWorkflowError()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != "InvalidServiceSpec" || !app.NonRetryable() {
		t.Fatalf("error %v; want a non-retryable InvalidServiceSpec", err)
	}
	var fields []spec.FieldError
	if err := app.Details(&fields); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range fields {
		names = append(names, f.Field)
	}
	if diff := cmp.Diff(names, []string{"priority", "max_replicas"}); diff != "" {
		t.Errorf("field errors got(-), want(+):\n%s", diff)
	}
}

func TestServiceContinuesAsNewWithItsState(t *testing.T) {
	t.Parallel()
	c := &serviceCloud{Cloud: &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA}}}
	env := newServiceEnv(t, c, &fakePool{absent: true})
	env.RegisterDelayedCallback(func() { env.SetContinueAsNewSuggested(true) }, time.Minute)
	reportQPS(env, 10*time.Second, 50*time.Second, 3)
	s := serviceSpec(func(s *spec.ServiceSpec) { s.MinReplicas = 2 })
	env.ExecuteWorkflow(workflows.InferenceServiceName, s)
	var next *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &next) {
		t.Fatalf("error %v; want continue-as-new", err)
	}
	var carried spec.ServiceSpec
	var carry *ServiceState
	if err := converter.GetDefaultDataConverter().FromPayloads(next.Input, &carried, &carry); err != nil {
		t.Fatal(err)
	}
	if carry == nil || len(carry.Replicas) != 2 || carry.NextReplica != 2 || carry.ForecastScaler == nil || len(carry.ForecastScaler.Loads.Values) == 0 || len(c.released()) != 0 {
		t.Fatalf("carry %+v after %d releases; want 2 replicas held, numbering and the policy's loads carried", carry, len(c.released()))
	}

	// The next run holds the same instances: it acquires nothing and,
	// cancelled, gives back exactly those.
	c2 := &serviceCloud{Cloud: &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA}}}
	env2 := newServiceEnv(t, c2, &fakePool{absent: true})
	st := statusAt(t, env2, 30*time.Second)
	runUntilCancelled(t, env2, time.Minute, carried, carry)
	if len(c2.acquisitions()) != 0 || st.Ready != 2 {
		t.Errorf("next run: %d acquisitions, %d ready; want the 2 carried replicas and no new ones", len(c2.acquisitions()), st.Ready)
	}
	// It has had no report of its own: its forecast is from the loads
	// the previous run learned.
	if f := st.Desired.Forecast; f == nil || f.Now != 1.5 {
		t.Errorf("next run's forecast %+v (%s); want one from the carried loads (1.5 replicas)", f, st.Desired.Explanation)
	}
	var released []string
	for _, in := range c2.released() {
		released = append(released, in.Instance.ID)
	}
	want := []string{carry.Replicas[0].Instance.ID, carry.Replicas[1].Instance.ID}
	if !cmp.Equal(sorted(released), sorted(want)) {
		t.Errorf("next run released %v; want the carried %v", released, want)
	}
}

// A service started before the ForecastScaler (its carried state has
// none) keeps deciding by the Autoscaler; a new one follows the
// ForecastScaler.
func TestServicePolicyByWhenItStarted(t *testing.T) {
	t.Parallel()
	s := serviceSpec(nil)
	s.Normalize()
	old, err := autoscale.NewAutoscaler(s)
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	cases := map[string]struct {
		carry  *ServiceState
		reason string
	}{
		"started before": {&ServiceState{Autoscaler: *old, Options: &opts}, `^load 1\.50 expected within 1m0s$`},
		"started now":    {nil, `^\S+ expects 1\.50 within 1m0s, margin -?0\.00$`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := newServiceEnv(t, &serviceCloud{Cloud: &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA}}}, &fakePool{absent: true})
			reportQPS(env, 10*time.Second, 20*time.Minute, 3)
			st := statusAt(t, env, 20*time.Minute+time.Second)
			var details string
			env.RegisterDelayedCallback(func() {
				v, err := env.QueryWorkflow("__temporal_workflow_metadata")
				if err != nil {
					t.Error(err)
					return
				}
				var meta sdk.WorkflowMetadata
				if err := v.Get(&meta); err != nil {
					t.Error(err)
				}
				details = meta.GetCurrentDetails()
			}, 20*time.Minute+time.Second)
			runUntilCancelled(t, env, 21*time.Minute, s, tc.carry)
			if !regexp.MustCompile(tc.reason).MatchString(st.Desired.Reason) || (st.Desired.Forecast != nil) != (tc.carry == nil) {
				t.Errorf("decided %+v; want the reason %q, a forecast only from the ForecastScaler", st.Desired, tc.reason)
			}
			if f := st.Desired.Forecast; f != nil {
				want := "forecast: " + f.Forecaster + " expects 1.5 replicas at " + f.At.UTC().Format(time.TimeOnly) + " UTC (margin 0.0); for " +
					f.NowAt.UTC().Format(time.TimeOnly) + " it expected 1.5, and 1.5 came"
				if !strings.Contains(details, want) {
					t.Errorf("details:\n%s\nwant the line %q", details, want)
				}
			} else if strings.Contains(details, "forecast:") {
				t.Errorf("details:\n%s\nwant no forecast line", details)
			}
		})
	}
}
