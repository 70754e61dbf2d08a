package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

// A mem:// checkpoint store lives in one process: a worker whose
// instances are processes of their own refuses it before anything is
// acquired; one that hosts its instances in-process takes it.
func TestMemStoreOnlyWhereInstancesShareTheProcess(t *testing.T) {
	for name, tc := range map[string]struct {
		inProcess bool
		url       string
		refused   bool
	}{
		"processes, mem://":  {false, "mem://", true},
		"processes, file://": {false, "file:///tmp/ckpt", false},
		"processes, default": {false, "", false},
		"in-process, mem://": {true, "mem://", false},
	} {
		t.Run(name, func(t *testing.T) {
			a := &Capacity{Providers: nil, InProcessInstances: tc.inProcess}
			_, err := a.ListOfferings(context.Background(), OfferingsInput{CheckpointURL: tc.url})
			var app *temporal.ApplicationError
			refused := errors.As(err, &app) && app.Type() == "InvalidJobSpec"
			if refused != tc.refused {
				t.Fatalf("error %v; refused %v, want %v", err, refused, tc.refused)
			}
			if refused && (!app.NonRetryable() || !strings.Contains(err.Error(), "checkpoint.url") || !strings.Contains(err.Error(), "file://")) {
				t.Errorf("error %q: want a final error naming checkpoint.url and what to use", err)
			}
		})
	}
}

// slow is a provider whose every call takes a while; its Release finds
// the instance already gone.
type slow struct {
	describer
	took time.Duration
}

func (s slow) Acquire(_ context.Context, req capacity.Request) (capacity.Instance, error) {
	time.Sleep(s.took)
	return capacity.Instance{ID: "i-slow", Offering: req.Offerings[0]}, nil
}

func (s slow) Release(_ context.Context, id string) error {
	time.Sleep(s.took)
	return &capacity.NotFoundError{ID: id}
}

// A provider call that outlasts the activity's heartbeat timeout is kept
// alive by heartbeats, so only a dead worker's call is retried
// elsewhere; a release that finds the instance gone has released it. The
// control, an activity as slow that does not heartbeat, times out.
//
// The SDK sends heartbeats at most every 0.8 of the timeout, so a
// heartbeat timeout of a second leaves 200 ms for a busy machine to send
// one; the control runs beside the provider calls to keep the test short.
func TestCapacityCallsHeartbeatWhileTheProviderWorks(t *testing.T) {
	const heartbeat = time.Second
	offering := capacity.Offering{Provider: "fake", InstanceType: "gpu", Zone: "a", Market: capacity.Spot, GPUs: 1}
	a := &Capacity{Providers: []capacity.Provider{slow{took: 5 * heartbeat / 2}}}
	silent := func(context.Context) error { time.Sleep(5 * heartbeat / 2); return nil }
	calls := func(ctx workflow.Context) (string, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: time.Minute, HeartbeatTimeout: heartbeat,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
		})
		control := workflow.ExecuteActivity(ctx, silent)
		var inst capacity.Instance
		if err := workflow.ExecuteActivity(ctx, a.Acquire, capacity.Request{RunID: "r", Attempt: 1, Offerings: []capacity.Offering{offering}}).Get(ctx, &inst); err != nil {
			return "", err
		}
		if err := workflow.ExecuteActivity(ctx, a.Release, ReleaseInput{Instance: inst, Reason: ReleaseCompleted}).Get(ctx, nil); err != nil {
			return "", err
		}
		var timeout *temporal.TimeoutError
		if err := control.Get(ctx, nil); !errors.As(err, &timeout) || timeout.TimeoutType() != enums.TIMEOUT_TYPE_HEARTBEAT {
			return "", fmt.Errorf("an activity as slow without heartbeats ended with %v; want a heartbeat timeout", err)
		}
		return inst.ID, nil
	}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterActivity(a)
	env.RegisterActivity(silent)
	env.ExecuteWorkflow(calls)
	var id string
	if err := env.GetWorkflowResult(&id); err != nil {
		t.Fatal(err)
	}
	if id != "i-slow" {
		t.Errorf("acquired %q; want i-slow", id)
	}
}

// offeringsFail is a provider whose listing fails as it says.
type offeringsFail struct {
	describer
	err error
}

func (p offeringsFail) Offerings(context.Context, spec.Resources) ([]capacity.Offering, error) {
	return nil, p.err
}

