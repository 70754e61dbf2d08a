package sim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/local"
	"refuel/pkg/cloud/metadata"
)

// Offer is one offering a launch may be placed on.
type Offer struct {
	Pool
	Market capacity.Market
	// MaxPrice is the most a spot instance may cost per hour; 0 means the
	// on-demand price, as on EC2.
	MaxPrice float64
}

// LaunchRequest asks for one instance.
type LaunchRequest struct {
	// Token makes the launch idempotent: a launch with the token of one
	// that succeeded returns that instance (even once it has ended), and
	// one racing with it waits for its outcome. A launch that failed
	// leaves the token free. Empty means no idempotency.
	Token string
	// Offers are tried in order; the first that can be filled is taken.
	Offers []Offer
	Tags   map[string]string
	// ID names the instance, as a Compute Engine instance is named by its
	// creator; empty means an EC2-shaped ID the sim chooses. An ID a live
	// instance holds fails the launch (ErrIDInUse); a terminated one's
	// record is forgotten for the new instance.
	ID string
	// Wait returns only once the instance's agent serves its task queue,
	// so an init failure is an error and the next offer is tried (the
	// Provider's contract). Otherwise Launch returns the pending instance
	// and the agent starts behind it; an init failure then shows as the
	// instance terminating with ReasonLaunchFailure (EC2's contract).
	Wait bool
	// Probe launches an instance only to learn that the pool has stock
	// (capacity.Request.Probe): it runs without an agent, as it is let go
	// at once.
	Probe bool
}

// claim is a token held by a launch; settled with the instance's id once
// the launch succeeded, removed if it failed.
type claim struct {
	token   string
	id      string
	settled bool
	done    chan struct{}
}

// ErrIDInUse says a launch named an instance ID that a live instance holds.
var ErrIDInUse = errors.New("instance ID in use")

