package aws

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"refuel/pkg/capacity"
)

func offer(typ, zone string, m capacity.Market, price float64) capacity.Offering {
	gpus := map[string]int{"p3.2xlarge": 1, "g5.xlarge": 1, "p3.16xlarge": 8}[typ]
	return capacity.Offering{Provider: ProviderName, InstanceType: typ, Zone: zone, Market: m, GPUs: gpus, PricePerHour: price}
}

var (
	spotP3a = offer("p3.2xlarge", "us-east-1a", capacity.Spot, 0.97)
	spotP3b = offer("p3.2xlarge", "us-east-1b", capacity.Spot, 0.99)
	spotG5a = offer("g5.xlarge", "us-east-1a", capacity.Spot, 0.40)
	spotG5b = offer("g5.xlarge", "us-east-1b", capacity.Spot, 0.41)
	odG5b   = offer("g5.xlarge", "us-east-1b", capacity.OnDemand, 1.006)
	odP3a   = offer("p3.2xlarge", "us-east-1a", capacity.OnDemand, 3.06)
)

func launchKey(o capacity.Offering) string {
	return o.InstanceType + "/" + o.Zone + "/" + string(o.Market)
}

// fleetCall is the part of a CreateFleet request the tests check.
type fleetCall struct {
	Token, Type, Template, Capacity, Strategy string
	Overrides                                 []string // "type zone priority [subnet]"
	Tags                                      map[string]string
}

func fleetCallOf(v url.Values) fleetCall {
	fc := fleetCall{
		Token: v.Get("ClientToken"), Type: v.Get("Type"),
		Template: v.Get("LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName") + "@" +
			v.Get("LaunchTemplateConfigs.1.LaunchTemplateSpecification.Version"),
		Capacity: v.Get("TargetCapacitySpecification.TotalTargetCapacity") + " " + v.Get("TargetCapacitySpecification.DefaultTargetCapacityType"),
		Strategy: strings.TrimSpace(v.Get("SpotOptions.AllocationStrategy") + " " + v.Get("OnDemandOptions.AllocationStrategy")),
		Tags:     tagsOf(v),
	}
	for _, ov := range indexed(v, "LaunchTemplateConfigs.1.Overrides") {
		fc.Overrides = append(fc.Overrides, strings.TrimSpace(ov["InstanceType"]+" "+ov["AvailabilityZone"]+" "+ov["Priority"]+" "+ov["SubnetId"]+" "+ov["MaxPrice"]))
	}
	return fc
}

func TestAcquireRequestShape(t *testing.T) {
	f := &fakeEC2{LaunchErrors: map[string]string{}}
	for _, o := range []capacity.Offering{spotP3a, spotP3b, spotG5a, spotG5b} {
		f.LaunchErrors[launchKey(o)] = "InsufficientInstanceCapacity"
	}
	c := newTestCloud(t, f, func(cfg *Config) { cfg.Subnets = map[string]string{"us-east-1a": "subnet-0a"} })
	req := capacity.Request{
		RunID: "run-7", Attempt: 2,
		Offerings: []capacity.Offering{spotP3a, spotP3b, spotG5a, spotG5b, odG5b, odP3a},
		Tags:      map[string]string{capacity.TagPool: "burst", capacity.TagTeam: "vision"},
		// A price cap goes on the spot overrides only.
		MaxPricePerHour: 4.5,
	}
	inst, err := c.Acquire(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}

	tags := map[string]string{
		capacity.TagManagedBy: capacity.ManagedBy, capacity.TagRun: "run-7", capacity.TagAttempt: "2",
		capacity.TagPool: "burst", capacity.TagTeam: "vision",
	}
	want := []fleetCall{{
		Token: "run-7-2-spot", Type: "instant", Template: "refuel-node@3", Capacity: "1 spot", Strategy: "price-capacity-optimized",
		Overrides: []string{"p3.2xlarge us-east-1a 0 subnet-0a 4.5", "p3.2xlarge us-east-1b 1  4.5", "g5.xlarge us-east-1a 2 subnet-0a 4.5", "g5.xlarge us-east-1b 3  4.5"},
		Tags:      tags,
	}, {
		Token: "run-7-2-on-demand", Type: "instant", Template: "refuel-node@3", Capacity: "1 on-demand", Strategy: "prioritized",
		Overrides: []string{"g5.xlarge us-east-1b 0", "p3.2xlarge us-east-1a 1 subnet-0a"},
		Tags:      tags,
	}}
	var got []fleetCall
	for _, v := range f.callsOf("CreateFleet") {
		got = append(got, fleetCallOf(v))
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("CreateFleet calls: got(-), want(+):\n%s", diff)
	}

	id := "i-00000000000000001"
	wantInst := capacity.Instance{ID: id, Offering: odG5b, TaskQueue: "refuel-node-" + id, Address: "10.0.0.1", LaunchedAt: fakeLaunchTime, Tags: tags}
	if diff := cmp.Diff(inst, wantInst); diff != "" {
		t.Errorf("instance: got(-), want(+):\n%s", diff)
	}
}