// A provider's listing refused for refuel's configuration ends the run at
// once, typed by the class; any other failure is left to the retries.
func TestListingRefusedForConfigIsFinal(t *testing.T) {
	for name, tc := range map[string]struct {
		err   error
		final bool
	}{
		"credentials refused": {capacity.NewError(capacity.Config, capacity.Offering{Provider: "fake"}, "AuthFailure", "check the access key"), true},
		"network down":        {errors.New("connection refused"), false},
	} {
		t.Run(name, func(t *testing.T) {
			a := &Capacity{Providers: []capacity.Provider{offeringsFail{err: tc.err}}}
			_, err := a.ListOfferings(context.Background(), OfferingsInput{})
			var app *temporal.ApplicationError
			final := errors.As(err, &app) && app.NonRetryable() && app.Type() == string(capacity.Config)
			if final != tc.final {
				t.Errorf("error %v: final %v, want %v", err, final, tc.final)
			}
		})
	}
}

// scripted is a provider that fails each market's offerings with the
// class given for it, succeeds on the others, and counts its calls.
type scripted struct {
	describer
	name  string
	fails map[capacity.Market]capacity.Class
	calls *int
}

func (p scripted) Name() string { return p.name }

func (p scripted) Acquire(_ context.Context, req capacity.Request) (capacity.Instance, error) {
	*p.calls++
	var errs []error
	for _, o := range req.Offerings {
		c, fails := p.fails[o.Market]
		if !fails {
			return capacity.Instance{ID: "i-" + o.Key(), Offering: o}, nil
		}
		errs = append(errs, capacity.NewError(c, o, "", "scripted"))
	}
	return capacity.Instance{}, errors.Join(errs...)
}

// A failure of the provider's account (throttling) keeps the Acquire
// activity from asking that provider for its other offerings further
// down the order; a failure of an offering (a quota of one market) does
// not.
func TestAccountFailureSkipsTheProvidersOtherOfferings(t *testing.T) {
	offering := func(p string, m capacity.Market) capacity.Offering {
		return capacity.Offering{Provider: p, InstanceType: "gpu", Zone: "z", Market: m, GPUs: 1}
	}
	order := []capacity.Offering{offering("a", capacity.Spot), offering("b", capacity.Spot), offering("a", capacity.OnDemand)}
	for name, tc := range map[string]struct {
		spotFails capacity.Class
		calls     int
		acquired  string
	}{
		"throttled": {capacity.Throttled, 1, ""},
		"quota":     {capacity.Quota, 2, order[2].Key()},
	} {
		t.Run(name, func(t *testing.T) {
			var aCalls, bCalls int
			a := &Capacity{Providers: []capacity.Provider{
				scripted{name: "a", fails: map[capacity.Market]capacity.Class{capacity.Spot: tc.spotFails}, calls: &aCalls},
				scripted{name: "b", fails: map[capacity.Market]capacity.Class{capacity.Spot: capacity.NoCapacity}, calls: &bCalls},
			}}
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestActivityEnvironment()
			env.RegisterActivity(a)
			v, err := env.ExecuteActivity(a.Acquire, capacity.Request{RunID: "r", Attempt: 1, Offerings: order})
			acquired := ""
			if err == nil {
				var inst capacity.Instance
				if err := v.Get(&inst); err != nil {
					t.Fatal(err)
				}
				acquired = inst.Offering.Key()
			}
			if aCalls != tc.calls || bCalls != 1 || acquired != tc.acquired {
				t.Errorf("provider a asked %d times, b %d, acquired %q (error %v); want a %d, b 1, acquired %q",
					aCalls, bCalls, acquired, err, tc.calls, tc.acquired)
			}
		})
	}
}

// clockCloud is an Interrupter with a market clock, as the simulated
// cloud is: it records the holds it is asked for and the instances it
// is asked to interrupt.
type clockCloud struct {
	holds       []time.Duration
	interrupted []string
}

func (c *clockCloud) Interrupt(id string, _ time.Duration) (time.Time, error) {
	c.interrupted = append(c.interrupted, id)
	return time.Unix(1, 0), nil
}

func (c *clockCloud) HoldClock(d time.Duration) { c.holds = append(c.holds, d) }

// An interruption with no instance only holds the market's clock (a
// drill's start and end); one with an instance holds it from the notice.
func TestInterruptHoldsTheMarketClock(t *testing.T) {
	cloud := &clockCloud{}
	a := &Capacity{Interrupters: []Interrupter{cloud}}
	for _, in := range []InterruptInput{{Still: time.Minute}, {Still: 0}, {InstanceID: "i-1", Grace: time.Second, Still: 2 * time.Minute}, {InstanceID: "i-2"}} {
		if _, err := a.Interrupt(context.Background(), in); err != nil {
			t.Fatalf("Interrupt(%+v): %v", in, err)
		}
	}
	if want := []time.Duration{time.Minute, 0, 2 * time.Minute}; !slices.Equal(cloud.holds, want) {
		t.Errorf("holds %v; want %v", cloud.holds, want)
	}
	if want := []string{"i-1", "i-2"}; !slices.Equal(cloud.interrupted, want) {
		t.Errorf("interrupted %v; want %v (a hold alone interrupts nothing)", cloud.interrupted, want)
	}
}