// Launch places one instance on the first offer that can be filled. Each
// offer that cannot is a *capacity.Error with EC2's code, in order, joined
// with errors.Join. Unlike Acquire it is no API call of its own: callers
// serving an API count their calls with APICall.
func (c *Cloud) Launch(ctx context.Context, req LaunchRequest) (Status, error) {
	if len(req.Offers) == 0 {
		return Status{}, capacity.NewError(capacity.SpecMismatch, capacity.Offering{Provider: ProviderName}, "", "the launch names no offerings")
	}
	cl, held, err := c.claim(ctx, req.Token)
	if err != nil || cl == nil {
		return held, err
	}
	c.refresh() // stock held by instances that just ended is free again
	var errs []error
	for _, o := range req.Offers {
		inst, err := c.place(o, req)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !req.Wait {
			c.settle(cl, inst)
			st, _ := c.Status(inst.ID)
			go func() {
				defer c.starts.Done()
				_ = c.boot(c.closing, inst)
			}()
			return st, nil
		}
		err = c.boot(ctx, inst)
		c.starts.Done()
		if err == nil {
			c.settle(cl, inst)
			return c.Status(inst.ID)
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	c.settle(cl, nil)
	return Status{}, errors.Join(errs...)
}

// claim takes the token for a launch. When the token already names an
// instance it returns that instance's status and no claim; when another
// launch holds it, it waits for that launch to settle.
func (c *Cloud) claim(ctx context.Context, token string) (*claim, Status, error) {
	if token == "" {
		return &claim{}, Status{}, nil
	}
	for {
		c.mu.Lock()
		cl, held := c.claims[token]
		if !held {
			cl = &claim{token: token, done: make(chan struct{})}
			c.claims[token] = cl
			c.mu.Unlock()
			return cl, Status{}, nil
		}
		id, settled, done := cl.id, cl.settled, cl.done
		c.mu.Unlock()
		if settled {
			st, err := c.Status(id)
			if err == nil {
				return nil, st, nil
			}
			continue // forgotten meanwhile, with its claim: the token is free
		}
		select {
		case <-done:
		case <-ctx.Done():
			return nil, Status{}, ctx.Err()
		}
	}
}

// settle ends a claim: with the launched instance, or freeing the token.
func (c *Cloud) settle(cl *claim, inst *instance) {
	if cl.done == nil {
		return
	}
	c.mu.Lock()
	if inst != nil {
		cl.id, cl.settled = inst.ID, true
	} else {
		delete(c.claims, cl.token)
	}
	c.mu.Unlock()
	close(cl.done)
}

// place checks an offer against the spec rules, quotas, price and stock,
// in that order, and records a pending instance on it if all pass. A
// placed instance is counted in c.starts until booted.
func (c *Cloud) place(o Offer, req LaunchRequest) (*instance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pools[o.Pool]
	offering := capacity.Offering{Provider: ProviderName, InstanceType: o.InstanceType, Zone: o.Zone, Market: o.Market}
	if p != nil && (o.Market == capacity.Spot || o.Market == capacity.OnDemand) {
		offering = p.offering(o.Market)
	}
	fail := func(class capacity.Class, code, format string, args ...any) (*instance, error) {
		return nil, capacity.NewError(class, offering, code, format, args...)
	}
	if c.closed {
		return fail(capacity.Unknown, "", "the sim is shutting down")
	}
	if _, known := c.types[o.InstanceType]; !known || p == nil && c.elsewhereLocked(o.InstanceType) == "" {
		return fail(capacity.Config, CodeInvalidParameterValue, "Invalid value '%s' for InstanceType: the sim sells %s; fix resources.instance_types or the pools file.",
			o.InstanceType, c.soldLocked())
	}
	if p == nil {
		return fail(capacity.SpecMismatch, CodeUnsupported, "Your requested instance type (%s) is not supported in your requested Availability Zone (%s).%s",
			o.InstanceType, o.Zone, c.elsewhereLocked(o.InstanceType))
	}
	it := p.itype
	if until, ok := c.held[heldKey(o.Zone, o.Market)]; ok && c.cfg.Now().Before(until) {
		return fail(capacity.NoCapacity, CodeInsufficientCapacity,
			"We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). Our system will be working on provisioning additional capacity. (%s held out of stock until %s)",
			o.InstanceType, o.Zone, o.Market, until.UTC().Format(time.TimeOnly))
	}
	switch o.Market {
	case capacity.Spot:
		if p.Spot == nil {
			return fail(capacity.SpecMismatch, CodeUnsupported, "Spot instances of type %s are not offered in %s.", o.InstanceType, o.Zone)
		}
		if q := c.cfg.Quotas.SpotInstances; q > 0 {
			if n := c.countLocked(func(i *instance) bool { return i.Offering.Market == capacity.Spot }); n >= q {
				return fail(capacity.Quota, CodeMaxSpotInstances, "Max spot instance count exceeded: %d of %d running.", n, q)
			}
		}
		limit := o.MaxPrice
		if limit == 0 {
			limit = p.onDemandPrice()
		}
		if price := p.spotPrice(); price > limit {
			return fail(capacity.Price, CodeSpotMaxPriceTooLow, "Your Spot request price of %g is lower than the minimum required Spot request fulfillment price of %g.", limit, price)
		}
		stock := p.stock(c.tick, c.cfg.Tick)
		running := c.countLocked(func(i *instance) bool {
			return i.Offering.Market == capacity.Spot && holdsStock(i.state) && i.Offering.Zone == o.Zone && i.Offering.InstanceType == o.InstanceType
		})
		if running >= stock {
			return fail(capacity.NoCapacity, CodeInsufficientCapacity,
				"We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). Our system will be working on provisioning additional capacity. (spot stock %d at tick %d, %d running)",
				o.InstanceType, o.Zone, stock, c.tick, running)
		}
	case capacity.OnDemand:
		vcpus, gpus := c.onDemandUsageLocked()
		if q := c.cfg.Quotas.OnDemandVCPUs; q > 0 && vcpus+it.VCPUs > q {
			return fail(capacity.Quota, CodeVcpuLimitExceeded,
				"You have requested more vCPU capacity than your current vCPU limit of %d allows for the instance bucket that the specified instance type belongs to: %d in use, %s needs %d.", q, vcpus, it.Name, it.VCPUs)
		}
		if q := c.cfg.Quotas.OnDemandGPUs; q > 0 && gpus+it.GPUs > q {
			return fail(capacity.Quota, CodeVcpuLimitExceeded,
				"You have requested more GPU capacity than your current on-demand limit of %d GPUs allows: %d in use, %s needs %d.", q, gpus, it.Name, it.GPUs)
		}
		if s := p.OnDemandStock; s > 0 {
			if n := c.countLocked(func(i *instance) bool {
				return i.Offering.Market == capacity.OnDemand && i.Offering.Zone == o.Zone && i.Offering.InstanceType == o.InstanceType
			}); n >= s {
				return fail(capacity.NoCapacity, CodeInsufficientCapacity,
					"We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). Our system will be working on provisioning additional capacity. (on-demand stock %d, %d running)",
					o.InstanceType, o.Zone, s, n)
			}
		}
	default:
		return fail(capacity.SpecMismatch, CodeUnsupported, "The sim sells spot and on-demand capacity, not %q.", o.Market)
	}
	id := req.ID
	if id == "" {
		id = newID("i-")
	} else if old, ok := c.instances[id]; ok {
		if old.state != capacity.StateTerminated {
			return nil, fmt.Errorf("%w: %s", ErrIDInUse, id)
		}
		delete(c.instances, id)
		delete(c.endpoints, id)
	}
	c.seq++
	inst := &instance{
		Instance: capacity.Instance{ID: id, Offering: offering, TaskQueue: local.TaskQueueFor(id), Address: metadata.Loopback, LaunchedAt: c.cfg.Now(), Tags: maps.Clone(req.Tags)},
		seq:      c.seq, token: req.Token, state: capacity.StatePending, probe: req.Probe,
	}
	c.instances[id] = inst
	c.starts.Add(1)
	return inst, nil
}

// countLocked counts the instances not terminated that match.
func (c *Cloud) countLocked(match func(*instance) bool) int {
	n := 0
	for _, inst := range c.instances {
		if inst.state != capacity.StateTerminated && match(inst) {
			n++
		}
	}
	return n
}

// onDemandUsageLocked sums what running on-demand instances hold, for
// the account's quotas.
func (c *Cloud) onDemandUsageLocked() (vcpus, gpus int) {
	for _, inst := range c.instances {
		if inst.state != capacity.StateTerminated && inst.Offering.Market == capacity.OnDemand {
			vcpus += c.types[inst.Offering.InstanceType].VCPUs
			gpus += c.types[inst.Offering.InstanceType].GPUs
		}
	}
	return vcpus, gpus
}

// elsewhereLocked names the zones that do sell an instance type, the way
// EC2's Unsupported message does.
func (c *Cloud) elsewhereLocked(instanceType string) string {
	var zones []string
	for _, key := range c.order {
		if key.InstanceType == instanceType {
			zones = append(zones, key.Zone)
		}
	}
	if len(zones) == 0 {
		return ""
	}
	return " Please retry your request by choosing " + strings.Join(zones, ", ") + "."
}

// soldLocked lists the instance types some pool sells.
func (c *Cloud) soldLocked() string {
	var sold []string
	for _, key := range c.order {
		if !slices.Contains(sold, key.InstanceType) {
			sold = append(sold, key.InstanceType)
		}
	}
	slices.Sort(sold)
	return strings.Join(sold, ", ")
}

// boot brings a placed instance up: it is running once its agent serves
// its task queue (at once without agents) and terminated with
// ReasonLaunchFailure if that never happens.
func (c *Cloud) boot(ctx context.Context, inst *instance) error {
	c.mu.Lock()
	doomed := c.failInits > 0
	if doomed {
		c.failInits--
	}
	c.mu.Unlock()
	var err error
	switch {
	case doomed:
		err = errors.New("injected fault: the node agent never became ready")
	case c.launcher != nil && !inst.probe:
		err = c.startAgent(ctx, inst.ID)
	}
	c.mu.Lock()
	if err != nil {
		c.endLocked(inst, c.cfg.Now(), ReasonLaunchFailure)
		c.mu.Unlock()
		c.log.Warn("instance failed to initialise", zap.String("instance", inst.ID), zap.Error(err))
		return capacity.NewError(capacity.InitFailure, inst.Offering, CodeLaunchFailure, "instance %s never became ready: %v", inst.ID, err)
	}
	inst.agent = c.launcher != nil && !inst.probe
	switch inst.state {
	case capacity.StatePending:
		inst.state = capacity.StateRunning
	case capacity.StateInterrupted:
		// The notice came while the agent started: serve it now.
		if inst.agent {
			if err := c.launcher.Interrupt(inst.ID, inst.interruptAt); err != nil {
				c.log.Warn("cannot serve the notice to the agent", zap.String("instance", inst.ID), zap.Error(err))
			}
		}
	case capacity.StateTerminated:
		// Terminated while it started: its agent goes too.
		stop := inst.agent
		inst.agent = false
		c.mu.Unlock()
		if stop {
			_ = c.launcher.Stop(inst.ID)
		}
		return capacity.NewError(capacity.InitFailure, inst.Offering, CodeLaunchFailure, "instance %s was terminated while it started", inst.ID)
	}
	c.mu.Unlock()
	c.log.Info("instance launched", zap.String("instance", inst.ID), zap.String("offering", inst.Offering.Key()),
		zap.String("run", inst.Tags[capacity.TagRun]))
	return nil
}

// startAgent starts an instance's agent, giving up when the sim closes.
func (c *Cloud) startAgent(ctx context.Context, id string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.closing, cancel)
	defer stop()
	return c.launcher.Start(ctx, id)
}

// newID returns an EC2-shaped id: the prefix and 17 hex digits.
func newID(prefix string) string {
	b := make([]byte, 9)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)[:17]
}
