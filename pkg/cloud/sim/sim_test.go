package sim

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/metadata"
	"refuel/pkg/spec"
	"refuel/pkg/trace"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeClock) Add(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(d)
}

var (
	zoneA = "zone-a"
	zoneB = "zone-b"
	v100A = Pool{Zone: zoneA, InstanceType: "p3.2xlarge"}
	v100B = Pool{Zone: zoneB, InstanceType: "p3.2xlarge"}
	big8A = Pool{Zone: zoneA, InstanceType: "p3.16xlarge"}
)

func points(p ...int) *trace.Trace { return &trace.Trace{Gap: 10 * time.Minute, Points: p} }

// newMarket returns a sim without agents on a manual clock whose pools
// are v100A (trace a), v100B (trace b) and big8A (on-demand only).
func newMarket(t *testing.T, a, b *trace.Trace, edit func(*Config)) (*Cloud, *fakeClock) {
	t.Helper()
	clock := &fakeClock{t: time.Date(2022, 10, 26, 0, 0, 0, 0, time.UTC)}
	cfg := Config{
		Pools: []PoolConfig{{Pool: v100A, Spot: a}, {Pool: v100B, Spot: b}, {Pool: big8A}},
		Now:   clock.Now,
	}
	if edit != nil {
		edit(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, clock
}

func offer(p Pool, m capacity.Market) Offer { return Offer{Pool: p, Market: m} }

func launch(t *testing.T, c *Cloud, token string, offers ...Offer) (Status, error) {
	t.Helper()
	return c.Launch(context.Background(), LaunchRequest{Token: token, Offers: offers, Wait: true})
}

func mustLaunch(t *testing.T, c *Cloud, offers ...Offer) Status {
	t.Helper()
	st, err := launch(t, c, "", offers...)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func state(t *testing.T, c *Cloud, id string) capacity.State {
	t.Helper()
	st, err := c.Status(id)
	if err != nil {
		t.Fatal(err)
	}
	return st.State
}

func TestSpotStockFollowsTheTrace(t *testing.T) {
	c, _ := newMarket(t, points(1, 0, 2, 1), points(0), nil)
	type step struct {
		stock     int
		launchErr capacity.Class // of one more spot launch; "" for success
	}
	steps := []step{
		{1, ""},                  // tick 0: one in stock, one launched
		{0, capacity.NoCapacity}, // tick 1: the first is under notice, none to be had
		{2, ""},                  // tick 2: two in stock, one launched
		{1, capacity.NoCapacity}, // tick 3: one in stock, one running
		{1, capacity.NoCapacity}, // tick 4: the trace replays from its start
	}
	for tick, s := range steps {
		if tick > 0 {
			c.Advance(1)
		}
		m := c.Market()
		if m.Tick != tick || m.TraceTime != time.Duration(tick)*10*time.Minute {
			t.Fatalf("market at tick %d (%s); want %d", m.Tick, m.TraceTime, tick)
		}
		if got := poolState(t, m, v100A).SpotStock; got != s.stock {
			t.Errorf("tick %d: stock %d; want %d", tick, got, s.stock)
		}
		_, err := launch(t, c, "", offer(v100A, capacity.Spot))
		if got := classOf(err); got != s.launchErr {
			t.Errorf("tick %d: spot launch %v; want %q", tick, err, s.launchErr)
		}
	}
}

// A trace of one node (every point 0 or 1) is read as starter sim reads
// it: a 1 is stock for every node alike, so a gang finds spot at once,
// and a 0 takes every spot instance of the pool.
func TestOneNodeTraceStocksEveryNode(t *testing.T) {
	c, _ := newMarket(t, points(1, 0), points(0), nil)
	var ids []string
	for range 4 {
		ids = append(ids, mustLaunch(t, c, offer(v100A, capacity.Spot)).ID)
	}
	ps := poolState(t, c.Market(), v100A)
	if !ps.EveryNode || ps.SpotStock != 1 || ps.SpotRunning != 4 || ps.SpotSpare() == 0 {
		t.Fatalf("pool %+v; want a one-node trace at 1 with 4 running and spare", ps)
	}
	c.Advance(1)
	for _, id := range ids {
		if got := state(t, c, id); got != capacity.StateInterrupted {
			t.Errorf("%s is %s at the trace's 0; want interrupted", id, got)
		}
	}
	if _, err := launch(t, c, "", offer(v100A, capacity.Spot)); classOf(err) != capacity.NoCapacity {
		t.Errorf("spot launch at the trace's 0: %v; want no capacity", err)
	}
}

func poolState(t *testing.T, m Market, key Pool) PoolState {
	t.Helper()
	for _, ps := range m.Pools {
		if ps.Pool == key {
			return ps
		}
	}
	t.Fatalf("no pool %s in the market", key)
	return PoolState{}
}

func classOf(err error) capacity.Class {
	if err == nil {
		return ""
	}
	return capacity.ClassOf(err)
}

func TestPreemptionServesNoticeToTheNewestThenTakesIt(t *testing.T) {
	c, clock := newMarket(t, points(2, 1, 0), points(0), func(cfg *Config) { cfg.NoticeWindow = 20 * time.Second })
	older := mustLaunch(t, c, offer(v100A, capacity.Spot))
	clock.Add(time.Second)
	newer := mustLaunch(t, c, offer(v100A, capacity.Spot))

	c.Advance(1) // stock 2 → 1: the newer one goes
	st, _ := c.Status(newer.ID)
	if st.State != capacity.StateInterrupted || !st.InterruptAt.Equal(clock.Now().Add(20*time.Second)) || st.Reason != ReasonSpotTermination {
		t.Fatalf("newer instance after the drop: %s, interrupt at %s, %v; want interrupted in 20s", st.State, st.InterruptAt, st.Reason)
	}
	if got := state(t, c, older.ID); got != capacity.StateRunning {
		t.Errorf("older instance %s; want it kept running", got)
	}
	if ps := poolState(t, c.Market(), v100A); ps.SpotRunning != 1 || ps.Notices != 1 {
		t.Errorf("pool %+v; want 1 running and 1 under notice", ps)
	}

	clock.Add(19 * time.Second)
	if got := state(t, c, newer.ID); got != capacity.StateInterrupted {
		t.Fatalf("within the notice: %s; want still interrupted", got)
	}
	clock.Add(time.Second)
	if st, _ := c.Status(newer.ID); st.State != capacity.StateTerminated || st.Reason != ReasonSpotTermination {
		t.Fatalf("after the notice: %s (%v); want terminated by spot termination", st.State, st.Reason)
	}
	c.Advance(1) // stock 1 → 0: the older one goes too
	if got := state(t, c, older.ID); got != capacity.StateInterrupted {
		t.Errorf("older instance at stock 0: %s; want interrupted", got)
	}
}

func TestLaunchFailuresAreClassified(t *testing.T) {
	cases := map[string]struct {
		edit  func(*Config)
		setup func(*testing.T, *Cloud)
		offer Offer
		class capacity.Class
		code  string
	}{
		"spot out of stock": {
			offer: offer(v100B, capacity.Spot), class: capacity.NoCapacity, code: CodeInsufficientCapacity,
		},
		"type not sold in the zone": {
			offer: offer(Pool{Zone: zoneB, InstanceType: "p3.16xlarge"}, capacity.OnDemand), class: capacity.SpecMismatch, code: CodeUnsupported,
		},
		"a type the sim has nowhere": {
			offer: offer(Pool{Zone: zoneA, InstanceType: "p9.mega"}, capacity.OnDemand), class: capacity.Config, code: CodeInvalidParameterValue,
		},
		"a catalogue type no pool sells": {
			offer: offer(Pool{Zone: zoneA, InstanceType: "g5.xlarge"}, capacity.Spot), class: capacity.Config, code: CodeInvalidParameterValue,
		},
		"no spot in an on-demand-only pool": {
			offer: offer(big8A, capacity.Spot), class: capacity.SpecMismatch, code: CodeUnsupported,
		},
		"a market the sim does not sell": {
			offer: offer(v100A, capacity.Base), class: capacity.SpecMismatch, code: CodeUnsupported,
		},
		"spot instance count quota": {
			edit:  func(cfg *Config) { cfg.Quotas.SpotInstances = 1 },
			setup: func(t *testing.T, c *Cloud) { mustLaunch(t, c, offer(v100A, capacity.Spot)) },
			offer: offer(v100A, capacity.Spot), class: capacity.Quota, code: CodeMaxSpotInstances,
		},
		"on-demand vCPU quota": {
			edit:  func(cfg *Config) { cfg.Quotas.OnDemandVCPUs = 64 },
			setup: func(t *testing.T, c *Cloud) { mustLaunch(t, c, offer(v100A, capacity.OnDemand)) },
			offer: offer(big8A, capacity.OnDemand), class: capacity.Quota, code: CodeVcpuLimitExceeded,
		},
		"on-demand GPU quota": {
			edit:  func(cfg *Config) { cfg.Quotas.OnDemandGPUs = 4 },
			offer: offer(big8A, capacity.OnDemand), class: capacity.Quota, code: CodeVcpuLimitExceeded,
		},
		"max price below the spot price": {
			offer: Offer{Pool: v100A, Market: capacity.Spot, MaxPrice: 0.5}, class: capacity.Price, code: CodeSpotMaxPriceTooLow,
		},
		"spot price above on-demand, no max price": {
			setup: func(t *testing.T, c *Cloud) {
				if err := c.SetSpotPrice(v100A, 3.5); err != nil {
					t.Fatal(err)
				}
			},
			offer: offer(v100A, capacity.Spot), class: capacity.Price, code: CodeSpotMaxPriceTooLow,
		},
		"on-demand stock": {
			edit: func(cfg *Config) { cfg.Pools[2].OnDemandStock = 1 },
			setup: func(t *testing.T, c *Cloud) {
				mustLaunch(t, c, offer(big8A, capacity.OnDemand))
			},
			offer: offer(big8A, capacity.OnDemand), class: capacity.NoCapacity, code: CodeInsufficientCapacity,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, _ := newMarket(t, points(1), points(0), tc.edit)
			if tc.setup != nil {
				tc.setup(t, c)
			}
			_, err := launch(t, c, "", tc.offer)
			fs := capacity.Failures(err)
			if len(fs) != 1 || fs[0].Class != tc.class || fs[0].Code != tc.code {
				t.Fatalf("launch: %v; want one %s failure with code %s", err, tc.class, tc.code)
			}
			if fs[0].Offering.Provider != ProviderName || fs[0].Offering.Zone != tc.offer.Zone || fs[0].Offering.Market != tc.offer.Market {
				t.Errorf("failure names offering %s", fs[0].Offering.Key())
			}
		})
	}
}

func TestAcquireFailsOverAndJoinsEveryFailure(t *testing.T) {
	c, _ := newMarket(t, points(0), points(1, 2), nil) // zone-b: a trace of counts, one in stock now
	offs, _ := c.Offerings(context.Background(), spec.Resources{GPUs: 1, InstanceTypes: []string{"p3.2xlarge"}})
	spotA, spotB := offs[0], offs[2] // zone-a: spot, on-demand; zone-b: spot, on-demand
	if spotA.Market != capacity.Spot || spotA.Zone != zoneA || spotB.Zone != zoneB || spotB.PricePerHour != 0.9701 {
		t.Fatalf("offerings %v", offs)
	}
	inst, err := c.Acquire(context.Background(), capacity.Request{RunID: "run", Attempt: 1, Offerings: []capacity.Offering{spotA, spotB}})
	if err != nil || inst.Offering.Key() != spotB.Key() {
		t.Fatalf("acquire: %v on %s; want failover to %s", err, inst.Offering.Key(), spotB.Key())
	}
	if inst.Tags[capacity.TagRun] != "run" || inst.Tags[capacity.TagManagedBy] != capacity.ManagedBy || inst.TaskQueue == "" {
		t.Errorf("instance %+v lacks refuel's tags or its task queue", inst)
	}

	other := capacity.Offering{Provider: "aws", InstanceType: "p3.2xlarge", Zone: zoneA, Market: capacity.Spot}
	_, err = c.Acquire(context.Background(), capacity.Request{RunID: "run", Attempt: 2, Offerings: []capacity.Offering{other, spotA, spotB}})
	var got []capacity.Class
	for _, f := range capacity.Failures(err) {
		got = append(got, f.Class)
	}
	if diff := cmp.Diff(got, []capacity.Class{capacity.SpecMismatch, capacity.NoCapacity, capacity.NoCapacity}); diff != "" {
		t.Errorf("failures got(-), want(+):\n%s", diff)
	}
}

func TestAcquireHonoursTheMaxPrice(t *testing.T) {
	c, _ := newMarket(t, points(3), points(0), nil)
	spotA := capacity.Offering{Provider: ProviderName, InstanceType: "p3.2xlarge", Zone: zoneA, Market: capacity.Spot}
	cases := map[string]struct {
		max  float64
		want capacity.Class
	}{
		"below the spot price":            {0.5, capacity.Price},
		"above it":                        {1, ""},
		"none: up to the on-demand price": {0, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := c.Acquire(context.Background(), capacity.Request{RunID: name, Offerings: []capacity.Offering{spotA}, MaxPricePerHour: tc.max})
			if got := classOf(err); got != tc.want {
				t.Errorf("acquire: %v; want %q", err, tc.want)
			}
		})
	}
}

func TestInjectedInitFailures(t *testing.T) {
	c, _ := newMarket(t, points(5), points(0), nil)
	req := capacity.Request{RunID: "run", Attempt: 1, Offerings: []capacity.Offering{{Provider: ProviderName, InstanceType: "p3.2xlarge", Zone: zoneA, Market: capacity.Spot, PricePerHour: 0.9701}}}
	c.FailNextInits(1)
	_, err := c.Acquire(context.Background(), req)
	fs := capacity.Failures(err)
	if len(fs) != 1 || fs[0].Class != capacity.InitFailure || fs[0].Code != CodeLaunchFailure {
		t.Fatalf("acquire with a failing init: %v; want init-failure", err)
	}
	all := c.Instances()
	if len(all) != 1 || all[0].State != capacity.StateTerminated || all[0].Reason != ReasonLaunchFailure {
		t.Fatalf("instances %+v; want the failed one terminated by a launch failure", all)
	}
	if list, _ := c.List(context.Background(), nil); len(list) != 0 {
		t.Errorf("List shows the failed instance: %v", list)
	}
	if _, err := c.Acquire(context.Background(), req); err != nil {
		t.Errorf("the retry with the same token failed: %v; a failed launch leaves the token free", err)
	}

	// Without waiting (EC2's way), the launch succeeds and the instance
	// then terminates.
	c.FailNextInits(1)
	st, err := c.Launch(context.Background(), LaunchRequest{Offers: []Offer{offer(v100A, capacity.Spot)}})
	if err != nil || st.State != capacity.StatePending {
		t.Fatalf("launch without waiting: %v, %s; want pending", err, st.State)
	}
	if got := waitSettled(t, c, st.ID); got.State != capacity.StateTerminated || got.Reason != ReasonLaunchFailure {
		t.Errorf("after boot: %s (%v); want terminated by a launch failure", got.State, got.Reason)
	}
}

// waitSettled waits until an instance launched without waiting has left
// pending; the wait is a hang guard only.
func waitSettled(t *testing.T, c *Cloud, id string) Status {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := c.Status(id)
		if err != nil {
			t.Fatal(err)
		}
		if st.State != capacity.StatePending {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %s still pending", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestThrottling(t *testing.T) {
	t.Run("next calls", func(t *testing.T) {
		c, _ := newMarket(t, points(5), points(0), nil)
		c.ThrottleNext(2)
		req := capacity.Request{RunID: "run", Offerings: []capacity.Offering{{Provider: ProviderName, InstanceType: "p3.2xlarge", Zone: zoneA, Market: capacity.OnDemand}}}
		for i, want := range []capacity.Class{capacity.Throttled, capacity.Throttled, ""} {
			_, err := c.Acquire(context.Background(), req)
			if got := classOf(err); got != want {
				t.Errorf("call %d: %v; want %q", i+1, err, want)
			}
			if fs := capacity.Failures(err); want != "" && (len(fs) != 1 || fs[0].Code != CodeRequestLimitExceeded) {
				t.Errorf("call %d: %v; want code %s", i+1, err, CodeRequestLimitExceeded)
			}
		}
	})
	t.Run("rate limit", func(t *testing.T) {
		c, clock := newMarket(t, points(5), points(0), func(cfg *Config) { cfg.APIRateLimit = 2 })
		var got []bool
		for range 3 {
			got = append(got, c.APICall() == nil)
		}
		clock.Add(500 * time.Millisecond)
		got = append(got, c.APICall() == nil, c.APICall() == nil)
		if diff := cmp.Diff(got, []bool{true, true, false, true, false}); diff != "" {
			t.Errorf("calls admitted got(-), want(+):\n%s", diff)
		}
	})
}

func TestIdempotentAcquireUnderConcurrency(t *testing.T) {
	c, _ := newMarket(t, points(0, 5), points(0), nil)
	req := capacity.Request{RunID: "run", Attempt: 1, Offerings: []capacity.Offering{{Provider: ProviderName, InstanceType: "p3.2xlarge", Zone: zoneA, Market: capacity.Spot, PricePerHour: 1}}}
	if _, err := c.Acquire(context.Background(), req); capacity.ClassOf(err) != capacity.NoCapacity {
		t.Fatalf("acquire at stock 0: %v", err)
	}
	c.Advance(1)

	const callers = 8
	ids := make([]string, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			inst, err := c.Acquire(context.Background(), req)
			ids[i], errs[i] = inst.ID, err
		})
	}
	wg.Wait()
	for i := range callers {
		if errs[i] != nil || ids[i] != ids[0] {
			t.Fatalf("caller %d: %s, %v; want %s like caller 0", i, ids[i], errs[i], ids[0])
		}
	}
	if n := len(c.Instances()); n != 1 {
		t.Fatalf("%d instances launched; want exactly 1", n)
	}
	req.Attempt = 2
	if inst, err := c.Acquire(context.Background(), req); err != nil || inst.ID == ids[0] {
		t.Errorf("a new attempt got %s, %v; want a second instance", inst.ID, err)
	}
}

