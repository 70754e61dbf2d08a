package ec2api

import (
	"context"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/sim"
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

const (
	zoneA = "us-west-2a"
	zoneB = "us-west-2b"
	small = "p3.2xlarge"
	large = "p3.16xlarge"
)

var (
	smallA = sim.Pool{Zone: zoneA, InstanceType: small}
	smallB = sim.Pool{Zone: zoneB, InstanceType: small}
	largeA = sim.Pool{Zone: zoneA, InstanceType: large}
)

func points(p ...int) *trace.Trace { return &trace.Trace{Gap: 10 * time.Minute, Points: p} }

// env is an EC2 endpoint on a sim without agents, and an SDK client for it.
type env struct {
	client   *ec2.Client
	cloud    *sim.Cloud
	clock    *fakeClock
	url      string
	requests atomic.Int64
}

// newEnv serves a sim whose pools are smallA (spot stock 1, then 0, then
// 2), smallB (no spot stock, then 1) and largeA (on-demand only). The
// client does not retry unless retryer says how.
func newEnv(t *testing.T, edit func(*sim.Config), retryer aws.Retryer) *env {
	t.Helper()
	e := &env{clock: &fakeClock{t: time.Date(2022, 10, 26, 12, 0, 0, 0, time.UTC)}}
	cfg := sim.Config{
		Pools: []sim.PoolConfig{{Pool: smallA, Spot: points(1, 0, 2)}, {Pool: smallB, Spot: points(0, 1)}, {Pool: largeA}},
		Now:   e.clock.Now, NoticeWindow: 2 * time.Minute,
	}
	if edit != nil {
		edit(&cfg)
	}
	cloud, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.cloud = cloud
	h := New(cloud, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.requests.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		_ = cloud.Close()
	})
	e.url = srv.URL
	opts := ec2.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""), RetryMaxAttempts: 1,
	}
	if retryer != nil {
		opts.Retryer, opts.RetryMaxAttempts = retryer, 0
	}
	e.client = ec2.New(opts)
	return e
}

// errorOf returns the EC2 error code and HTTP status of a failed call.
func errorOf(t *testing.T, err error) (string, int) {
	t.Helper()
	var ae smithy.APIError
	var re *awshttp.ResponseError
	if !errors.As(err, &ae) || !errors.As(err, &re) {
		t.Fatalf("error %v is no EC2 API error", err)
	}
	if re.ServiceRequestID() == "" {
		t.Errorf("error %v carries no request ID", err)
	}
	return ae.ErrorCode(), re.HTTPStatusCode()
}

func wantError(t *testing.T, err error, code string, status int) {
	t.Helper()
	if err == nil {
		t.Fatalf("call succeeded; want %s (%d)", code, status)
	}
	gotCode, gotStatus := errorOf(t, err)
	if gotCode != code || gotStatus != status {
		t.Errorf("error %v: code %s, HTTP %d; want %s, HTTP %d", err, gotCode, gotStatus, code, status)
	}
}

// waitBooted waits until an instance launched through the endpoint has
// left pending; the wait is a hang guard only.
func (e *env) waitBooted(t *testing.T, id string) sim.Status {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := e.cloud.Status(id)
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

func (e *env) describe(t *testing.T, id string) types.Instance {
	t.Helper()
	out, err := e.client.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 {
		t.Fatalf("describe %s: %+v", id, out.Reservations)
	}
	return out.Reservations[0].Instances[0]
}

func refuelTags() []types.TagSpecification {
	return []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{
		{Key: aws.String(capacity.TagManagedBy), Value: aws.String(capacity.ManagedBy)},
		{Key: aws.String(capacity.TagRun), Value: aws.String("run-1")},
	}}}
}

func fleetInput(token string, capType types.DefaultTargetCapacityType, strategy types.SpotAllocationStrategy, overrides ...types.FleetLaunchTemplateOverridesRequest) *ec2.CreateFleetInput {
	in := &ec2.CreateFleetInput{
		Type: types.FleetTypeInstant,
		LaunchTemplateConfigs: []types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String("refuel-node"), Version: aws.String("$Latest")},
			Overrides:                   overrides,
		}},
		TargetCapacitySpecification: &types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: capType},
		SpotOptions:                 &types.SpotOptionsRequest{AllocationStrategy: strategy},
		TagSpecifications:           refuelTags(),
	}
	if token != "" {
		in.ClientToken = aws.String(token)
	}
	return in
}

func over(instanceType, zone string) types.FleetLaunchTemplateOverridesRequest {
	return types.FleetLaunchTemplateOverridesRequest{InstanceType: types.InstanceType(instanceType), AvailabilityZone: aws.String(zone)}
}

