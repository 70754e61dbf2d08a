package activities

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"refuel/internal/telemetry"
	"refuel/pkg/capacity"
	"refuel/pkg/marketmem"
	"refuel/pkg/policy"
)

// Interrupter is a provider that can reclaim an instance on demand, the
// way a spot market does; the local and simulated clouds are.
type Interrupter interface {
	Interrupt(id string, grace time.Duration) (time.Time, error)
}

// StockHolder is an Interrupter that can also take the stock of an
// instance's market in its zone away for a while, as a market with
// nothing left to sell.
type StockHolder interface {
	HoldStock(id string, d time.Duration) error
}

// ClockHolder is an Interrupter whose market runs on a clock of its
// own, which it can stop for a while.
type ClockHolder interface {
	HoldClock(d time.Duration)
}

// Capacity holds the control plane's capacity activities.
type Capacity struct {
	Providers []capacity.Provider
	// Interrupters are the clouds that can reclaim an instance on demand
	// (the local and simulated ones), for drills and demos.
	Interrupters []Interrupter
	Unavailable  *capacity.UnavailableCache
	// Clocks are the providers, by name, whose runs keep their market's
	// time (the simulated cloud when so configured); runs on any other
	// provider keep wall time.
	Clocks map[string]capacity.MarketClock
	// Memory is the deployment's market memory: each pool's checkpoint
	// log and what runs saw of each spot offering's stock, shared by every
	// worker of the deployment; nil keeps none.
	Memory *marketmem.Store
	// InProcessInstances is set when the clouds run instances inside this
	// worker's process, where a mem:// checkpoint store is shared.
	InProcessInstances bool
	// Deployment is tagged on every instance acquired (TagDeployment);
	// empty means DefaultDeployment.
	Deployment string
	// Plans are the worker's outlooks for the runs that choose their
	// market (DecideMarket); nil solves each decision's afresh.
	Plans *policy.Plans
}

// ListOfferings asks each allowed provider what it sells for the resources.
func (a *Capacity) ListOfferings(ctx context.Context, in OfferingsInput) ([]capacity.Offering, error) {
	if strings.HasPrefix(in.CheckpointURL, "mem://") && !a.InProcessInstances {
		return nil, temporal.NewNonRetryableApplicationError(
			"checkpoint.url: mem:// keeps checkpoints in one process's memory, and this worker's instances are processes of their own, "+
				"so a replacement would find none: use file:///… or s3://…, or leave checkpoint.url out for the worker's store",
			"InvalidJobSpec", nil)
	}
	providers := a.allowed(in.Resources.Providers)
	if len(providers) == 0 {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("resources.providers %v names no provider this worker has (it has %v)", in.Resources.Providers, a.names()),
			string(capacity.SpecMismatch), nil)
	}
	var out []capacity.Offering
	for _, p := range providers {
		os, err := p.Offerings(ctx, in.Resources)
		if err != nil && len(capacity.Failures(err)) > 0 && capacity.Permanent(capacity.ClassOf(err)) {
			// Refuel's configuration, not the market: no retry cures it.
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s offerings: %s", p.Name(), capacity.Summary(err)), string(capacity.ClassOf(err)), nil)
		}
		if err != nil {
			return nil, fmt.Errorf("%s offerings: %w", p.Name(), err)
		}
		out = append(out, os...)
	}
	return out, nil
}