func TestProviderContract(t *testing.T) {
	ctx := context.Background()
	c, _ := newMarket(t, points(3), points(3), nil)
	offs, err := c.Offerings(ctx, spec.Resources{GPUs: 8})
	if err != nil || len(offs) != 1 || offs[0].InstanceType != "p3.16xlarge" || offs[0].Market != capacity.OnDemand || offs[0].PricePerHour != 24.48 {
		t.Fatalf("offerings for 8 GPUs: %v, %v; want p3.16xlarge on-demand only", offs, err)
	}
	mine, err := c.Acquire(ctx, capacity.Request{RunID: "mine", Offerings: offs})
	if err != nil {
		t.Fatal(err)
	}
	if mine.Address != metadata.Loopback {
		t.Errorf("instance address %q; want %s: its peers reach it on this machine", mine.Address, metadata.Loopback)
	}
	stranger := mustLaunch(t, c, offer(v100A, capacity.Spot)) // not tagged by refuel

	if list, _ := c.List(ctx, nil); len(list) != 1 || list[0].ID != mine.ID {
		t.Errorf("List(nil) = %v; want only the instance refuel manages", list)
	}
	if list, _ := c.List(ctx, map[string]string{capacity.TagRun: "other"}); len(list) != 0 {
		t.Errorf("List by another run's tag = %v", list)
	}
	if err := c.Tag(stranger.ID, map[string]string{capacity.TagManagedBy: capacity.ManagedBy}); err != nil {
		t.Fatal(err)
	}
	if list, _ := c.List(ctx, nil); len(list) != 2 {
		t.Errorf("List(nil) after tagging = %d instances; want 2", len(list))
	}
	if err := c.Release(ctx, mine.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, mine.ID); !capacity.IsNotFound(err) {
		t.Errorf("second release: %v; want NotFound", err)
	}
	if _, st, err := c.Describe(ctx, mine.ID); err != nil || st != capacity.StateTerminated {
		t.Errorf("describe after release: %s, %v; want terminated", st, err)
	}
	if _, _, err := c.Describe(ctx, "i-nope"); !capacity.IsNotFound(err) {
		t.Errorf("describe unknown: %v; want NotFound", err)
	}
	var nf *capacity.NotFoundError
	if _, err := c.Interrupt("i-nope", time.Second); !errors.As(err, &nf) {
		t.Errorf("interrupt unknown: %v; want NotFound", err)
	}
}

