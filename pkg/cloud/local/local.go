// Package local is a cloud made of this machine: each instance it
// "launches" is a real node-agent process serving its own task queue, with
// its own instance metadata endpoint for interruption notices, or, with
// LauncherConfig.StartVirtual, a virtual instance: the same node agent
// inside this process, hearing its notices in-process. It is the simplest
// provider (unlimited stock unless capped) and the place where preemptions
// are injected by hand; its Launcher is the machine side of every
// simulated cloud.
package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/metadata"
	"refuel/pkg/spec"
)

// ProviderName is how JobSpecs name this cloud in resources.providers.
const ProviderName = "local"

// Config configures a local cloud. Zero values mean the defaults noted.
type Config struct {
	LauncherConfig
	// Name is the provider's name; default ProviderName. The base group's
	// machines run as a local cloud of their own, named for the group's
	// provider.
	Name string
	// Offerings are what the cloud sells; default DefaultOfferings().
	Offerings []capacity.Offering
	// Stock caps running instances per offering key; missing means unlimited.
	Stock map[string]int
	// Now is the clock; default time.Now.
	Now func() time.Time
	// StartTime is how long starting a stopped instance takes; default
	// DefaultStartTime.
	StartTime time.Duration
	// VolumePricePerHour is what a stopped instance costs an hour; default
	// DefaultVolumePricePerHour.
	VolumePricePerHour float64
}

// DefaultOfferings is a small catalogue shaped like a real one: one GPU
// type in two zones, each on spot and on-demand at p3.2xlarge-like prices.
func DefaultOfferings() []capacity.Offering {
	var out []capacity.Offering
	for _, zone := range []string{"local-a", "local-b"} {
		out = append(out,
			capacity.Offering{Provider: ProviderName, InstanceType: "gpu.1x", Zone: zone, Market: capacity.Spot, GPUs: 1, PricePerHour: 0.9701},
			capacity.Offering{Provider: ProviderName, InstanceType: "gpu.1x", Zone: zone, Market: capacity.OnDemand, GPUs: 1, PricePerHour: 3.06},
		)
	}
	return out
}

// Cloud is the local provider. Safe for concurrent use.
type Cloud struct {
	cfg      Config
	launcher *Launcher
	log      *zap.Logger

	mu        sync.Mutex
	instances map[string]*instance
	byToken   map[string]string
	held      map[string]time.Time // zone/market → out of stock until then (HoldStock)
	closed    bool
}

type instance struct {
	capacity.Instance
	state capacity.State
}

var _ capacity.Provider = (*Cloud)(nil)

