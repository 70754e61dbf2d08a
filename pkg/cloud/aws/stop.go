package aws

import (
	"context"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"go.uber.org/zap"

	"refuel/pkg/capacity"
)

// DefaultVolumePricePerHour is a stopped instance's price without
// Config.VolumePricePerHour: a 200 GB gp3 volume at $0.08 per GB-month.
const DefaultVolumePricePerHour = 0.022

var _ capacity.Stopper = (*Cloud)(nil)

// Stop implements capacity.Stopper with StopInstances: the instance
// stops, its EBS volumes stay. EC2 stops only on-demand instances here:
// a spot one is a *capacity.NotStoppableError without a call.
func (c *Cloud) Stop(ctx context.Context, id string) error {
	inst, err := c.describeInstance(ctx, id)
	if err != nil {
		return err
	}
	if inst.State != nil && gone(inst.State.Name) {
		return &capacity.NotFoundError{ID: id}
	}
	if inst.InstanceLifecycle == types.InstanceLifecycleTypeSpot {
		return &capacity.NotStoppableError{ID: id, Reason: "a spot instance is reclaimed, not stopped"}
	}
	if _, err := c.ec2.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{id}}); isInstanceNotFound(err) {
		return &capacity.NotFoundError{ID: id}
	} else if err != nil {
		return c.wrap(err, "stopping %s", id)
	}
	c.log.Info("instance stopped", zap.String("instance", id))
	return nil
}

// Start implements capacity.Stopper with StartInstances, then waits,
// checking every PollInterval, until the instance runs. Its node agent
// must start at boot (a systemd unit, not only the first boot's user
// data) to serve its task queue again.
func (c *Cloud) Start(ctx context.Context, id string) (capacity.Instance, error) {
	if _, err := c.ec2.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: []string{id}}); isInstanceNotFound(err) {
		return capacity.Instance{}, &capacity.NotFoundError{ID: id}
	} else if err != nil {
		return capacity.Instance{}, c.wrap(err, "starting %s", id)
	}
	for {
		inst, err := c.describeInstance(ctx, id)
		if err != nil {
			return capacity.Instance{}, err
		}
		var state types.InstanceStateName
		if inst.State != nil {
			state = inst.State.Name
		}
		switch state {
		case types.InstanceStateNameRunning:
			c.log.Info("instance started", zap.String("instance", id))
			return c.instance(inst), nil
		case types.InstanceStateNameShuttingDown, types.InstanceStateNameTerminated:
			return capacity.Instance{}, &capacity.NotFoundError{ID: id}
		}
		t := time.NewTimer(c.cfg.PollInterval)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return capacity.Instance{}, ctx.Err()
		}
	}
}

// ListStopped implements capacity.Stopper: the stopped instances
// carrying every tag, or every one refuel manages when tags is empty.
func (c *Cloud) ListStopped(ctx context.Context, tags map[string]string) ([]capacity.Instance, error) {
	if len(tags) == 0 {
		tags = map[string]string{capacity.TagManagedBy: capacity.ManagedBy}
	}
	filters := []types.Filter{{Name: aws.String("instance-state-name"), Values: []string{"stopped"}}}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		filters = append(filters, types.Filter{Name: aws.String("tag:" + k), Values: []string{tags[k]}})
	}
	var out []capacity.Instance
	pages := ec2.NewDescribeInstancesPaginator(c.ec2, &ec2.DescribeInstancesInput{Filters: filters, MaxResults: aws.Int32(1000)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, c.wrap(err, "listing stopped instances")
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

// StoppedPricePerHour implements capacity.Stopper.
func (c *Cloud) StoppedPricePerHour(capacity.Offering) float64 {
	if c.cfg.VolumePricePerHour > 0 {
		return c.cfg.VolumePricePerHour
	}
	return DefaultVolumePricePerHour
}