func TestAcquireFailsEveryOffering(t *testing.T) {
	f := &fakeEC2{LaunchErrors: map[string]string{
		launchKey(spotP3a): "InsufficientInstanceCapacity",
		launchKey(spotG5a): "Unsupported",
		launchKey(odP3a):   "VcpuLimitExceeded",
	}}
	c := newTestCloud(t, f, nil)
	other := capacity.Offering{Provider: "gcp", InstanceType: "a2-highgpu-1g", Zone: "us-central1-a", Market: capacity.Spot}
	req := capacity.Request{RunID: "run-1", Attempt: 1, Offerings: []capacity.Offering{spotP3a, spotG5a, other, odP3a}}
	_, err := c.Acquire(context.Background(), req)

	var got []string
	for _, e := range capacity.Failures(err) {
		got = append(got, fmt.Sprintf("%s %s %s", e.Offering.Key(), e.Class, e.Code))
	}
	want := []string{
		"aws/p3.2xlarge/us-east-1a/spot no-capacity InsufficientInstanceCapacity",
		"aws/g5.xlarge/us-east-1a/spot spec-mismatch Unsupported",
		"aws/p3.2xlarge/us-east-1a/on-demand quota VcpuLimitExceeded",
		"gcp/a2-highgpu-1g/us-central1-a/spot spec-mismatch ",
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("failures: got(-), want(+):\n%s", diff)
	}
	if class := capacity.ClassOf(err); class != capacity.NoCapacity {
		t.Errorf("ClassOf = %s; want %s: some offering may come back", class, capacity.NoCapacity)
	}
}

func TestClientToken(t *testing.T) {
	long := strings.Repeat("nightly-finetune-", 5)
	req := func(run string, attempt int) capacity.Request { return capacity.Request{RunID: run, Attempt: attempt} }
	cases := map[string]struct {
		a, b capacity.Request
		am   capacity.Market
		bm   capacity.Market
		an   int
		bn   int
		same bool
	}{
		"same run and attempt":           {req("run-1", 3), req("run-1", 3), capacity.Spot, capacity.Spot, 1, 1, true},
		"next attempt":                   {req("run-1", 3), req("run-1", 4), capacity.Spot, capacity.Spot, 1, 1, false},
		"other market":                   {req("run-1", 3), req("run-1", 3), capacity.Spot, capacity.OnDemand, 1, 1, false},
		"second run of a market":         {req("run-1", 3), req("run-1", 3), capacity.Spot, capacity.Spot, 1, 2, false},
		"long run ID, same attempt":      {req(long, 1), req(long, 1), capacity.Spot, capacity.Spot, 1, 1, true},
		"long run ID, next attempt":      {req(long, 1), req(long, 2), capacity.Spot, capacity.Spot, 1, 1, false},
		"non-ASCII run ID, next attempt": {req("训练-1", 1), req("训练-1", 2), capacity.Spot, capacity.Spot, 1, 1, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a, b := ClientToken(tc.a, tc.am, tc.an), ClientToken(tc.b, tc.bm, tc.bn)
			if (a == b) != tc.same {
				t.Errorf("tokens %q and %q: same = %v, want %v", a, b, a == b, tc.same)
			}
			for _, tok := range []string{a, b} {
				if len(tok) > 64 || !printableASCII(tok) {
					t.Errorf("token %q is not up to 64 printable ASCII characters", tok)
				}
			}
		})
	}
}

func TestAcquireIsIdempotent(t *testing.T) {
	first := capacity.Request{RunID: "run-1", Attempt: 1, Offerings: []capacity.Offering{spotP3a, spotP3b, odP3a}}
	reordered := first
	reordered.Offerings = []capacity.Offering{spotP3b, spotP3a, odP3a}
	next := first
	next.Attempt = 2
	cases := map[string]struct {
		retry         capacity.Request
		sameInstance  bool
		wantInstances int
	}{
		"retried activity":                         {first, true, 1},
		"retry with offerings reordered meanwhile": {reordered, true, 1},
		"next attempt":                             {next, false, 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := &fakeEC2{}
			c := newTestCloud(t, f, nil)
			a, err := c.Acquire(context.Background(), first)
			if err != nil {
				t.Fatal(err)
			}
			b, err := c.Acquire(context.Background(), tc.retry)
			if err != nil {
				t.Fatal(err)
			}
			if (a.ID == b.ID) != tc.sameInstance {
				t.Errorf("instances %s and %s; same = %v, want %v", a.ID, b.ID, a.ID == b.ID, tc.sameInstance)
			}
			if tc.sameInstance {
				if diff := cmp.Diff(a, b); diff != "" {
					t.Errorf("retry returned another instance: got(-), want(+):\n%s", diff)
				}
			}
			if n := len(f.instances); n != tc.wantInstances {
				t.Errorf("EC2 launched %d instances; want %d", n, tc.wantInstances)
			}
		})
	}
}