// New returns a local cloud.
func New(cfg Config) (*Cloud, error) {
	if cfg.Offerings == nil {
		cfg.Offerings = DefaultOfferings()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Name == "" {
		cfg.Name = ProviderName
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	l, err := NewLauncher(cfg.LauncherConfig)
	if err != nil {
		return nil, fmt.Errorf("local cloud: %w", err)
	}
	cfg.Stock = maps.Clone(cfg.Stock) // SetStock changes the cloud's own
	return &Cloud{cfg: cfg, launcher: l, log: cfg.Logger.Named("local-cloud"), instances: map[string]*instance{}, byToken: map[string]string{}}, nil
}

// SetStock caps the running instances of an offering from now on, as a
// market whose stock comes and goes would; a negative n lifts the cap.
// Instances already running over a lowered cap keep running.
func (c *Cloud) SetStock(key string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n < 0 {
		delete(c.cfg.Stock, key)
		return
	}
	if c.cfg.Stock == nil {
		c.cfg.Stock = map[string]int{}
	}
	c.cfg.Stock[key] = n
}

// Name implements capacity.Provider.
func (c *Cloud) Name() string { return c.cfg.Name }

// Offerings implements capacity.Provider.
func (c *Cloud) Offerings(_ context.Context, r spec.Resources) ([]capacity.Offering, error) {
	return capacity.Match(c.cfg.Offerings, r), nil
}

// Acquire implements capacity.Provider: it walks the offerings in order and
// launches an agent process on the first whose stock is not exhausted.
func (c *Cloud) Acquire(ctx context.Context, req capacity.Request) (capacity.Instance, error) {
	c.mu.Lock()
	if id, ok := c.byToken[req.IdempotencyToken()]; ok {
		inst := c.instances[id]
		c.mu.Unlock()
		if inst != nil {
			return inst.Instance, nil
		}
		return capacity.Instance{}, &capacity.NotFoundError{ID: id}
	}
	c.mu.Unlock()

	var failures []error
	for _, o := range req.Offerings {
		if !c.sells(o) {
			failures = append(failures, c.notSold(o))
			continue
		}
		inst, err := c.launch(ctx, req, o)
		if err == nil {
			return inst, nil
		}
		failures = append(failures, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(failures) == 0 {
		return capacity.Instance{}, capacity.NewError(capacity.SpecMismatch, capacity.Offering{Provider: c.cfg.Name}, "", "the request named no offerings")
	}
	return capacity.Instance{}, errors.Join(failures...)
}

func (c *Cloud) sells(o capacity.Offering) bool {
	for _, s := range c.cfg.Offerings {
		if s.Key() == o.Key() {
			return true
		}
	}
	return false
}

// notSold explains an offering the cloud does not sell: an instance type
// it has nowhere is configuration (no retry cures it, someone must fix
// the spec or the pools file); a type it has, elsewhere or on another
// market, is a spec mismatch.
func (c *Cloud) notSold(o capacity.Offering) *capacity.Error {
	var types []string
	for _, s := range c.cfg.Offerings {
		if s.InstanceType == o.InstanceType {
			return capacity.NewError(capacity.SpecMismatch, o, "", "the %s cloud does not sell %s", c.cfg.Name, o.Key())
		}
		if !slices.Contains(types, s.InstanceType) {
			types = append(types, s.InstanceType)
		}
	}
	return capacity.NewError(capacity.Config, o, "InvalidParameterValue", "the %s cloud has no instance type %q (it has %s): fix resources.instance_types or the pools file",
		c.cfg.Name, o.InstanceType, strings.Join(types, ", "))
}

func (c *Cloud) launch(ctx context.Context, req capacity.Request, o capacity.Offering) (capacity.Instance, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return capacity.Instance{}, capacity.NewError(capacity.Unknown, o, "", "the local cloud is shutting down")
	}
	if until, ok := c.held[o.Zone+"/"+string(o.Market)]; ok && c.cfg.Now().Before(until) {
		c.mu.Unlock()
		return capacity.Instance{}, capacity.NewError(capacity.NoCapacity, o, "InsufficientInstanceCapacity", "held out of stock until %s", until.UTC().Format(time.TimeOnly))
	}
	if limit, ok := c.cfg.Stock[o.Key()]; ok && c.runningLocked(o.Key()) >= limit {
		c.mu.Unlock()
		return capacity.Instance{}, capacity.NewError(capacity.NoCapacity, o, "InsufficientInstanceCapacity", "all %d in stock are running", limit)
	}
	id := newID(c.cfg.Name + "-" + o.Zone)
	if node := req.Tags[capacity.TagNode]; node != "" {
		id = newID(node)
	}
	inst := &instance{
		Instance: capacity.Instance{ID: id, Offering: o, TaskQueue: TaskQueueFor(id), Address: metadata.Loopback, LaunchedAt: c.cfg.Now(), Tags: RequestTags(req)},
		state:    capacity.StatePending,
	}
	// Reserve the stock and the token before the slow start, so neither a
	// concurrent request nor a retry launches a second machine.
	c.instances[id] = inst
	c.byToken[req.IdempotencyToken()] = id
	c.mu.Unlock()

	if err := c.launcher.Start(ctx, id); err != nil {
		c.mu.Lock()
		delete(c.instances, id)
		delete(c.byToken, req.IdempotencyToken())
		c.mu.Unlock()
		return capacity.Instance{}, capacity.NewError(capacity.InitFailure, o, "", "%v", err)
	}
	c.mu.Lock()
	if inst.state == capacity.StatePending {
		inst.state = capacity.StateRunning
	}
	c.mu.Unlock()
	c.log.Info("instance launched", zap.String("instance", id), zap.String("offering", o.Key()), zap.String("run", req.RunID))
	return inst.Instance, nil
}

func (c *Cloud) runningLocked(key string) int {
	n := 0
	for _, inst := range c.instances {
		if inst.Offering.Key() == key && inst.state != capacity.StateTerminated {
			n++
		}
	}
	return n
}

// newID names an instance: the prefix and 12 random hex digits. A
// counter would start again with the process, and a stale Release from
// before a restart (or from another worker on the same cluster) would end
// another run's instance; 48 random bits do not repeat.
func newID(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// RequestTags are the tags an instance launched for req carries: refuel's
// own, so a janitor can find it, and the request's.
func RequestTags(req capacity.Request) map[string]string {
	tags := map[string]string{
		capacity.TagManagedBy: capacity.ManagedBy,
		capacity.TagRun:       req.RunID,
		capacity.TagAttempt:   fmt.Sprint(req.Attempt),
	}
	if req.Identity != "" {
		tags[capacity.TagIdentity] = req.Identity
	}
	for k, v := range req.Tags {
		tags[k] = v
	}
	return tags
}

// Release implements capacity.Provider.
func (c *Cloud) Release(_ context.Context, id string) error {
	c.mu.Lock()
	_, ok := c.instances[id]
	delete(c.instances, id)
	c.mu.Unlock()
	if !ok {
		return &capacity.NotFoundError{ID: id}
	}
	_ = c.launcher.Stop(id)
	c.log.Info("instance released", zap.String("instance", id))
	return nil
}

// Interrupt serves an interruption notice to an instance and takes it
// away after grace, the way a spot market reclaims capacity.
func (c *Cloud) Interrupt(id string, grace time.Duration) (time.Time, error) {
	c.mu.Lock()
	inst, ok := c.instances[id]
	if !ok || c.stateLocked(inst) == capacity.StateTerminated {
		c.mu.Unlock()
		return time.Time{}, &capacity.NotFoundError{ID: id}
	}
	inst.state = capacity.StateInterrupted
	c.mu.Unlock()
	now := c.cfg.Now()
	return now, c.launcher.Interrupt(id, now.Add(grace))
}

// HoldStock takes the stock of an instance's market in its zone away for
// d, every offering's: no launch there succeeds until then. Drills use it
// to take a node while its zone has nothing to replace it with.
func (c *Cloud) HoldStock(id string, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	inst, ok := c.instances[id]
	if !ok {
		return &capacity.NotFoundError{ID: id}
	}
	if c.held == nil {
		c.held = map[string]time.Time{}
	}
	c.held[inst.Offering.Zone+"/"+string(inst.Offering.Market)] = c.cfg.Now().Add(d)
	return nil
}

// stateLocked is the instance's state, terminated once its agent is gone.
func (c *Cloud) stateLocked(inst *instance) capacity.State {
	if inst.state != capacity.StatePending && inst.state != capacity.StateStopped && !c.launcher.Alive(inst.ID) {
		return capacity.StateTerminated
	}
	return inst.state
}

// Describe implements capacity.Provider.
func (c *Cloud) Describe(_ context.Context, id string) (capacity.Instance, capacity.State, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	inst, ok := c.instances[id]
	if !ok {
		return capacity.Instance{}, capacity.StateTerminated, &capacity.NotFoundError{ID: id}
	}
	return inst.Instance, c.stateLocked(inst), nil
}

// List implements capacity.Provider.
func (c *Cloud) List(_ context.Context, tags map[string]string) ([]capacity.Instance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []capacity.Instance
	for _, inst := range c.instances {
		if st := c.stateLocked(inst); st != capacity.StateTerminated && st != capacity.StateStopped && HasTags(inst.Tags, tags) {
			out = append(out, inst.Instance)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// HasTags reports whether have includes every tag of want.
func HasTags(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// Close terminates every instance: a worker that stops leaves nothing running.
func (c *Cloud) Close() error {
	c.mu.Lock()
	c.closed = true
	c.instances = map[string]*instance{}
	c.mu.Unlock()
	c.launcher.Close()
	return nil
}
