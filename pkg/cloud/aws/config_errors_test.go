package aws

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/cloud/sim/ec2api"
	"refuel/pkg/spec"
	"refuel/pkg/trace"
)

// simEndpoint serves a sim without agents over EC2's API, whose only
// launch template is refuel-node, and returns a provider for it whose
// configuration edit changes.
func simEndpoint(t *testing.T, edit func(*Config), opts ...ec2api.Option) *Cloud {
	t.Helper()
	cloud, err := sim.New(sim.Config{Pools: []sim.PoolConfig{
		{Pool: sim.Pool{Zone: "us-east-1a", InstanceType: "p3.2xlarge"}, Spot: &trace.Trace{Gap: 10 * time.Minute, Points: []int{4}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	h := ec2api.New(cloud, nil, opts...)
	h.SetLaunchTemplates("refuel-node")
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		_ = cloud.Close()
	})
	cfg := Config{
		Region: "us-east-1", Endpoint: srv.URL, AccessKeyID: "test", SecretAccessKey: "test",
		LaunchTemplate: LaunchTemplate{Name: "refuel-node"}, MaxAttempts: 1, PollInterval: time.Millisecond,
	}
	if edit != nil {
		edit(&cfg)
	}
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// What no retry cures is class config, through the real SDK against the
// sim's EC2 endpoint, with what to fix; the same configuration, put
// right, launches.
func TestConfigFailuresAgainstTheSimEndpoint(t *testing.T) {
	sold := offer("p3.2xlarge", "us-east-1a", capacity.Spot, 0.97)
	unknown := offer("p9.mega", "us-east-1a", capacity.Spot, 0.97)
	cases := map[string]struct {
		edit     func(*Config)
		offering capacity.Offering
		code     string // "" launches
		fix      string
	}{
		"template by name": {edit: func(cfg *Config) { cfg.LaunchTemplate.Name = "refuel-nodes" }, offering: sold,
			code: "InvalidLaunchTemplateName.NotFoundException", fix: `check Config.LaunchTemplate (worker --aws-launch-template): "refuel-nodes"`},
		"template by ID": {edit: func(cfg *Config) { cfg.LaunchTemplate = LaunchTemplate{ID: "lt-00000000000000000"} }, offering: sold,
			code: "InvalidLaunchTemplateId.NotFound", fix: "lt-00000000000000000 version $Default must exist in region us-east-1"},
		"unknown instance type": {offering: unknown,
			code: "InvalidParameterValue", fix: "fix resources.instance_types, the pools file or Config.InstanceTypes"},
		"the template that exists": {offering: sold},
		"its ID":                   {edit: func(cfg *Config) { cfg.LaunchTemplate = LaunchTemplate{ID: ec2api.LaunchTemplateID("refuel-node")} }, offering: sold},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := simEndpoint(t, tc.edit)
			inst, err := c.Acquire(context.Background(), capacity.Request{RunID: "run-1", Attempt: 1, Offerings: []capacity.Offering{tc.offering}})
			if tc.code == "" {
				if err != nil || inst.ID == "" {
					t.Fatalf("Acquire = %+v, %v; want an instance", inst, err)
				}
				return
			}
			fs := capacity.Failures(err)
			if len(fs) != 1 {
				t.Fatalf("Acquire = %v; want one failure", err)
			}
			if fs[0].Class != capacity.Config || fs[0].Code != tc.code {
				t.Errorf("failure %s (%s); want config (%s)", fs[0].Class, fs[0].Code, tc.code)
			}
			if !strings.Contains(fs[0].Message, tc.fix) {
				t.Errorf("message %q; want it to say %q", fs[0].Message, tc.fix)
			}
			if capacity.ClassOf(err).Retryable() {
				t.Errorf("class %s is retryable; nothing but a fix cures it", capacity.ClassOf(err))
			}
		})
	}
}

// Credentials the cloud refuses fail listing the offerings as class
// config, saying what to fix, so a run fails at once instead of
// retrying what no retry cures.
func TestRefusedCredentialsAreConfig(t *testing.T) {
	c := simEndpoint(t, func(cfg *Config) { cfg.SecretAccessKey = "not-the-secret" }, ec2api.WithCredentials("test", "the-secret"))
	_, err := c.Offerings(context.Background(), spec.Resources{GPUs: 1})
	if got := capacity.ClassOf(err); got != capacity.Config || !strings.Contains(err.Error(), "AuthFailure") || !strings.Contains(err.Error(), "check the access key") {
		t.Fatalf("Offerings with a wrong secret: class %s, %v; want config, AuthFailure and what to check", got, err)
	}
}
