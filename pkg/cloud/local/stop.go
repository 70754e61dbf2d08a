package local

import (
	"context"
	"sort"
	"time"

	"go.uber.org/zap"

	"refuel/pkg/capacity"
)

// DefaultStartTime is how long starting a stopped local instance takes
// before its agent starts again, without Config.StartTime: a virtual
// machine resumed on the host.
const DefaultStartTime = 10 * time.Second

// DefaultVolumePricePerHour prices a stopped instance's scratch space as
// a 200 GB gp3 volume, without Config.VolumePricePerHour.
const DefaultVolumePricePerHour = 0.022

var _ capacity.Stopper = (*Cloud)(nil)

// Stop implements capacity.Stopper: the agent ends, the scratch space
// (the instance's volume) stays.
func (c *Cloud) Stop(_ context.Context, id string) error {
	c.mu.Lock()
	inst, ok := c.instances[id]
	var state capacity.State
	if ok {
		state = c.stateLocked(inst)
	}
	switch {
	case !ok || state == capacity.StateTerminated:
		c.mu.Unlock()
		return &capacity.NotFoundError{ID: id}
	case inst.Offering.Market == capacity.Spot:
		c.mu.Unlock()
		return &capacity.NotStoppableError{ID: id, Reason: "a spot instance is reclaimed, not stopped"}
	case state != capacity.StateRunning:
		c.mu.Unlock()
		return nil // stopped already, or starting again
	}
	inst.state = capacity.StateStopped
	c.mu.Unlock()
	_ = c.launcher.Halt(id)
	c.log.Info("instance stopped", zap.String("instance", id))
	return nil
}

// Start implements capacity.Stopper: after the start time, the agent
// starts again in the instance's own scratch space.
func (c *Cloud) Start(ctx context.Context, id string) (capacity.Instance, error) {
	c.mu.Lock()
	inst, ok := c.instances[id]
	switch {
	case !ok || c.stateLocked(inst) == capacity.StateTerminated:
		c.mu.Unlock()
		return capacity.Instance{}, &capacity.NotFoundError{ID: id}
	case inst.state != capacity.StateStopped:
		c.mu.Unlock()
		return inst.Instance, nil
	}
	inst.state = capacity.StatePending
	c.mu.Unlock()
	wait := c.cfg.StartTime
	if wait == 0 {
		wait = DefaultStartTime
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		c.setState(inst, capacity.StateStopped)
		return capacity.Instance{}, ctx.Err()
	}
	if err := c.launcher.Start(ctx, id); err != nil {
		c.setState(inst, capacity.StateStopped)
		return capacity.Instance{}, capacity.NewError(capacity.InitFailure, inst.Offering, "", "%v", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.instances[id]; !ok {
		// Released while it started: its agent goes too.
		_ = c.launcher.Stop(id)
		return capacity.Instance{}, &capacity.NotFoundError{ID: id}
	}
	inst.state = capacity.StateRunning
	c.log.Info("instance started", zap.String("instance", id))
	return inst.Instance, nil
}

func (c *Cloud) setState(inst *instance, s capacity.State) {
	c.mu.Lock()
	inst.state = s
	c.mu.Unlock()
}

// ListStopped implements capacity.Stopper.
func (c *Cloud) ListStopped(_ context.Context, tags map[string]string) ([]capacity.Instance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []capacity.Instance
	for _, inst := range c.instances {
		if inst.state == capacity.StateStopped && HasTags(inst.Tags, tags) {
			out = append(out, inst.Instance)
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