func TestManualInterrupt(t *testing.T) {
	c, clock := newMarket(t, points(3), points(0), nil)
	inst := mustLaunch(t, c, offer(v100A, capacity.OnDemand))
	at, err := c.Interrupt(inst.ID, 5*time.Second)
	if err != nil || !at.Equal(clock.Now()) {
		t.Fatalf("interrupt: %s, %v", at, err)
	}
	clock.Add(5 * time.Second)
	if got := state(t, c, inst.ID); got != capacity.StateTerminated {
		t.Errorf("after the grace: %s; want terminated", got)
	}
}

func TestSpotPriceHistory(t *testing.T) {
	c, clock := newMarket(t, points(3), points(0), nil)
	opened := clock.Now()
	clock.Add(time.Hour)
	if err := c.SetSpotPrice(v100A, 1.2); err != nil {
		t.Fatal(err)
	}
	want := []PricePoint{{opened, 0.9701}, {clock.Now(), 1.2}}
	if diff := cmp.Diff(c.SpotPriceHistory(v100A), want); diff != "" {
		t.Errorf("history got(-), want(+):\n%s", diff)
	}
	if err := c.SetSpotPrice(big8A, 1); err == nil {
		t.Error("set a spot price on a pool that sells no spot")
	}
}

func TestNewRejectsBadConfigs(t *testing.T) {
	cases := map[string]Config{
		"no pools":        {},
		"unknown type":    {Pools: []PoolConfig{{Pool: Pool{Zone: "z", InstanceType: "x9.huge"}}}},
		"duplicate pool":  {Pools: []PoolConfig{{Pool: v100A}, {Pool: v100A}}},
		"negative speed":  {Pools: []PoolConfig{{Pool: v100A}}, Speed: -1},
		"empty trace":     {Pools: []PoolConfig{{Pool: v100A, Spot: points()}}},
		"negative notice": {Pools: []PoolConfig{{Pool: v100A}}, NoticeWindow: -time.Second},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			if c, err := New(cfg); err == nil {
				_ = c.Close()
				t.Error("New accepted it")
			}
		})
	}
}