// Acquire launches one instance on the first offering that can be had.
// Offerings that just ran out of stock (for any run) are tried last. A
// failure is returned as an application error whose type is the class
// and whose details list every offering's failure. Only the classes whose
// Remedy says a prompt retry may cure them (throttling, the unclassified)
// are left to Temporal's retry policy.
func (a *Capacity) Acquire(ctx context.Context, req capacity.Request) (capacity.Instance, error) {
	req.Offerings = a.preferAvailable(req.Offerings)
	req.Tags = withDeployment(req.Tags, a.Deployment)
	groups := groupByProvider(req.Offerings)
	var errs []error
	// refused holds the providers that failed for the account, not the
	// offering (capacity.Remedy.Account): their other offerings further
	// down would fail alike, so they are not asked again in this call.
	refused := map[string]bool{}
	for _, g := range groups {
		if refused[g.provider] {
			continue
		}
		p := a.provider(g.provider)
		if p == nil {
			errs = append(errs, capacity.NewError(capacity.SpecMismatch, g.offerings[0], "", "no provider named %q on this worker", g.provider))
			continue
		}
		sub := req
		sub.Offerings = g.offerings
		began := time.Now()
		stop := heartbeatWhile(ctx)
		inst, err := p.Acquire(ctx, sub)
		stop()
		timeAcquisition(ctx, g, inst, err, time.Since(began))
		if err == nil {
			recordAcquisition(ctx, g.provider, string(inst.Offering.Market), "acquired")
			if a.logsStock(inst.Offering) {
				noteMemory(ctx, "stock log not saved", a.Memory.Tried(ctx, inst.Offering.Key(), true))
			}
			return inst, nil
		}
		errs = append(errs, err)
		refused[g.provider] = accountFailure(err)
	}
	err := errors.Join(errs...)
	details := make([]FailureDetail, 0, len(errs))
	for _, f := range capacity.Failures(err) {
		if f.Class == capacity.NoCapacity && a.Unavailable != nil {
			a.Unavailable.MarkUnavailable(f.Offering)
		}
		if f.Class == capacity.NoCapacity && a.logsStock(f.Offering) {
			noteMemory(ctx, "stock log not saved", a.Memory.Tried(ctx, f.Offering.Key(), false))
		}
		recordAcquisition(ctx, f.Offering.Provider, string(f.Offering.Market), string(f.Class))
		details = append(details, FailureDetail{Class: f.Class, Offering: f.Offering.Key(), Code: f.Code, Message: f.Message})
	}
	if len(details) == 0 {
		details = append(details, FailureDetail{Class: capacity.Unknown, Message: err.Error()})
	}
	class := capacity.ClassOf(err)
	opts := temporal.ApplicationErrorOptions{NonRetryable: !class.Remedy().Retry, Details: []any{details}}
	log := activity.GetLogger(ctx).Warn
	if stockOutsOnly(details) {
		// A stock-out is the market's ordinary answer, which the run
		// waits out: benign, so the SDK logs it at debug rather than as
		// an activity error, and it counts in no failure metric.
		opts.Category = temporal.ApplicationErrorCategoryBenign
		log = activity.GetLogger(ctx).Info
	}
	log("acquire failed", "run", req.RunID, "attempt", req.Attempt, "class", class, "failures", capacity.Summary(err))
	return capacity.Instance{}, temporal.NewApplicationErrorWithOptions(
		fmt.Sprintf("no offering could be acquired (%s): %s", class, capacity.Summary(err)), string(class), opts)
}

// Release terminates an instance; one that is already gone is fine.
func (a *Capacity) Release(ctx context.Context, in ReleaseInput) error {
	if err := a.release(ctx, in.Instance); err != nil {
		return err
	}
	a.learnRelease(ctx, in)
	activity.GetMetricsHandler(ctx).WithTags(map[string]string{
		telemetry.LabelReason: string(in.Reason), telemetry.LabelMarket: string(in.Instance.Offering.Market), telemetry.LabelProvider: in.Instance.Offering.Provider,
		telemetry.LabelCloud: telemetry.CloudOf(in.Instance.Offering.Key()),
	}).Counter(telemetry.ReleasesTotal).Inc(1)
	return nil
}

// release gives inst back to its provider, heartbeating while it waits;
// an instance already gone counts as released.
func (a *Capacity) release(ctx context.Context, inst capacity.Instance) error {
	p := a.provider(inst.Offering.Provider)
	if p == nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("no provider named %q on this worker", inst.Offering.Provider), "UnknownProvider", nil)
	}
	stop := heartbeatWhile(ctx)
	err := p.Release(ctx, inst.ID)
	stop()
	if err != nil && !capacity.IsNotFound(err) {
		return err
	}
	return nil
}

// Replace releases in.Release's instance and then acquires as Acquire
// does: a run's recovery in one round trip instead of two. The release
// comes first, so a quota the old instance held is free for the new one.
// A release that fails ends it before anything is launched, as an error
// of type ReleaseFailedType. A retry (Acquire's own, or on another worker
// after this one died) releases again, as a retried Release does: the
// instance is found gone, and the market memory counts each lesson once
// by the instance's ID.
func (a *Capacity) Replace(ctx context.Context, in ReplaceInput) (capacity.Instance, error) {
	if err := a.Release(ctx, in.Release); err != nil {
		return capacity.Instance{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("release of %s failed: %v", in.Release.Instance.ID, err), ReleaseFailedType, err)
	}
	return a.Acquire(ctx, in.Request)
}

// CapacityHeartbeatTimeout is how long an Acquire or Release may go
// without a heartbeat before Temporal counts its worker dead and retries
// it on another: within seconds, rather than after the attempt's whole
// timeout. The retry is safe: Acquire's idempotency token gets back the
// instance the dead worker's call launched, and Release takes an
// instance already gone as released.
const CapacityHeartbeatTimeout = 20 * time.Second

// heartbeatWhile records a heartbeat four times per the activity's
// heartbeat timeout until stop is called, so a provider call that takes
// minutes (a launch waiting for its instance to run, throttled retries)
// shows its worker alive. Without a heartbeat timeout it does nothing.
func heartbeatWhile(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) || activity.GetInfo(ctx).HeartbeatTimeout <= 0 {
		return func() {}
	}
	every := activity.GetInfo(ctx).HeartbeatTimeout / 4
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() {
		close(done)
		<-ended
	}
}