func TestCreateFleetLaunchesSpotAndIsIdempotent(t *testing.T) {
	e := newEnv(t, nil, nil)
	ctx := context.Background()
	in := fleetInput("run-1-1", types.DefaultTargetCapacityTypeSpot, types.SpotAllocationStrategyPriceCapacityOptimized, over(small, zoneB), over(small, zoneA))
	out, err := e.client.CreateFleet(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Errors) != 0 || len(out.Instances) != 1 || len(out.Instances[0].InstanceIds) != 1 {
		t.Fatalf("fleet: errors %+v, instances %+v; want one instance and no errors", out.Errors, out.Instances)
	}
	got := out.Instances[0]
	if got.Lifecycle != types.InstanceLifecycleSpot || got.InstanceType != small || aws.ToString(got.LaunchTemplateAndOverrides.Overrides.AvailabilityZone) != zoneA ||
		aws.ToString(got.LaunchTemplateAndOverrides.LaunchTemplateSpecification.LaunchTemplateName) != "refuel-node" {
		t.Errorf("fleet instance %+v; want spot %s in %s, the zone with stock, under its launch template", got, small, zoneA)
	}
	id := got.InstanceIds[0]
	e.waitBooted(t, id)
	inst := e.describe(t, id)
	if inst.State.Name != types.InstanceStateNameRunning || aws.ToInt32(inst.State.Code) != 16 || inst.InstanceLifecycle != types.InstanceLifecycleTypeSpot ||
		aws.ToString(inst.Placement.AvailabilityZone) != zoneA || !aws.ToTime(inst.LaunchTime).Equal(e.clock.Now()) || aws.ToString(inst.ClientToken) != "run-1-1" {
		t.Errorf("described %+v", inst)
	}
	tags := map[string]string{}
	for _, tg := range inst.Tags {
		tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	if tags[capacity.TagRun] != "run-1" || tags[capacity.TagManagedBy] != capacity.ManagedBy {
		t.Errorf("tags %v; want the fleet's instance tags", tags)
	}

	again, err := e.client.CreateFleet(ctx, in)
	if err != nil || aws.ToString(again.FleetId) != aws.ToString(out.FleetId) || len(again.Instances) != 1 || again.Instances[0].InstanceIds[0] != id {
		t.Fatalf("retry with the same ClientToken: %+v, %v; want fleet %s with %s", again, err, aws.ToString(out.FleetId), id)
	}
	if n := len(e.cloud.Instances()); n != 1 {
		t.Errorf("%d instances after the retry; want 1", n)
	}
	changed := fleetInput("run-1-1", types.DefaultTargetCapacityTypeSpot, types.SpotAllocationStrategyPriceCapacityOptimized, over(small, zoneA))
	_, err = e.client.CreateFleet(ctx, changed)
	wantError(t, err, "IdempotentParameterMismatch", 400)
}

func TestCreateFleetUnderConcurrencyLaunchesOnce(t *testing.T) {
	e := newEnv(t, nil, nil)
	in := fleetInput("token-race", types.DefaultTargetCapacityTypeOnDemand, "", over(large, zoneA))
	const callers = 6
	ids := make([]string, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			out, err := e.client.CreateFleet(context.Background(), in)
			if err == nil && len(out.Instances) == 1 {
				ids[i] = out.Instances[0].InstanceIds[0]
			}
		})
	}
	wg.Wait()
	for i, id := range ids {
		if id == "" || id != ids[0] {
			t.Fatalf("caller %d got %q; want %s like caller 0", i, id, ids[0])
		}
	}
	if n := len(e.cloud.Instances()); n != 1 {
		t.Errorf("%d instances; want 1", n)
	}
}

// fleetError is one entry of CreateFleet's Errors list, for comparison.
type fleetError struct{ Zone, Type, Lifecycle, Code string }

func TestCreateFleetReportsEachOverridesFailure(t *testing.T) {
	cases := map[string]struct {
		edit       func(*sim.Config)
		setup      func(*testing.T, *env)
		in         *ec2.CreateFleetInput
		wantZone   string // of the instance launched; "" for none
		wantErrors []fleetError
	}{
		"no stock in the first zone": {
			in:         fleetInput("", types.DefaultTargetCapacityTypeSpot, types.SpotAllocationStrategyLowestPrice, over(small, zoneB), over(small, zoneA)),
			wantZone:   zoneA,
			wantErrors: []fleetError{{zoneB, small, "spot", sim.CodeInsufficientCapacity}},
		},
		"no stock anywhere": {
			edit:       func(cfg *sim.Config) { cfg.Pools[1].Spot = points(0) },
			setup:      func(t *testing.T, e *env) { e.cloud.Advance(1) },
			in:         fleetInput("", types.DefaultTargetCapacityTypeSpot, types.SpotAllocationStrategyCapacityOptimized, over(small, zoneA), over(small, zoneB)),
			wantErrors: []fleetError{{zoneA, small, "spot", sim.CodeInsufficientCapacity}, {zoneB, small, "spot", sim.CodeInsufficientCapacity}},
		},
		"max price below the spot price": {
			in: fleetInput("", types.DefaultTargetCapacityTypeSpot, "", types.FleetLaunchTemplateOverridesRequest{
				InstanceType: small, AvailabilityZone: aws.String(zoneA), MaxPrice: aws.String("0.5"),
			}),
			wantErrors: []fleetError{{zoneA, small, "spot", sim.CodeSpotMaxPriceTooLow}},
		},
		"spot not sold in the pool": {
			in:         fleetInput("", types.DefaultTargetCapacityTypeSpot, "", over(large, zoneA)),
			wantErrors: []fleetError{{zoneA, large, "spot", sim.CodeUnsupported}},
		},
		"type not sold in the zone": {
			in:         fleetInput("", types.DefaultTargetCapacityTypeOnDemand, "", over(large, zoneB)),
			wantErrors: []fleetError{{zoneB, large, "on-demand", sim.CodeUnsupported}},
		},
		"on-demand vCPU quota": {
			edit:       func(cfg *sim.Config) { cfg.Quotas.OnDemandVCPUs = 32 },
			in:         fleetInput("", types.DefaultTargetCapacityTypeOnDemand, "", over(large, zoneA)),
			wantErrors: []fleetError{{zoneA, large, "on-demand", sim.CodeVcpuLimitExceeded}},
		},
		"spot instance count quota": {
			edit: func(cfg *sim.Config) { cfg.Quotas.SpotInstances = 1 },
			setup: func(t *testing.T, e *env) {
				if _, err := e.client.CreateFleet(context.Background(), fleetInput("", types.DefaultTargetCapacityTypeSpot, "", over(small, zoneA))); err != nil {
					t.Fatal(err)
				}
				e.cloud.Advance(2) // stock 2 in zone a
			},
			in:         fleetInput("", types.DefaultTargetCapacityTypeSpot, "", over(small, zoneA)),
			wantErrors: []fleetError{{zoneA, small, "spot", sim.CodeMaxSpotInstances}},
		},
		"a subnet next to its zone": {
			in: fleetInput("", types.DefaultTargetCapacityTypeOnDemand, "", types.FleetLaunchTemplateOverridesRequest{
				InstanceType: small, AvailabilityZone: aws.String(zoneB), SubnetId: aws.String("subnet-b"),
			}),
			wantZone: zoneB,
		},
		"an override without a zone stands for every zone": {
			in: fleetInput("", types.DefaultTargetCapacityTypeSpot, types.SpotAllocationStrategyPriceCapacityOptimized,
				types.FleetLaunchTemplateOverridesRequest{InstanceType: small}),
			wantZone: zoneA,
		},
		"prioritized on-demand takes the first priority": {
			in: func() *ec2.CreateFleetInput {
				in := fleetInput("", types.DefaultTargetCapacityTypeOnDemand, "",
					types.FleetLaunchTemplateOverridesRequest{InstanceType: small, AvailabilityZone: aws.String(zoneA), Priority: aws.Float64(2)},
					types.FleetLaunchTemplateOverridesRequest{InstanceType: small, AvailabilityZone: aws.String(zoneB), Priority: aws.Float64(1)})
				in.OnDemandOptions = &types.OnDemandOptionsRequest{AllocationStrategy: types.FleetOnDemandAllocationStrategyPrioritized}
				return in
			}(),
			wantZone: zoneB,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, tc.edit, nil)
			if tc.setup != nil {
				tc.setup(t, e)
			}
			out, err := e.client.CreateFleet(context.Background(), tc.in)
			if err != nil {
				t.Fatal(err)
			}
			var got []fleetError
			for _, fe := range out.Errors {
				o := fe.LaunchTemplateAndOverrides.Overrides
				got = append(got, fleetError{aws.ToString(o.AvailabilityZone), string(o.InstanceType), string(fe.Lifecycle), aws.ToString(fe.ErrorCode)})
				if aws.ToString(fe.ErrorMessage) == "" {
					t.Errorf("error %s has no message", aws.ToString(fe.ErrorCode))
				}
			}
			if diff := cmp.Diff(got, tc.wantErrors); diff != "" {
				t.Errorf("errors got(-), want(+):\n%s", diff)
			}
			gotZone := ""
			if len(out.Instances) > 0 {
				gotZone = aws.ToString(out.Instances[0].LaunchTemplateAndOverrides.Overrides.AvailabilityZone)
			}
			if gotZone != tc.wantZone {
				t.Errorf("instance launched in %q; want %q", gotZone, tc.wantZone)
			}
		})
	}
}