func TestAcquireThrottlingAndUncertainty(t *testing.T) {
	repeat := func(code string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = code
		}
		return out
	}
	cases := map[string]struct {
		errs        []string
		wantMarkets []string // of each CreateFleet call
		wantClass   capacity.Class
	}{
		"throttled, then launched by the SDK's retries": {
			errs: repeat("RequestLimitExceeded", 2), wantMarkets: []string{"spot", "spot", "spot"},
		},
		"throttled on every attempt: no other market tried": {
			errs: repeat("RequestLimitExceeded", 3), wantMarkets: []string{"spot", "spot", "spot"}, wantClass: capacity.Throttled,
		},
		"server error on every attempt: no other market tried": {
			errs: repeat("InternalError", 3), wantMarkets: []string{"spot", "spot", "spot"}, wantClass: capacity.Unknown,
		},
		"refused call: the next market is tried": {
			errs: []string{"InvalidParameterValue"}, wantMarkets: []string{"spot", "on-demand"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := &fakeEC2{CallErrors: map[string][]string{"CreateFleet": tc.errs}}
			c := newTestCloud(t, f, nil)
			_, err := c.Acquire(context.Background(), capacity.Request{RunID: "run-1", Attempt: 1, Offerings: []capacity.Offering{spotP3a, odP3a}})
			switch {
			case tc.wantClass == "" && err != nil:
				t.Fatalf("Acquire: %v", err)
			case tc.wantClass != "" && capacity.ClassOf(err) != tc.wantClass:
				t.Fatalf("Acquire = %v; want class %s", err, tc.wantClass)
			}
			var markets, tokens []string
			for _, v := range f.callsOf("CreateFleet") {
				markets = append(markets, v.Get("TargetCapacitySpecification.DefaultTargetCapacityType"))
				if v.Get("TargetCapacitySpecification.DefaultTargetCapacityType") == "spot" {
					tokens = append(tokens, v.Get("ClientToken"))
				}
			}
			if diff := cmp.Diff(markets, tc.wantMarkets); diff != "" {
				t.Errorf("CreateFleet calls by market: got(-), want(+):\n%s", diff)
			}
			for _, tok := range tokens {
				if tok != tokens[0] {
					t.Errorf("retries of one call sent tokens %v; want one token", tokens)
					break
				}
			}
		})
	}
}

func TestAcquireWaitsUntilRunning(t *testing.T) {
	cases := map[string]struct {
		pendingFor  int
		endReason   string
		wantClasses []capacity.Class // nil: launched
	}{
		"pending, then running":         {pendingFor: 3},
		"ends at boot":                  {endReason: "Server.InternalError", wantClasses: []capacity.Class{capacity.InitFailure, capacity.InitFailure}},
		"capacity taken back at launch": {endReason: "Server.InsufficientInstanceCapacity", wantClasses: []capacity.Class{capacity.NoCapacity, capacity.NoCapacity}},
		"spot reclaimed at launch":      {endReason: "Server.SpotInstanceTermination", wantClasses: []capacity.Class{capacity.NoCapacity, capacity.InitFailure}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := &fakeEC2{PendingFor: tc.pendingFor, EndReason: tc.endReason}
			c := newTestCloud(t, f, nil)
			inst, err := c.Acquire(context.Background(), capacity.Request{RunID: "run-1", Attempt: 1, Offerings: []capacity.Offering{spotP3a, odP3a}})
			var classes []capacity.Class
			for _, e := range capacity.Failures(err) {
				classes = append(classes, e.Class)
			}
			if diff := cmp.Diff(classes, tc.wantClasses); diff != "" {
				t.Errorf("failure classes (%v): got(-), want(+):\n%s", err, diff)
			}
			if tc.wantClasses == nil {
				if _, state, err := c.Describe(context.Background(), inst.ID); err != nil || state != capacity.StateRunning {
					t.Errorf("acquired instance is %s, %v; want running", state, err)
				}
				if inst.Address != "10.0.0.1" {
					t.Errorf("acquired instance has address %q; want its private IP, 10.0.0.1", inst.Address)
				}
			}
		})
	}
}