// Interrupt asks the provider holding an instance to reclaim it.
func (a *Capacity) Interrupt(ctx context.Context, in InterruptInput) (InterruptResult, error) {
	if in.InstanceID == "" {
		for _, ip := range a.Interrupters {
			if h, ok := ip.(ClockHolder); ok {
				h.HoldClock(in.Still)
			}
		}
		return InterruptResult{}, nil
	}
	for _, ip := range a.Interrupters {
		if in.Hold > 0 {
			h, ok := ip.(StockHolder)
			if !ok {
				continue
			}
			if err := h.HoldStock(in.InstanceID, in.Hold); capacity.IsNotFound(err) {
				continue
			} else if err != nil {
				return InterruptResult{}, err
			}
		}
		at, err := ip.Interrupt(in.InstanceID, in.Grace)
		if capacity.IsNotFound(err) {
			continue
		}
		if err != nil {
			return InterruptResult{}, err
		}
		if h, ok := ip.(ClockHolder); ok && in.Still > 0 {
			h.HoldClock(in.Still)
		}
		return InterruptResult{NoticeAt: at}, nil
	}
	return InterruptResult{}, temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("instance %s is not running on any cloud that can interrupt it%s", in.InstanceID, holding(in.Hold)), "NotFound", nil)
}

// holding says what else an interruption that holds stock needs.
func holding(hold time.Duration) string {
	if hold <= 0 {
		return ""
	}
	return " and hold its stock (the local and in-process simulated clouds can)"
}

// preferAvailable moves offerings that recently had no capacity to the
// back, keeping the order otherwise.
func (a *Capacity) preferAvailable(offerings []capacity.Offering) []capacity.Offering {
	if a.Unavailable == nil {
		return offerings
	}
	out := make([]capacity.Offering, 0, len(offerings))
	var later []capacity.Offering
	for _, o := range offerings {
		if a.Unavailable.IsUnavailable(o) {
			later = append(later, o)
			continue
		}
		out = append(out, o)
	}
	return append(out, later...)
}

type providerGroup struct {
	provider  string
	offerings []capacity.Offering
}

// groupByProvider splits the ordered offerings into consecutive runs of
// one provider: each run is one request, and the runs keep the order.
// accountFailure reports whether err holds a failure of the provider's
// account rather than of an offering.
func accountFailure(err error) bool {
	for _, f := range capacity.Failures(err) {
		if f.Class.Remedy().Account {
			return true
		}
	}
	return false
}

func groupByProvider(offerings []capacity.Offering) []providerGroup {
	var groups []providerGroup
	for _, o := range offerings {
		if n := len(groups); n > 0 && groups[n-1].provider == o.Provider {
			groups[n-1].offerings = append(groups[n-1].offerings, o)
			continue
		}
		groups = append(groups, providerGroup{provider: o.Provider, offerings: []capacity.Offering{o}})
	}
	return groups
}

func (a *Capacity) provider(name string) capacity.Provider {
	for _, p := range a.Providers {
		if p.Name() == name {
			return p
		}
	}
	return nil
}

func (a *Capacity) allowed(names []string) []capacity.Provider {
	if len(names) == 0 {
		return a.Providers
	}
	var out []capacity.Provider
	for _, p := range a.Providers {
		for _, n := range names {
			if p.Name() == n {
				out = append(out, p)
			}
		}
	}
	return out
}

func (a *Capacity) names() []string {
	var out []string
	for _, p := range a.Providers {
		out = append(out, p.Name())
	}
	sort.Strings(out)
	return out
}

// recordAcquisition counts one acquisition attempt. A provider names its
// offerings (their key's first segment), so it is also their cloud.
func recordAcquisition(ctx context.Context, provider, market, outcome string) {
	activity.GetMetricsHandler(ctx).WithTags(map[string]string{telemetry.LabelProvider: provider, telemetry.LabelCloud: provider, telemetry.LabelMarket: market, telemetry.LabelOutcome: outcome}).
		Counter(telemetry.AcquisitionsTotal).Inc(1)
}

// timeAcquisition records how long one provider took to answer a request:
// labelled with the market acquired on, or, when none was, with the market
// of the first offering tried and the failure's class.
func timeAcquisition(ctx context.Context, g providerGroup, inst capacity.Instance, err error, took time.Duration) {
	market, outcome := string(inst.Offering.Market), "acquired"
	if err != nil {
		market, outcome = string(g.offerings[0].Market), string(capacity.ClassOf(err))
	}
	activity.GetMetricsHandler(ctx).WithTags(map[string]string{telemetry.LabelProvider: g.provider, telemetry.LabelCloud: g.provider, telemetry.LabelMarket: market, telemetry.LabelOutcome: outcome}).
		Timer(telemetry.AcquisitionSeconds).Record(took)
}

// stockOutsOnly reports whether every offering tried was out of stock.
func stockOutsOnly(details []FailureDetail) bool {
	for _, d := range details {
		if d.Class != capacity.NoCapacity {
			return false
		}
	}
	return len(details) > 0
}