func TestCreateFleetValidation(t *testing.T) {
	base := func() *ec2.CreateFleetInput {
		return fleetInput("", types.DefaultTargetCapacityTypeSpot, "", over(small, zoneA))
	}
	cases := map[string]struct {
		edit   func(*ec2.CreateFleetInput)
		code   string
		status int
	}{
		"type maintain":           {func(in *ec2.CreateFleetInput) { in.Type = "" }, "UnsupportedOperation", 400},
		"no default market":       {func(in *ec2.CreateFleetInput) { in.TargetCapacitySpecification.DefaultTargetCapacityType = "" }, "MissingParameter", 400},
		"bad allocation strategy": {func(in *ec2.CreateFleetInput) { in.SpotOptions.AllocationStrategy = "cheapest" }, "InvalidParameterValue", 400},
		"template id and name": {func(in *ec2.CreateFleetInput) {
			in.LaunchTemplateConfigs[0].LaunchTemplateSpecification.LaunchTemplateId = aws.String("lt-1")
		}, "InvalidParameterCombination", 400},
		"no launch template": {func(in *ec2.CreateFleetInput) { in.LaunchTemplateConfigs[0].LaunchTemplateSpecification = nil }, "MissingParameter", 400},
		"no overrides":       {func(in *ec2.CreateFleetInput) { in.LaunchTemplateConfigs[0].Overrides = nil }, "MissingParameter", 400},
		"unknown type":       {func(in *ec2.CreateFleetInput) { in.LaunchTemplateConfigs[0].Overrides[0].InstanceType = "x9.huge" }, "InvalidParameterValue", 400},
		"unknown zone": {func(in *ec2.CreateFleetInput) {
			in.LaunchTemplateConfigs[0].Overrides[0].AvailabilityZone = aws.String("mars-1a")
		}, "InvalidParameterValue", 400},
		"markets exceed the total": {func(in *ec2.CreateFleetInput) {
			in.TargetCapacitySpecification.SpotTargetCapacity = aws.Int32(1)
			in.TargetCapacitySpecification.OnDemandTargetCapacity = aws.Int32(1)
		}, "InvalidParameterCombination", 400},
		"a parameter the sim lacks": {func(in *ec2.CreateFleetInput) { in.SpotOptions.MaxTotalPrice = aws.String("10") }, "UnknownParameter", 400},
		"aws: tag":                  {func(in *ec2.CreateFleetInput) { in.TagSpecifications[0].Tags[0].Key = aws.String("aws:x") }, "InvalidParameterValue", 400},
		"token too long":            {func(in *ec2.CreateFleetInput) { in.ClientToken = aws.String(strings.Repeat("t", 65)) }, "InvalidParameterValue", 400},
		"dry run":                   {func(in *ec2.CreateFleetInput) { in.DryRun = aws.Bool(true) }, "DryRunOperation", 412},
		"a million at once": {func(in *ec2.CreateFleetInput) {
			in.TargetCapacitySpecification.TotalTargetCapacity = aws.Int32(1_000_000)
		}, "InvalidParameterValue", 400},
	}
	e := newEnv(t, nil, nil)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := base()
			tc.edit(in)
			_, err := e.client.CreateFleet(context.Background(), in)
			wantError(t, err, tc.code, tc.status)
		})
	}
	if n := len(e.cloud.Instances()); n != 0 {
		t.Errorf("refused requests launched %d instances", n)
	}
}

