package aws

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"go.uber.org/zap"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/local"
)

// Cloud is the EC2 provider. Safe for concurrent use: it holds no state
// of its own beyond configuration and the spot placement scores it read
// last; EC2 is the record of every instance.
type Cloud struct {
	cfg    Config
	region string
	ec2    *ec2.Client
	log    *zap.Logger
	types  map[string]InstanceType

	mu     sync.Mutex
	scores map[string]placementScores // by instance type
}

var _ capacity.Provider = (*Cloud)(nil)

// New returns an EC2 provider. It resolves the region and credentials at
// once and fails with what to set when either is missing; it makes no
// EC2 call.
func New(ctx context.Context, cfg Config) (*Cloud, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("aws provider: %w", err)
	}
	sdk, err := cfg.loadSDKConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("aws provider: %w", err)
	}
	client := ec2.NewFromConfig(sdk, func(o *ec2.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	})
	c := &Cloud{
		cfg: cfg, region: sdk.Region, ec2: client, log: cfg.Logger.Named("aws"),
		types: map[string]InstanceType{}, scores: map[string]placementScores{},
	}
	for _, t := range cfg.InstanceTypes {
		c.types[t.Name] = t
	}
	return c, nil
}

// Name implements capacity.Provider.
func (c *Cloud) Name() string { return c.cfg.Name }

// Release implements capacity.Provider: it terminates the instance. An
// instance EC2 no longer knows, or one already shutting down or
// terminated, is a *capacity.NotFoundError.
func (c *Cloud) Release(ctx context.Context, id string) error {
	out, err := c.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	if isInstanceNotFound(err) {
		return &capacity.NotFoundError{ID: id}
	}
	if err != nil {
		return c.wrap(err, "terminating %s", id)
	}
	// EC2 accepts terminating a terminated instance; its previous state
	// tells whether this call is the one that released it.
	for _, ch := range out.TerminatingInstances {
		if ch.PreviousState != nil && gone(ch.PreviousState.Name) {
			return &capacity.NotFoundError{ID: id}
		}
	}
	c.log.Info("instance released", zap.String("instance", id))
	return nil
}

func gone(s types.InstanceStateName) bool {
	return s == types.InstanceStateNameShuttingDown || s == types.InstanceStateNameTerminated
}

// Describe implements capacity.Provider. EC2 keeps terminated instances
// visible for about an hour: those are StateTerminated, not NotFound.
func (c *Cloud) Describe(ctx context.Context, id string) (capacity.Instance, capacity.State, error) {
	inst, err := c.describeInstance(ctx, id)
	if capacity.IsNotFound(err) {
		return capacity.Instance{}, capacity.StateTerminated, err
	}
	if err != nil {
		return capacity.Instance{}, "", err
	}
	return c.instance(inst), stateOf(inst), nil
}

func (c *Cloud) describeInstance(ctx context.Context, id string) (types.Instance, error) {
	out, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if isInstanceNotFound(err) {
		return types.Instance{}, &capacity.NotFoundError{ID: id}
	}
	if err != nil {
		return types.Instance{}, c.wrap(err, "describing %s", id)
	}
	for _, r := range out.Reservations {
		for _, inst := range r.Instances {
			if aws.ToString(inst.InstanceId) == id {
				return inst, nil
			}
		}
	}
	return types.Instance{}, &capacity.NotFoundError{ID: id}
}

// stateOf maps EC2's instance states onto refuel's. A spot instance that
// EC2 is stopping or shutting down for the spot market is interrupted:
// its notice was served. Any other stopping or stopped instance is
// stopped, not terminated. (The two-minute notice itself is visible only on
// the instance's metadata service, which the node agent watches.)
func stateOf(inst types.Instance) capacity.State {
	var name types.InstanceStateName
	if inst.State != nil {
		name = inst.State.Name
	}
	switch name {
	case types.InstanceStateNamePending:
		return capacity.StatePending
	case types.InstanceStateNameRunning:
		return capacity.StateRunning
	case types.InstanceStateNameStopping, types.InstanceStateNameShuttingDown, types.InstanceStateNameStopped:
		if inst.InstanceLifecycle == types.InstanceLifecycleTypeSpot && spotReclaimed(inst.StateReason) {
			return capacity.StateInterrupted
		}
		if name != types.InstanceStateNameShuttingDown {
			// Stopping or stopped, its volume kept (a warm-pool entry):
			// it can be started again, so it is not gone.
			return capacity.StateStopped
		}
	}
	return capacity.StateTerminated
}

