package sim

import (
	"context"
	"time"

	"go.uber.org/zap"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/local"
)

// Stopping and starting on-demand instances, as EC2's StopInstances and
// StartInstances: a stopped instance keeps its volume (and the model on
// it) and is paid at VolumePricePerHour; it starts in StartTime, then its
// agent starts again. It keeps its place in its pool's stock, so a start
// does not fail for want of capacity.
const (
	// DefaultStartTime is about what EC2 takes to bring a stopped GPU
	// instance back to a booted one.
	DefaultStartTime = 40 * time.Second
	// DefaultVolumePricePerHour is a 200 GB gp3 volume's price.
	DefaultVolumePricePerHour = 0.022
)

var _ capacity.Stopper = (*Cloud)(nil)

// Stop implements capacity.Stopper.
func (c *Cloud) Stop(_ context.Context, id string) error {
	_, err := c.StopInstance(id)
	return err
}

// StopInstance stops a running on-demand instance and returns its state
// before: StopInstances' answer.
func (c *Cloud) StopInstance(id string) (previous capacity.State, err error) {
	c.mu.Lock()
	now := c.cfg.Now()
	stops := c.refreshLocked(now)
	inst, ok := c.instances[id]
	switch {
	case !ok || inst.state == capacity.StateTerminated:
		err = &capacity.NotFoundError{ID: id}
	case inst.Offering.Market == capacity.Spot:
		err = &capacity.NotStoppableError{ID: id, Reason: "a spot instance is reclaimed, not stopped"}
	case inst.state == capacity.StateRunning:
		previous = inst.state
		inst.state = capacity.StateStopped
		if inst.agent {
			inst.agent = false
			stops = append(stops, id)
		}
	default:
		previous = inst.state // stopped already, or starting again
	}
	c.mu.Unlock()
	c.stopAgents(stops)
	if err == nil && previous == capacity.StateRunning {
		c.log.Info("instance stopped", zap.String("instance", id))
	}
	return previous, err
}

// Start implements capacity.Stopper: it returns once the instance runs
// and its agent serves its task queue.
func (c *Cloud) Start(ctx context.Context, id string) (capacity.Instance, error) {
	_, done, err := c.StartInstance(id)
	if err != nil {
		return capacity.Instance{}, err
	}
	select {
	case err = <-done:
	case <-ctx.Done():
		return capacity.Instance{}, ctx.Err()
	}
	if err != nil {
		return capacity.Instance{}, err
	}
	st, err := c.Status(id)
	return st.Instance, err
}

// StartInstance starts a stopped instance and returns at once, as
// StartInstances does: the instance is pending for StartTime, then its
// agent starts and it runs; done says how that ended. Starting one that
// is not stopped changes nothing (done is closed at once).
func (c *Cloud) StartInstance(id string) (previous capacity.State, done <-chan error, err error) {
	ch := make(chan error, 1)
	c.mu.Lock()
	stops := c.refreshLocked(c.cfg.Now())
	inst, ok := c.instances[id]
	switch {
	case !ok || inst.state == capacity.StateTerminated:
		err = &capacity.NotFoundError{ID: id}
	case inst.state == capacity.StateStopped && c.closed:
		err = &capacity.NotFoundError{ID: id} // the sim is closing: nothing starts
	case inst.state == capacity.StateStopped:
		previous = inst.state
		inst.state = capacity.StatePending
		inst.LaunchedAt = c.cfg.Now()
		c.starts.Add(1)
		go func() {
			defer c.starts.Done()
			ch <- c.resume(inst)
		}()
	default:
		previous = inst.state
		close(ch)
	}
	c.mu.Unlock()
	c.stopAgents(stops)
	return previous, ch, err
}

// resume waits the start time, then boots the instance's agent again.
func (c *Cloud) resume(inst *instance) error {
	t := time.NewTimer(c.cfg.StartTime)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.closing.Done():
		c.mu.Lock()
		c.endLocked(inst, c.cfg.Now(), ReasonUserShutdown)
		c.mu.Unlock()
		return &capacity.NotFoundError{ID: inst.ID}
	}
	if err := c.boot(c.closing, inst); err != nil {
		return err
	}
	c.log.Info("instance started", zap.String("instance", inst.ID))
	return nil
}

// ListStopped implements capacity.Stopper.
func (c *Cloud) ListStopped(_ context.Context, tags map[string]string) ([]capacity.Instance, error) {
	if tags == nil {
		tags = map[string]string{capacity.TagManagedBy: capacity.ManagedBy}
	}
	var out []capacity.Instance
	for _, st := range c.Instances() {
		if st.State == capacity.StateStopped && local.HasTags(st.Tags, tags) {
			out = append(out, st.Instance)
		}
	}
	return out, nil
}

// StoppedPricePerHour implements capacity.Stopper: every instance's
// volume costs the same.
func (c *Cloud) StoppedPricePerHour(capacity.Offering) float64 { return c.cfg.VolumePricePerHour }