func runInput(token, zone string, spot bool) *ec2.RunInstancesInput {
	in := &ec2.RunInstancesInput{
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1), ImageId: aws.String("ami-12345678"), InstanceType: small,
		TagSpecifications: refuelTags(),
	}
	if zone != "" {
		in.Placement = &types.Placement{AvailabilityZone: aws.String(zone)}
	}
	if spot {
		in.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{MarketType: types.MarketTypeSpot, SpotOptions: &types.SpotMarketOptions{
			SpotInstanceType: types.SpotInstanceTypeOneTime, InstanceInterruptionBehavior: types.InstanceInterruptionBehaviorTerminate,
		}}
	}
	if token != "" {
		in.ClientToken = aws.String(token)
	}
	return in
}

func TestRunInstances(t *testing.T) {
	e := newEnv(t, nil, nil)
	ctx := context.Background()
	out, err := e.client.RunInstances(ctx, runInput("tok-1", "", true))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Instances) != 1 || aws.ToString(out.OwnerId) != OwnerID || !strings.HasPrefix(aws.ToString(out.ReservationId), "r-") {
		t.Fatalf("reservation %+v", out)
	}
	inst := out.Instances[0]
	if inst.State.Name != types.InstanceStateNamePending || aws.ToInt32(inst.State.Code) != 0 || aws.ToString(inst.Placement.AvailabilityZone) != zoneA ||
		inst.InstanceLifecycle != types.InstanceLifecycleTypeSpot || aws.ToString(inst.ImageId) != "ami-12345678" {
		t.Errorf("launched %+v; want a pending spot instance in %s, the zone with stock", inst, zoneA)
	}
	again, err := e.client.RunInstances(ctx, runInput("tok-1", "", true))
	if err != nil || aws.ToString(again.Instances[0].InstanceId) != aws.ToString(inst.InstanceId) || aws.ToString(again.ReservationId) != aws.ToString(out.ReservationId) {
		t.Errorf("retry with the same ClientToken: %+v, %v; want %s again", again, err, aws.ToString(inst.InstanceId))
	}
	_, err = e.client.RunInstances(ctx, runInput("tok-1", zoneB, true))
	wantError(t, err, "IdempotentParameterMismatch", 400)
}

func TestRunInstancesErrors(t *testing.T) {
	cases := map[string]struct {
		edit   func(*sim.Config)
		setup  func(*testing.T, *env)
		in     func() *ec2.RunInstancesInput
		code   string
		status int
	}{
		"no spot stock": {
			in:   func() *ec2.RunInstancesInput { return runInput("", zoneB, true) },
			code: sim.CodeInsufficientCapacity, status: 500,
		},
		"max price too low": {
			in: func() *ec2.RunInstancesInput {
				in := runInput("", zoneA, true)
				in.InstanceMarketOptions.SpotOptions.MaxPrice = aws.String("0.1")
				return in
			},
			code: sim.CodeSpotMaxPriceTooLow, status: 400,
		},
		"spot instance quota": {
			edit:  func(cfg *sim.Config) { cfg.Quotas.SpotInstances = 1 },
			setup: func(t *testing.T, e *env) { e.run(t, runInput("", zoneA, true)) },
			in:    func() *ec2.RunInstancesInput { return runInput("", zoneA, true) },
			code:  sim.CodeMaxSpotInstances, status: 400,
		},
		"vCPU quota": {
			edit: func(cfg *sim.Config) { cfg.Quotas.OnDemandVCPUs = 4 },
			in:   func() *ec2.RunInstancesInput { return runInput("", zoneA, false) },
			code: sim.CodeVcpuLimitExceeded, status: 400,
		},
		"type not sold in the zone": {
			in: func() *ec2.RunInstancesInput {
				in := runInput("", zoneB, false)
				in.InstanceType = large
				return in
			},
			code: sim.CodeUnsupported, status: 400,
		},
		"throttled": {
			setup: func(t *testing.T, e *env) { e.cloud.ThrottleNext(1) },
			in:    func() *ec2.RunInstancesInput { return runInput("", zoneA, false) },
			code:  sim.CodeRequestLimitExceeded, status: 503,
		},
		"no image": {
			in: func() *ec2.RunInstancesInput {
				in := runInput("", zoneA, false)
				in.ImageId = nil
				return in
			},
			code: "MissingParameter", status: 400,
		},
		"persistent spot": {
			in: func() *ec2.RunInstancesInput {
				in := runInput("", zoneA, true)
				in.InstanceMarketOptions.SpotOptions.SpotInstanceType = types.SpotInstanceTypePersistent
				return in
			},
			code: "InvalidParameterCombination", status: 400,
		},
		"unknown zone": {
			in:   func() *ec2.RunInstancesInput { return runInput("", "us-west-2z", false) },
			code: "InvalidParameterValue", status: 400,
		},
		// Without quotas nothing else would end the launch loop.
		"a million at once": {
			in: func() *ec2.RunInstancesInput {
				in := runInput("", zoneA, false)
				in.MaxCount = aws.Int32(1_000_000)
				return in
			},
			code: "InvalidParameterValue", status: 400,
		},
		"a subnet without its zone": {
			in: func() *ec2.RunInstancesInput {
				in := runInput("", "", false)
				in.SubnetId = aws.String("subnet-1")
				return in
			},
			code: "UnsupportedOperation", status: 400,
		},
		"a parameter the sim lacks": {
			in: func() *ec2.RunInstancesInput {
				in := runInput("", zoneA, false)
				in.HibernationOptions = &types.HibernationOptionsRequest{Configured: aws.Bool(true)}
				return in
			},
			code: "UnknownParameter", status: 400,
		},
		"dry run": {
			in: func() *ec2.RunInstancesInput {
				in := runInput("", zoneA, false)
				in.DryRun = aws.Bool(true)
				return in
			},
			code: "DryRunOperation", status: 412,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, tc.edit, nil)
			if tc.setup != nil {
				tc.setup(t, e)
			}
			before := len(e.cloud.Instances())
			_, err := e.client.RunInstances(context.Background(), tc.in())
			wantError(t, err, tc.code, tc.status)
			if n := len(e.cloud.Instances()); n != before {
				t.Errorf("a refused launch left %d instances; want %d", n, before)
			}
		})
	}
}

