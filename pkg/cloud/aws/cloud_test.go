package aws

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"refuel/pkg/capacity"
)

func TestRelease(t *testing.T) {
	cases := map[string]struct {
		state    string // "" means EC2 never had it
		notFound bool
	}{
		"running":            {state: "running"},
		"pending":            {state: "pending"},
		"already terminated": {state: "terminated", notFound: true},
		"shutting down":      {state: "shutting-down", notFound: true},
		"unknown ID":         {notFound: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := &fakeEC2{}
			if tc.state != "" {
				f.instances = []*fakeInstance{{id: "i-1", instanceType: "p3.2xlarge", zone: "us-east-1a", state: tc.state, pendingFor: 9}}
			}
			c := newTestCloud(t, f, nil)
			err := c.Release(context.Background(), "i-1")
			var nf *capacity.NotFoundError
			if got := errors.As(err, &nf); got != tc.notFound || (!tc.notFound && err != nil) {
				t.Fatalf("Release = %v; want NotFound %v", err, tc.notFound)
			}
			if tc.notFound && nf.ID != "i-1" {
				t.Errorf("NotFoundError names %q; want i-1", nf.ID)
			}
			if tc.state != "" && f.instances[0].state != "terminated" {
				t.Errorf("instance is %s after Release; want terminated", f.instances[0].state)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	cases := map[string]struct {
		inst      *fakeInstance
		wantState capacity.State
		wantOffer capacity.Offering
	}{
		"running on-demand": {
			&fakeInstance{instanceType: "p3.2xlarge", zone: "us-east-1a", state: "running", privateIP: "10.0.1.23"},
			capacity.StateRunning, odP3a,
		},
		"pending spot, price unknown": {
			&fakeInstance{instanceType: "g5.xlarge", zone: "us-east-1b", lifecycle: "spot", state: "pending", pendingFor: 9},
			capacity.StatePending, offer("g5.xlarge", "us-east-1b", capacity.Spot, 0),
		},
		"spot reclaimed by the market": {
			&fakeInstance{instanceType: "g5.xlarge", zone: "us-east-1b", lifecycle: "spot", state: "shutting-down", reason: "Server.SpotInstanceTermination"},
			capacity.StateInterrupted, offer("g5.xlarge", "us-east-1b", capacity.Spot, 0),
		},
		"on-demand shutting down": {
			&fakeInstance{instanceType: "g5.xlarge", zone: "us-east-1b", state: "shutting-down", reason: "Client.UserInitiatedShutdown"},
			capacity.StateTerminated, odG5b,
		},
		"stopped": {
			&fakeInstance{instanceType: "g5.xlarge", zone: "us-east-1b", state: "stopped"},
			capacity.StateStopped, odG5b,
		},
		"on-demand stopping": {
			&fakeInstance{instanceType: "g5.xlarge", zone: "us-east-1b", state: "stopping", reason: "Client.UserInitiatedShutdown"},
			capacity.StateStopped, odG5b,
		},
		"spot stopped by the market": {
			&fakeInstance{instanceType: "g5.xlarge", zone: "us-east-1b", lifecycle: "spot", state: "stopped", reason: "Server.SpotInstanceShutdown"},
			capacity.StateInterrupted, offer("g5.xlarge", "us-east-1b", capacity.Spot, 0),
		},
		"terminated": {
			&fakeInstance{instanceType: "p3.2xlarge", zone: "us-east-1a", state: "terminated"},
			capacity.StateTerminated, odP3a,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.inst.id = "i-1"
			tc.inst.tags = map[string]string{capacity.TagRun: "run-1"}
			f := &fakeEC2{instances: []*fakeInstance{tc.inst}}
			c := newTestCloud(t, f, nil)
			inst, state, err := c.Describe(context.Background(), "i-1")
			if err != nil {
				t.Fatal(err)
			}
			want := capacity.Instance{ID: "i-1", Offering: tc.wantOffer, TaskQueue: "refuel-node-i-1", LaunchedAt: fakeLaunchTime, Tags: tc.inst.tags}
			if tc.inst.state != "terminated" {
				want.Address = tc.inst.privateIP // where a gang's other nodes reach it
			}
			if diff := cmp.Diff(inst, want); diff != "" {
				t.Errorf("instance: got(-), want(+):\n%s", diff)
			}
			if state != tc.wantState {
				t.Errorf("state %s; want %s", state, tc.wantState)
			}
		})
	}
	t.Run("unknown ID", func(t *testing.T) {
		c := newTestCloud(t, &fakeEC2{}, nil)
		if _, _, err := c.Describe(context.Background(), "i-404"); !capacity.IsNotFound(err) {
			t.Errorf("Describe = %v; want NotFound", err)
		}
	})
}

func TestListByTags(t *testing.T) {
	managed := func(id, run, attempt, state string) *fakeInstance {
		return &fakeInstance{id: id, instanceType: "p3.2xlarge", zone: "us-east-1a", state: state, pendingFor: 9, tags: map[string]string{
			capacity.TagManagedBy: capacity.ManagedBy, capacity.TagRun: run, capacity.TagAttempt: attempt,
		}}
	}
	fleet := []*fakeInstance{
		managed("i-1", "run-a", "1", "running"),
		managed("i-2", "run-a", "2", "pending"),
		managed("i-3", "run-b", "1", "running"),
		managed("i-4", "run-a", "1", "terminated"),
		{id: "i-5", instanceType: "p3.2xlarge", zone: "us-east-1a", state: "running", tags: map[string]string{"Name": "someone-else"}},
		managed("i-6", "run-c", "1", "running"),
	}
	cases := map[string]struct {
		tags      map[string]string
		want      []string
		wantPages int
	}{
		"nil lists every instance refuel manages": {nil, []string{"i-1", "i-2", "i-3", "i-6"}, 2},
		"by run":                  {map[string]string{capacity.TagRun: "run-a"}, []string{"i-1", "i-2"}, 1},
		"by run and attempt":      {map[string]string{capacity.TagRun: "run-a", capacity.TagAttempt: "2"}, []string{"i-2"}, 1},
		"no instance of that run": {map[string]string{capacity.TagRun: "run-z"}, nil, 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := &fakeEC2{instances: fleet, PageSize: 3}
			c := newTestCloud(t, f, nil)
			insts, err := c.List(context.Background(), tc.tags)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, inst := range insts {
				got = append(got, inst.ID)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("got(-), want(+):\n%s", diff)
			}
			if n := len(f.callsOf("DescribeInstances")); n != tc.wantPages {
				t.Errorf("%d DescribeInstances calls; want %d pages", n, tc.wantPages)
			}
		})
	}
}

func TestNewSaysWhatToFix(t *testing.T) {
	// An empty environment: no region, no credentials anywhere, and no
	// instance metadata service to wait for.
	none := filepath.Join(t.TempDir(), "none")
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", none)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", none)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")

	lt := LaunchTemplate{ID: "lt-0abc"}
	cases := map[string]struct {
		cfg  Config
		want string
	}{
		"no launch template":   {Config{Region: "us-east-1"}, "set Config.LaunchTemplate.ID or .Name"},
		"two launch templates": {Config{Region: "us-east-1", LaunchTemplate: LaunchTemplate{ID: "lt-0abc", Name: "x"}}, "EC2 takes one"},
		"key without secret":   {Config{Region: "us-east-1", LaunchTemplate: lt, AccessKeyID: "AKIA"}, "without Config.SecretAccessKey"},
		"no region":            {Config{LaunchTemplate: lt}, "set Config.Region, AWS_REGION"},
		"no credentials":       {Config{Region: "us-east-1", LaunchTemplate: lt}, "no AWS credentials: set AWS_ACCESS_KEY_ID"},
		"duplicate catalogue entry": {Config{Region: "us-east-1", LaunchTemplate: lt,
			InstanceTypes: []InstanceType{{Name: "p3.2xlarge", GPUs: 1}, {Name: "p3.2xlarge", GPUs: 1}}}, "lists p3.2xlarge twice"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := New(context.Background(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v; want it to say %q", err, tc.want)
			}
		})
	}
	t.Run("static credentials for a simulated endpoint", func(t *testing.T) {
		c, err := New(context.Background(), Config{Region: "us-east-1", Endpoint: "http://127.0.0.1:4566", AccessKeyID: "sim", SecretAccessKey: "sim", LaunchTemplate: lt})
		if err != nil {
			t.Fatal(err)
		}
		if c.Name() != ProviderName {
			t.Errorf("Name = %q; want %q", c.Name(), ProviderName)
		}
	})
}
