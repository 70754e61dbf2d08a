package aws

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"go.uber.org/zap"
)

// ProviderName is how JobSpecs name EC2 in resources.providers unless
// Config.Name says otherwise.
const ProviderName = "aws"

// Config configures the EC2 provider. Zero values mean the defaults noted;
// only LaunchTemplate is required, plus a region and credentials from
// here or from the standard AWS chain.
type Config struct {
	// Name is the provider's name in JobSpecs; default "aws".
	Name string
	// Region such as us-east-1; default the standard chain's (AWS_REGION,
	// AWS_PROFILE's config).
	Region string
	// Endpoint overrides EC2's endpoint, e.g. http://127.0.0.1:4566 for
	// refuel's simulated EC2; empty means the region's real endpoint.
	Endpoint string
	// AccessKeyID, SecretAccessKey and SessionToken are static credentials.
	// When AccessKeyID is empty the standard chain is used: environment,
	// shared config and SSO, web identity, ECS or EC2 instance roles.
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string

	// LaunchTemplate is what every instance is launched from; instant
	// fleets require one. Its user data must start the node agent on the
	// instance's own task queue (see the package doc); the provider only
	// chooses instance type, zone and market.
	LaunchTemplate LaunchTemplate
	// InstanceTypes is the catalogue: the types refuel considers, with
	// their GPUs and on-demand prices; default DefaultInstanceTypes().
	InstanceTypes []InstanceType
	// Zones limits the availability zones considered; empty means every
	// zone of the region that offers a catalogue type.
	Zones []string
	// Subnets maps a zone to the subnet instances launch into there; a
	// zone without one uses the default VPC's default subnet.
	Subnets map[string]string

	// MaxAttempts bounds the SDK's attempts per call, throttled ones
	// included (default 5); a call still throttled after them fails as
	// capacity.Throttled and the activity's retry policy backs off further.
	MaxAttempts int
	// MaxBackoff caps the SDK's delay between attempts; default the SDK's.
	MaxBackoff time.Duration
	// PollInterval is how often Acquire and Start check a pending
	// instance until it runs; default 5s.
	PollInterval time.Duration
	// VolumePricePerHour is what a stopped instance costs an hour (its
	// EBS volumes); default DefaultVolumePricePerHour.
	VolumePricePerHour float64
	// Clock is the time source; default time.Now.
	Clock func() time.Time
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
}

// LaunchTemplate names an EC2 launch template by ID or by name.
type LaunchTemplate struct {
	ID   string // lt-0123456789abcdef0
	Name string
	// Version is a number, "$Latest" or "$Default" (the default).
	Version string
}

func (t LaunchTemplate) String() string {
	name := t.ID
	if name == "" {
		name = fmt.Sprintf("%q", t.Name)
	}
	return name + " version " + t.Version
}

// InstanceType is one entry of the catalogue. EC2 has no simple API for
// on-demand prices (the Pricing API is a large, per-region document), so
// the catalogue carries them; spot prices come from EC2 itself.
type InstanceType struct {
	Name string // such as p3.2xlarge
	GPUs int
	// OnDemandPrice is the hourly on-demand price in USD in the configured
	// region.
	OnDemandPrice float64
}

// DefaultInstanceTypes are common NVIDIA GPU types at their us-east-1
// Linux on-demand list prices. Prices differ by region and change; set
// Config.InstanceTypes for anything that bills real money.
func DefaultInstanceTypes() []InstanceType {
	return []InstanceType{
		{Name: "g4dn.xlarge", GPUs: 1, OnDemandPrice: 0.526},
		{Name: "g4dn.12xlarge", GPUs: 4, OnDemandPrice: 3.912},
		{Name: "g5.xlarge", GPUs: 1, OnDemandPrice: 1.006},
		{Name: "g5.2xlarge", GPUs: 1, OnDemandPrice: 1.212},
		{Name: "g5.12xlarge", GPUs: 4, OnDemandPrice: 5.672},
		{Name: "g5.48xlarge", GPUs: 8, OnDemandPrice: 16.288},
		{Name: "g6.xlarge", GPUs: 1, OnDemandPrice: 0.8048},
		{Name: "p3.2xlarge", GPUs: 1, OnDemandPrice: 3.06},
		{Name: "p3.8xlarge", GPUs: 4, OnDemandPrice: 12.24},
		{Name: "p3.16xlarge", GPUs: 8, OnDemandPrice: 24.48},
		{Name: "p4d.24xlarge", GPUs: 8, OnDemandPrice: 32.7726},
	}
}

// withDefaults fills the zero values and rejects what cannot work.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Name == "" {
		cfg.Name = ProviderName
	}
	switch {
	case cfg.LaunchTemplate.ID == "" && cfg.LaunchTemplate.Name == "":
		return cfg, errors.New("no launch template: set Config.LaunchTemplate.ID or .Name to a template whose user data starts `worker agent` (see the package doc)")
	case cfg.LaunchTemplate.ID != "" && cfg.LaunchTemplate.Name != "":
		return cfg, errors.New("Config.LaunchTemplate names both an ID and a Name: EC2 takes one")
	}
	if cfg.LaunchTemplate.Version == "" {
		cfg.LaunchTemplate.Version = "$Default"
	}
	if cfg.InstanceTypes == nil {
		cfg.InstanceTypes = DefaultInstanceTypes()
	}
	seen := map[string]bool{}
	for _, t := range cfg.InstanceTypes {
		switch {
		case t.Name == "":
			return cfg, errors.New("Config.InstanceTypes has an entry without a Name")
		case seen[t.Name]:
			return cfg, fmt.Errorf("Config.InstanceTypes lists %s twice", t.Name)
		case t.GPUs < 0 || t.OnDemandPrice < 0:
			return cfg, fmt.Errorf("Config.InstanceTypes: %s has a negative GPU count or price", t.Name)
		}
		seen[t.Name] = true
	}
	if cfg.AccessKeyID != "" && cfg.SecretAccessKey == "" {
		return cfg, errors.New("Config.AccessKeyID is set without Config.SecretAccessKey")
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 5
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 5 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return cfg, nil
}

// loadSDKConfig resolves region and credentials through the standard chain
// and checks both now, so a worker misconfigured for AWS fails at start
// with what to set rather than at its first launch.
func (cfg Config) loadSDKConfig(ctx context.Context) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = cfg.MaxAttempts
				if cfg.MaxBackoff > 0 {
					o.MaxBackoff = cfg.MaxBackoff
				}
			})
		}),
	}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)))
	}
	sdk, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading AWS configuration (check AWS_PROFILE and ~/.aws/config): %w", err)
	}
	if sdk.Region == "" {
		return aws.Config{}, errors.New("no AWS region: set Config.Region, AWS_REGION, or a region in AWS_PROFILE's config")
	}
	if _, err := sdk.Credentials.Retrieve(ctx); err != nil {
		return aws.Config{}, fmt.Errorf("no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, "+
			"or run with an instance or web-identity role (static Config.AccessKeyID for a simulated endpoint): %w", err)
	}
	return sdk, nil
}