func (e *env) run(t *testing.T, in *ec2.RunInstancesInput) string {
	t.Helper()
	out, err := e.client.RunInstances(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.Instances[0].InstanceId)
	e.waitBooted(t, id)
	return id
}

func TestInitFailureShowsAsALaunchFailure(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.cloud.FailNextInits(1)
	id := e.run(t, runInput("", zoneA, false))
	inst := e.describe(t, id)
	if inst.State.Name != types.InstanceStateNameTerminated || inst.StateReason == nil || aws.ToString(inst.StateReason.Code) != sim.CodeLaunchFailure {
		t.Errorf("instance %+v (reason %+v); want terminated by %s", inst.State, inst.StateReason, sim.CodeLaunchFailure)
	}
}

func TestDescribeInstances(t *testing.T) {
	e := newEnv(t, nil, nil)
	ctx := context.Background()
	spot := e.run(t, runInput("", zoneA, true))
	other := runInput("", zoneA, false)
	other.TagSpecifications = []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{{Key: aws.String(capacity.TagRun), Value: aws.String("run-2")}}}}
	onDemand := e.run(t, other)
	gone := e.run(t, runInput("", zoneA, false))
	if _, err := e.client.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{gone}}); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		filters []types.Filter
		want    []string
	}{
		"all, terminated included": {nil, []string{spot, onDemand, gone}},
		"by run tag":               {[]types.Filter{{Name: aws.String("tag:" + capacity.TagRun), Values: []string{"run-1"}}}, []string{spot, gone}},
		"by tag key":               {[]types.Filter{{Name: aws.String("tag-key"), Values: []string{capacity.TagManagedBy}}}, []string{spot, gone}},
		"running": {[]types.Filter{{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}}},
			[]string{spot, onDemand}},
		"spot lifecycle":        {[]types.Filter{{Name: aws.String("instance-lifecycle"), Values: []string{"spot"}}}, []string{spot}},
		"by id":                 {[]types.Filter{{Name: aws.String("instance-id"), Values: []string{onDemand}}}, []string{onDemand}},
		"filters are and-ed":    {[]types.Filter{{Name: aws.String("tag:" + capacity.TagRun), Values: []string{"run-1"}}, {Name: aws.String("instance-state-code"), Values: []string{"16"}}}, []string{spot}},
		"type and zone":         {[]types.Filter{{Name: aws.String("instance-type"), Values: []string{small}}, {Name: aws.String("availability-zone"), Values: []string{zoneB}}}, nil},
		"terminated by state":   {[]types.Filter{{Name: aws.String("instance-state-name"), Values: []string{"terminated"}}}, []string{gone}},
		"no such tag value yet": {[]types.Filter{{Name: aws.String("tag:" + capacity.TagRun), Values: []string{"run-9"}}}, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			pages := ec2.NewDescribeInstancesPaginator(e.client, &ec2.DescribeInstancesInput{Filters: tc.filters, MaxResults: aws.Int32(5)})
			for pages.HasMorePages() {
				out, err := pages.NextPage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range out.Reservations {
					for _, inst := range r.Instances {
						got = append(got, aws.ToString(inst.InstanceId))
					}
				}
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("instances got(-), want(+):\n%s", diff)
			}
		})
	}
}

func TestDescribeInstancesPaginates(t *testing.T) {
	e := newEnv(t, nil, nil)
	ctx := context.Background()
	var want []string
	for range 7 {
		want = append(want, e.run(t, runInput("", zoneA, false)))
	}
	var got []string
	pageCount := 0
	pages := ec2.NewDescribeInstancesPaginator(e.client, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(5)})
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pageCount++
		for _, r := range out.Reservations {
			for _, inst := range r.Instances {
				got = append(got, aws.ToString(inst.InstanceId))
			}
		}
	}
	if diff := cmp.Diff(got, want); diff != "" || pageCount != 2 {
		t.Errorf("%d pages; instances got(-), want(+):\n%s", pageCount, diff)
	}
}

func TestDescribeInstancesErrors(t *testing.T) {
	e := newEnv(t, nil, nil)
	id := e.run(t, runInput("", zoneA, false))
	cases := map[string]struct {
		in   *ec2.DescribeInstancesInput
		code string
	}{
		"unknown instance":   {&ec2.DescribeInstancesInput{InstanceIds: []string{id, "i-0123456789abcdef0"}}, "InvalidInstanceID.NotFound"},
		"malformed instance": {&ec2.DescribeInstancesInput{InstanceIds: []string{"instance-1"}}, "InvalidInstanceID.Malformed"},
		"unknown filter":     {&ec2.DescribeInstancesInput{Filters: []types.Filter{{Name: aws.String("owner-color"), Values: []string{"x"}}}}, "InvalidParameterValue"},
		"ids and max results": {&ec2.DescribeInstancesInput{InstanceIds: []string{id}, MaxResults: aws.Int32(5)},
			"InvalidParameterCombination"},
		"max results too small": {&ec2.DescribeInstancesInput{MaxResults: aws.Int32(2)}, "InvalidParameterValue"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := e.client.DescribeInstances(context.Background(), tc.in)
			wantError(t, err, tc.code, 400)
		})
	}
}