// HoldStock takes an instance's market in its zone out of stock for a
// while, the trace notwithstanding: a drill's lost node finds no
// replacement there.
func TestHoldStock(t *testing.T) {
	c, clock := newMarket(t, points(1), points(0), nil)
	inst := mustLaunch(t, c, offer(v100A, capacity.Spot))
	if err := c.HoldStock(inst.ID, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := launch(t, c, "", offer(v100A, capacity.Spot)); classOf(err) != capacity.NoCapacity {
		t.Errorf("spot launch while held: %v; want no capacity", err)
	}
	mustLaunch(t, c, offer(v100A, capacity.OnDemand)) // the other market is not held
	clock.Add(time.Minute)
	mustLaunch(t, c, offer(v100A, capacity.Spot))
	if err := c.HoldStock("i-nope", time.Minute); !capacity.IsNotFound(err) {
		t.Errorf("HoldStock of an unknown instance: %v; want not found", err)
	}
}

// A clock held still lets its ticks pass without moving the market, and
// moves again once the hold is over.
func TestHoldClock(t *testing.T) {
	c, clock := newMarket(t, points(1, 0, 1), points(1), func(cfg *Config) { cfg.Speed = 500 })
	moved := func(from int) bool {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if c.Tick() > from {
				return true
			}
			time.Sleep(time.Millisecond)
		}
		return false
	}
	if !moved(0) {
		t.Fatal("the market's clock never ticked")
	}
	c.HoldClock(time.Minute)
	time.Sleep(10 * time.Millisecond) // a tick begun before the hold ends
	held := c.Tick()
	time.Sleep(50 * time.Millisecond) // some 25 ticks of the clock
	if got := c.Tick(); got != held {
		t.Errorf("held still, the market moved from tick %d to %d", held, got)
	}
	clock.Add(time.Minute)
	if !moved(held) {
		t.Errorf("the hold is over, and the market stays at tick %d", held)
	}
}