func spotReclaimed(r *types.StateReason) bool {
	if r == nil {
		return false
	}
	switch aws.ToString(r.Code) {
	case "Server.SpotInstanceTermination", "Server.SpotInstanceShutdown":
		return true
	}
	return false
}

// List implements capacity.Provider: the pending and running instances
// carrying every tag, or every instance refuel manages when tags is empty.
func (c *Cloud) List(ctx context.Context, tags map[string]string) ([]capacity.Instance, error) {
	if len(tags) == 0 {
		tags = map[string]string{capacity.TagManagedBy: capacity.ManagedBy}
	}
	filters := []types.Filter{{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}}}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		filters = append(filters, types.Filter{Name: aws.String("tag:" + k), Values: []string{tags[k]}})
	}
	var out []capacity.Instance
	pages := ec2.NewDescribeInstancesPaginator(c.ec2, &ec2.DescribeInstancesInput{Filters: filters, MaxResults: aws.Int32(1000)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, c.wrap(err, "listing instances")
		}
		for _, r := range page.Reservations {
			for _, inst := range r.Instances {
				out = append(out, c.instance(inst))
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Reclaimed implements capacity.Reclaimer: the spot instances carrying
// every tag that EC2 shut down or terminated for the spot market (state
// reason Server.SpotInstanceTermination, or ...Shutdown for a stop). EC2
// keeps a terminated instance visible for about an hour.
func (c *Cloud) Reclaimed(ctx context.Context, tags map[string]string) ([]capacity.Instance, error) {
	if len(tags) == 0 {
		tags = map[string]string{capacity.TagManagedBy: capacity.ManagedBy}
	}
	filters := []types.Filter{{Name: aws.String("instance-state-name"), Values: []string{"shutting-down", "terminated", "stopping", "stopped"}}}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		filters = append(filters, types.Filter{Name: aws.String("tag:" + k), Values: []string{tags[k]}})
	}
	var out []capacity.Instance
	pages := ec2.NewDescribeInstancesPaginator(c.ec2, &ec2.DescribeInstancesInput{Filters: filters, MaxResults: aws.Int32(1000)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, c.wrap(err, "listing reclaimed instances")
		}
		for _, r := range page.Reservations {
			for _, inst := range r.Instances {
				if inst.InstanceLifecycle == types.InstanceLifecycleTypeSpot && spotReclaimed(inst.StateReason) {
					out = append(out, c.instance(inst))
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// instance turns an EC2 instance into refuel's. Its price is the
// catalogue's on-demand price; for spot it is 0, since the price paid is
// not recorded on the instance.
func (c *Cloud) instance(inst types.Instance) capacity.Instance {
	id := aws.ToString(inst.InstanceId)
	o := c.offering(string(inst.InstanceType), zoneOf(inst), marketOf(inst.InstanceLifecycle))
	if o.Market == capacity.Spot {
		o.PricePerHour = 0
	}
	tags := map[string]string{}
	for _, t := range inst.Tags {
		tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return capacity.Instance{
		ID: id, Offering: o, TaskQueue: local.TaskQueueFor(id),
		// The private address is where a gang's other nodes reach this
		// one, in the same VPC; EC2 assigns it at launch.
		Address:    aws.ToString(inst.PrivateIpAddress),
		LaunchedAt: aws.ToTime(inst.LaunchTime), Tags: tags,
	}
}

func zoneOf(inst types.Instance) string {
	if inst.Placement == nil {
		return ""
	}
	return aws.ToString(inst.Placement.AvailabilityZone)
}

func marketOf(l types.InstanceLifecycleType) capacity.Market {
	if l == types.InstanceLifecycleTypeSpot {
		return capacity.Spot
	}
	return capacity.OnDemand
}

// offering is the catalogue's offering of a type in a zone on a market,
// priced on-demand; spot prices are the caller's to set.
func (c *Cloud) offering(instanceType, zone string, m capacity.Market) capacity.Offering {
	t := c.types[instanceType]
	return capacity.Offering{
		Provider: c.cfg.Name, InstanceType: instanceType, Zone: zone, Market: m,
		GPUs: t.GPUs, PricePerHour: t.OnDemandPrice,
	}
}