func TestTerminateInstances(t *testing.T) {
	e := newEnv(t, nil, nil)
	ctx := context.Background()
	id := e.run(t, runInput("", zoneA, false))
	type change struct{ Current, Previous types.InstanceStateName }
	for i, want := range []change{{"shutting-down", "running"}, {"terminated", "terminated"}} {
		out, err := e.client.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
		if err != nil {
			t.Fatal(err)
		}
		c := out.TerminatingInstances[0]
		if got := (change{c.CurrentState.Name, c.PreviousState.Name}); got != want || aws.ToString(c.InstanceId) != id {
			t.Errorf("termination %d: %+v; want %+v", i+1, got, want)
		}
	}
	inst := e.describe(t, id)
	if aws.ToInt32(inst.State.Code) != 48 || aws.ToString(inst.StateReason.Code) != sim.ReasonUserShutdown.Code {
		t.Errorf("terminated instance %+v (reason %+v)", inst.State, inst.StateReason)
	}
	_, err := e.client.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{"i-0123456789abcdef0"}})
	wantError(t, err, "InvalidInstanceID.NotFound", 400)
}

func TestSpotInterruptionShowsInDescribe(t *testing.T) {
	e := newEnv(t, nil, nil)
	id := e.run(t, runInput("", zoneA, true))
	e.cloud.Advance(1) // zone a's stock drops to 0
	if st, _ := e.cloud.Status(id); st.State != capacity.StateInterrupted {
		t.Fatalf("after the drop: %s; want interrupted", st.State)
	}
	if inst := e.describe(t, id); inst.State.Name != types.InstanceStateNameRunning {
		t.Errorf("under notice: %s; want running, as on EC2", inst.State.Name)
	}
	e.clock.Add(2 * time.Minute)
	inst := e.describe(t, id)
	if inst.State.Name != types.InstanceStateNameTerminated || aws.ToString(inst.StateReason.Code) != sim.ReasonSpotTermination.Code {
		t.Errorf("after the notice: %s (%+v); want terminated by %s", inst.State.Name, inst.StateReason, sim.ReasonSpotTermination.Code)
	}
}

func TestCreateTags(t *testing.T) {
	e := newEnv(t, nil, nil)
	ctx := context.Background()
	id := e.run(t, runInput("", zoneA, false))
	_, err := e.client.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: []types.Tag{{Key: aws.String(capacity.TagPool), Value: aws.String("burst")}}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{{Name: aws.String("tag:" + capacity.TagPool), Values: []string{"burst"}}}})
	if err != nil || len(out.Reservations) != 1 {
		t.Fatalf("describe by the new tag: %+v, %v", out, err)
	}
	cases := map[string]struct {
		in   *ec2.CreateTagsInput
		code string
	}{
		"unknown instance": {&ec2.CreateTagsInput{Resources: []string{"i-0123456789abcdef0"}, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}, "InvalidInstanceID.NotFound"},
		"not an instance":  {&ec2.CreateTagsInput{Resources: []string{"vol-1"}, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}, "InvalidID"},
		"reserved key":     {&ec2.CreateTagsInput{Resources: []string{id}, Tags: []types.Tag{{Key: aws.String("aws:owner"), Value: aws.String("v")}}}, "InvalidParameterValue"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := e.client.CreateTags(ctx, tc.in)
			wantError(t, err, tc.code, 400)
		})
	}
}

func TestDescribeInstanceTypeOfferings(t *testing.T) {
	e := newEnv(t, nil, nil)
	type offering struct{ Type, Location string }
	cases := map[string]struct {
		in   *ec2.DescribeInstanceTypeOfferingsInput
		want []offering
	}{
		"zones": {&ec2.DescribeInstanceTypeOfferingsInput{LocationType: types.LocationTypeAvailabilityZone},
			[]offering{{large, zoneA}, {small, zoneA}, {small, zoneB}}},
		"by type": {&ec2.DescribeInstanceTypeOfferingsInput{LocationType: types.LocationTypeAvailabilityZone, Filters: []types.Filter{{Name: aws.String("instance-type"), Values: []string{large}}}},
			[]offering{{large, zoneA}}},
		"by location": {&ec2.DescribeInstanceTypeOfferingsInput{LocationType: types.LocationTypeAvailabilityZone, Filters: []types.Filter{{Name: aws.String("location"), Values: []string{zoneB}}}},
			[]offering{{small, zoneB}}},
		"region, the default": {&ec2.DescribeInstanceTypeOfferingsInput{}, []offering{{large, "us-west-2"}, {small, "us-west-2"}}},
		"zone ids":            {&ec2.DescribeInstanceTypeOfferingsInput{LocationType: types.LocationTypeAvailabilityZoneId, Filters: []types.Filter{{Name: aws.String("location"), Values: []string{"usw2-az2"}}}}, []offering{{small, "usw2-az2"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := e.client.DescribeInstanceTypeOfferings(context.Background(), tc.in)
			if err != nil {
				t.Fatal(err)
			}
			var got []offering
			for _, o := range out.InstanceTypeOfferings {
				got = append(got, offering{string(o.InstanceType), aws.ToString(o.Location)})
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("offerings got(-), want(+):\n%s", diff)
			}
		})
	}
	_, err := e.client.DescribeInstanceTypeOfferings(context.Background(), &ec2.DescribeInstanceTypeOfferingsInput{Filters: []types.Filter{{Name: aws.String("gpu"), Values: []string{"1"}}}})
	wantError(t, err, "InvalidParameterValue", 400)
}

func TestDescribeInstanceTypes(t *testing.T) {
	e := newEnv(t, nil, nil)
	out, err := e.client.DescribeInstanceTypes(context.Background(), &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{large}})
	if err != nil {
		t.Fatal(err)
	}
	it := out.InstanceTypes[0]
	if len(out.InstanceTypes) != 1 || it.InstanceType != large || aws.ToInt32(it.VCpuInfo.DefaultVCpus) != 64 ||
		aws.ToInt32(it.GpuInfo.Gpus[0].Count) != 8 || aws.ToString(it.GpuInfo.Gpus[0].Name) != "V100" ||
		!cmp.Equal(it.SupportedUsageClasses, []types.UsageClassType{"on-demand", "spot"}) {
		t.Errorf("described %+v", out.InstanceTypes)
	}
	all, err := e.client.DescribeInstanceTypes(context.Background(), &ec2.DescribeInstanceTypesInput{})
	if err != nil || len(all.InstanceTypes) != 2 {
		t.Errorf("all types: %d, %v; want the 2 the sim sells", len(all.InstanceTypes), err)
	}
	_, err = e.client.DescribeInstanceTypes(context.Background(), &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{"x9.huge"}})
	wantError(t, err, "InvalidInstanceType", 400)
}

func TestDescribeAvailabilityZones(t *testing.T) {
	e := newEnv(t, nil, nil)
	out, err := e.client.DescribeAvailabilityZones(context.Background(), &ec2.DescribeAvailabilityZonesInput{})
	if err != nil {
		t.Fatal(err)
	}
	type zone struct{ Name, ID, Region string }
	var got []zone
	for _, z := range out.AvailabilityZones {
		got = append(got, zone{aws.ToString(z.ZoneName), aws.ToString(z.ZoneId), aws.ToString(z.RegionName)})
	}
	want := []zone{{zoneA, "usw2-az1", "us-west-2"}, {zoneB, "usw2-az2", "us-west-2"}}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("zones got(-), want(+):\n%s", diff)
	}
	_, err = e.client.DescribeAvailabilityZones(context.Background(), &ec2.DescribeAvailabilityZonesInput{ZoneNames: []string{"us-west-2z"}})
	wantError(t, err, "InvalidParameterValue", 400)
}

func TestDescribeSpotPriceHistory(t *testing.T) {
	e := newEnv(t, nil, nil)
	opened := e.clock.Now()
	e.clock.Add(time.Hour)
	if err := e.cloud.SetSpotPrice(smallA, 1.25); err != nil {
		t.Fatal(err)
	}
	changed := e.clock.Now()
	e.clock.Add(time.Hour)
	type price struct {
		Zone, Price string
		At          time.Time
	}
	cases := map[string]struct {
		in   *ec2.DescribeSpotPriceHistoryInput
		want []price
	}{
		"today's prices": {&ec2.DescribeSpotPriceHistoryInput{InstanceTypes: []types.InstanceType{small}},
			[]price{{zoneA, "1.250000", changed}, {zoneB, "0.970100", opened}}},
		"history of one zone, newest first": {&ec2.DescribeSpotPriceHistoryInput{AvailabilityZone: aws.String(zoneA), StartTime: aws.Time(opened), EndTime: aws.Time(e.clock.Now())},
			[]price{{zoneA, "1.250000", changed}, {zoneA, "0.970100", opened}}},
		"the price in effect at the start": {&ec2.DescribeSpotPriceHistoryInput{AvailabilityZone: aws.String(zoneA), StartTime: aws.Time(opened.Add(time.Minute)), EndTime: aws.Time(opened.Add(2 * time.Minute))},
			[]price{{zoneA, "0.970100", opened}}},
		"filtered by zone": {&ec2.DescribeSpotPriceHistoryInput{Filters: []types.Filter{{Name: aws.String("availability-zone"), Values: []string{zoneB}}}},
			[]price{{zoneB, "0.970100", opened}}},
		"a product the sim does not run": {&ec2.DescribeSpotPriceHistoryInput{ProductDescriptions: []string{"Windows"}}, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := e.client.DescribeSpotPriceHistory(context.Background(), tc.in)
			if err != nil {
				t.Fatal(err)
			}
			var got []price
			for _, p := range out.SpotPriceHistory {
				got = append(got, price{aws.ToString(p.AvailabilityZone), aws.ToString(p.SpotPrice), aws.ToTime(p.Timestamp)})
				if p.InstanceType != small || p.ProductDescription != types.RIProductDescription("Linux/UNIX") {
					t.Errorf("price row %+v", p)
				}
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("prices got(-), want(+):\n%s", diff)
			}
		})
	}
}

func TestThrottlingThroughTheSDKRetryer(t *testing.T) {
	retryer := retry.NewStandard(func(o *retry.StandardOptions) {
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
	})
	e := newEnv(t, nil, retryer)
	e.cloud.ThrottleNext(2)
	if _, err := e.client.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{}); err != nil {
		t.Fatalf("the SDK's retryer did not ride out two throttled calls: %v", err)
	}
	if n := e.requests.Load(); n != 3 {
		t.Errorf("%d requests; want 3 (two throttled, one served)", n)
	}

	// EC2 answers a capacity shortage with a 500, which the SDK's default
	// retryer retries too: a RunInstances caller sees it after 3 tries.
	e.requests.Store(0)
	_, err := e.client.RunInstances(context.Background(), runInput("", zoneB, true))
	wantError(t, err, sim.CodeInsufficientCapacity, 500)
	if n := e.requests.Load(); n != 3 {
		t.Errorf("%d requests for a launch without capacity; want the SDK's 3 attempts", n)
	}
}

func TestRateLimit(t *testing.T) {
	e := newEnv(t, func(cfg *sim.Config) { cfg.APIRateLimit, cfg.APIBurst = 1, 2 }, nil)
	var codes []string
	for range 3 {
		_, err := e.client.DescribeAvailabilityZones(context.Background(), &ec2.DescribeAvailabilityZonesInput{})
		code := "ok"
		if err != nil {
			code, _ = errorOf(t, err)
		}
		codes = append(codes, code)
	}
	e.clock.Add(time.Second)
	if _, err := e.client.DescribeAvailabilityZones(context.Background(), &ec2.DescribeAvailabilityZonesInput{}); err != nil {
		codes = append(codes, err.Error())
	}
	if diff := cmp.Diff(codes, []string{"ok", "ok", sim.CodeRequestLimitExceeded}); diff != "" {
		t.Errorf("calls got(-), want(+):\n%s", diff)
	}
}

// post sends a raw form, as a client without the SDK's own checks would,
// and returns the error code, HTTP status and body.
func post(t *testing.T, endpoint string, form url.Values) (string, int, string) {
	t.Helper()
	resp, err := http.PostForm(endpoint, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var e struct {
		Code      string `xml:"Errors>Error>Code"`
		RequestID string `xml:"RequestID"`
	}
	if resp.StatusCode != http.StatusOK {
		if err := xml.Unmarshal(body, &e); err != nil || e.RequestID != resp.Header.Get("x-amzn-RequestId") {
			t.Errorf("error body %s (%v) lacks EC2's envelope or the request ID", body, err)
		}
		if !strings.HasPrefix(string(body), xml.Header+"<Response><Errors><Error><Code>") {
			t.Errorf("error body %s is not EC2's envelope", body)
		}
	}
	return e.Code, resp.StatusCode, string(body)
}

func TestRequestsRefusedBeforeAnyAction(t *testing.T) {
	e := newEnv(t, nil, nil)
	cases := map[string]struct {
		form   url.Values
		code   string
		status int
	}{
		"unknown action": {url.Values{"Action": {"LaunchRocket"}, "Version": {Version}}, "InvalidAction", 400},
		"no action":      {url.Values{"Version": {Version}}, "MissingAction", 400},
		"no version":     {url.Values{"Action": {"DescribeInstances"}}, "MissingParameter", 400},
		"old version":    {url.Values{"Action": {"DescribeInstances"}, "Version": {"2014-01-01"}}, "NoSuchVersion", 400},
		// Fields the SDK checks itself are checked here too.
		"fleet without a total": {url.Values{"Action": {"CreateFleet"}, "Version": {Version}, "Type": {"instant"},
			"TargetCapacitySpecification.DefaultTargetCapacityType": {"spot"}}, "MissingParameter", 400},
		"fleet without configs": {url.Values{"Action": {"CreateFleet"}, "Version": {Version}, "Type": {"instant"},
			"TargetCapacitySpecification.TotalTargetCapacity": {"1"}, "TargetCapacitySpecification.DefaultTargetCapacityType": {"spot"}}, "MissingParameter", 400},
		"run without counts": {url.Values{"Action": {"RunInstances"}, "Version": {Version}, "ImageId": {"ami-1"}, "InstanceType": {small}}, "MissingParameter", 400},
		"terminate nothing":  {url.Values{"Action": {"TerminateInstances"}, "Version": {Version}}, "MissingParameter", 400},
		"tag nothing":        {url.Values{"Action": {"CreateTags"}, "Version": {Version}, "Tag.1.Key": {"k"}}, "MissingParameter", 400},
		"no tags":            {url.Values{"Action": {"CreateTags"}, "Version": {Version}, "ResourceId.1": {"i-0123456789abcdef0"}}, "MissingParameter", 400},
		"bad filter index":   {url.Values{"Action": {"DescribeInstances"}, "Version": {Version}, "Filter.1.Value.1": {"x"}}, "MissingParameter", 400},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, status, body := post(t, e.url, tc.form)
			if code != tc.code || status != tc.status {
				t.Errorf("HTTP %d %s (%s); want %d %s", status, code, body, tc.status, tc.code)
			}
		})
	}
	_, status, body := post(t, e.url, url.Values{"Action": {"DescribeAvailabilityZones"}, "Version": {Version}})
	if status != 200 || !strings.Contains(body, `<DescribeAvailabilityZonesResponse xmlns="`+Namespace+`"><requestId>`) {
		t.Errorf("response %s lacks EC2's namespace and request ID", body)
	}
}

func TestActions(t *testing.T) {
	want := []string{"CreateFleet", "CreateTags", "DescribeAvailabilityZones", "DescribeInstanceTypeOfferings", "DescribeInstanceTypes",
		"DescribeInstances", "DescribeSpotPriceHistory", "GetSpotPlacementScores", "RunInstances", "StartInstances", "StopInstances", "TerminateInstances"}
	if diff := cmp.Diff(Actions(), want); diff != "" {
		t.Errorf("actions got(-), want(+):\n%s", diff)
	}
}

func TestSpotPricesOfEachZone(t *testing.T) {
	e := newEnv(t, func(c *sim.Config) { *c = c.WithPrices(sim.DefaultPrices()) }, nil)
	out, err := e.client.DescribeSpotPriceHistory(context.Background(), &ec2.DescribeSpotPriceHistoryInput{InstanceTypes: []types.InstanceType{small}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range out.SpotPriceHistory {
		got[aws.ToString(p.AvailabilityZone)] = aws.ToString(p.SpotPrice)
	}
	if diff := cmp.Diff(got, map[string]string{zoneA: "1.010000", zoneB: "0.936200"}); diff != "" {
		t.Errorf("spot prices got(-), want(+):\n%s", diff)
	}
}

// An instance has a private address, through the SDK, from its launch
// until it is terminated: loopback, where the sim's instances run and
// where a gang's ranks reach each other.
func TestPrivateIPAddress(t *testing.T) {
	e := newEnv(t, nil, nil)
	ctx := context.Background()
	out, err := e.client.RunInstances(ctx, runInput("tok-ip", "", true))
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.Instances[0].InstanceId)
	if got := aws.ToString(out.Instances[0].PrivateIpAddress); got != "127.0.0.1" {
		t.Errorf("RunInstances' instance has private address %q; want 127.0.0.1", got)
	}
	e.waitBooted(t, id)
	if got := aws.ToString(e.describe(t, id).PrivateIpAddress); got != "127.0.0.1" {
		t.Errorf("running instance has private address %q; want 127.0.0.1", got)
	}
	if _, err := e.client.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	if got := e.describe(t, id).PrivateIpAddress; got != nil {
		t.Errorf("terminated instance still has private address %q", aws.ToString(got))
	}
}
