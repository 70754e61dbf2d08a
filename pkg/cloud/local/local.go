// Package local is a cloud made of this machine: each instance it
// "launches" is a real node-agent process serving its own task queue, with
// its own instance metadata endpoint for interruption notices. It is the
// embedded default, and the place where preemptions are injected by hand.
package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/metadata"
	"refuel/pkg/spec"
)

// ProviderName is how JobSpecs name this cloud in resources.providers.
const ProviderName = "local"

// AgentLaunch says how to start the node agent of one instance.
type AgentLaunch struct {
	InstanceID       string
	TaskQueue        string
	MetadataEndpoint string
	Dir              string // the instance's own scratch directory
	ReadyFile        string // the agent creates it once it serves its task queue
}

// Config configures a local cloud. Zero values mean the defaults noted.
type Config struct {
	// Offerings are what the cloud sells; default DefaultOfferings().
	Offerings []capacity.Offering
	// Stock caps running instances per offering key; missing means unlimited.
	Stock map[string]int
	// AgentCommand returns the argv that starts a node agent.
	AgentCommand func(AgentLaunch) []string
	// Dir holds the instances' scratch directories; default a temp dir.
	Dir string
	// ReadyTimeout bounds how long an agent may take to come up before the
	// launch counts as an initialisation failure; default 60s.
	ReadyTimeout time.Duration
	// Now is the clock; default time.Now.
	Now    func() time.Time
	Logger *zap.Logger
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
	cfg    Config
	log    *zap.Logger
	ownDir bool // Dir was made by New, so Close removes it

	mu        sync.Mutex
	seq       int
	instances map[string]*instance
	byToken   map[string]string
	closed    bool
}

type instance struct {
	capacity.Instance
	state  capacity.State
	cmd    *exec.Cmd
	meta   *metadata.Service
	dir    string
	exited chan struct{}
	kill   *time.Timer
}

var _ capacity.Provider = (*Cloud)(nil)

// New returns a local cloud.
func New(cfg Config) (*Cloud, error) {
	if cfg.AgentCommand == nil {
		return nil, errors.New("local cloud: AgentCommand is required: it says how to start a node agent")
	}
	if cfg.Offerings == nil {
		cfg.Offerings = DefaultOfferings()
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 60 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	ownDir := cfg.Dir == ""
	if ownDir {
		d, err := os.MkdirTemp("", "refuel-local-")
		if err != nil {
			return nil, err
		}
		cfg.Dir = d
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("local cloud: instance directory: %w", err)
	}
	return &Cloud{cfg: cfg, ownDir: ownDir, log: cfg.Logger.Named("local-cloud"), instances: map[string]*instance{}, byToken: map[string]string{}}, nil
}

// Name implements capacity.Provider.
func (c *Cloud) Name() string { return ProviderName }

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
		return inst.Instance, nil
	}
	c.mu.Unlock()

	var failures []error
	for _, o := range req.Offerings {
		if !c.sells(o) {
			failures = append(failures, capacity.NewError(capacity.SpecMismatch, o, "", "the local cloud does not sell %s", o.Key()))
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
		return capacity.Instance{}, capacity.NewError(capacity.SpecMismatch, capacity.Offering{Provider: ProviderName}, "", "the request named no offerings")
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

func (c *Cloud) launch(ctx context.Context, req capacity.Request, o capacity.Offering) (capacity.Instance, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return capacity.Instance{}, capacity.NewError(capacity.Unknown, o, "", "the local cloud is shutting down")
	}
	if limit, ok := c.cfg.Stock[o.Key()]; ok && c.runningLocked(o.Key()) >= limit {
		c.mu.Unlock()
		return capacity.Instance{}, capacity.NewError(capacity.NoCapacity, o, "InsufficientInstanceCapacity", "all %d in stock are running", limit)
	}
	c.seq++
	id := fmt.Sprintf("local-%s-%d", o.Zone, c.seq)
	c.mu.Unlock()

	meta, err := metadata.Start(id)
	if err != nil {
		return capacity.Instance{}, capacity.NewError(capacity.InitFailure, o, "", "metadata endpoint: %v", err)
	}
	dir := filepath.Join(c.cfg.Dir, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		_ = meta.Close()
		return capacity.Instance{}, capacity.NewError(capacity.InitFailure, o, "", "scratch directory: %v", err)
	}
	launch := AgentLaunch{
		InstanceID:       id,
		TaskQueue:        TaskQueueFor(id),
		MetadataEndpoint: meta.Endpoint(),
		Dir:              dir,
		ReadyFile:        filepath.Join(dir, "agent.ready"),
	}
	argv := c.cfg.AgentCommand(launch)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	logf, err := os.Create(filepath.Join(dir, "agent.log"))
	if err == nil {
		cmd.Stdout, cmd.Stderr = logf, logf
	}
	// Own process group, so releasing the instance takes the trainer with
	// it; and die with us, so a crashed worker leaves no instance behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = meta.Close()
		return capacity.Instance{}, capacity.NewError(capacity.InitFailure, o, "", "start agent: %v", err)
	}
	inst := &instance{
		Instance: capacity.Instance{
			ID: id, Offering: o, TaskQueue: launch.TaskQueue, LaunchedAt: c.cfg.Now(), Tags: withRequestTags(req),
		},
		state: capacity.StatePending, cmd: cmd, meta: meta, dir: dir, exited: make(chan struct{}),
	}
	go func() {
		_ = cmd.Wait()
		if logf != nil {
			_ = logf.Close()
		}
		c.mu.Lock()
		inst.state = capacity.StateTerminated
		c.mu.Unlock()
		close(inst.exited)
	}()
	c.mu.Lock()
	c.instances[id] = inst
	c.byToken[req.IdempotencyToken()] = id
	c.mu.Unlock()

	if err := c.waitReady(ctx, inst, launch.ReadyFile); err != nil {
		_ = c.Release(context.Background(), id)
		c.mu.Lock()
		delete(c.byToken, req.IdempotencyToken())
		c.mu.Unlock()
		return capacity.Instance{}, capacity.NewError(capacity.InitFailure, o, "", "%v (agent log: %s)", err, filepath.Join(dir, "agent.log"))
	}
	c.mu.Lock()
	if inst.state == capacity.StatePending {
		inst.state = capacity.StateRunning
	}
	c.mu.Unlock()
	c.log.Info("instance launched", zap.String("instance", id), zap.String("offering", o.Key()), zap.String("run", req.RunID))
	return inst.Instance, nil
}

func (c *Cloud) waitReady(ctx context.Context, inst *instance, readyFile string) error {
	deadline := time.NewTimer(c.cfg.ReadyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(readyFile); err == nil {
			return nil
		}
		select {
		case <-inst.exited:
			return fmt.Errorf("node agent exited during start-up")
		case <-deadline.C:
			return fmt.Errorf("node agent not ready after %s", c.cfg.ReadyTimeout)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
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

func withRequestTags(req capacity.Request) map[string]string {
	tags := map[string]string{
		capacity.TagManagedBy: capacity.ManagedBy,
		capacity.TagRun:       req.RunID,
		capacity.TagAttempt:   fmt.Sprint(req.Attempt),
	}
	for k, v := range req.Tags {
		tags[k] = v
	}
	return tags
}

// TaskQueueFor is the task queue the agent of an instance serves.
func TaskQueueFor(instanceID string) string { return "refuel-node-" + instanceID }

// Release implements capacity.Provider.
func (c *Cloud) Release(_ context.Context, id string) error {
	c.mu.Lock()
	inst, ok := c.instances[id]
	if ok {
		delete(c.instances, id)
	}
	c.mu.Unlock()
	if !ok {
		return &capacity.NotFoundError{ID: id}
	}
	c.terminate(inst)
	c.log.Info("instance released", zap.String("instance", id))
	return nil
}

// terminate ends the agent's whole process group and waits for it.
func (c *Cloud) terminate(inst *instance) {
	if inst.kill != nil {
		inst.kill.Stop()
	}
	_ = syscall.Kill(-inst.cmd.Process.Pid, syscall.SIGKILL)
	<-inst.exited
	_ = inst.meta.Close()
	_ = os.RemoveAll(inst.dir)
}

// Interrupt serves an interruption notice to an instance and takes it
// away after grace, the way a spot market reclaims capacity.
func (c *Cloud) Interrupt(id string, grace time.Duration) (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	inst, ok := c.instances[id]
	if !ok || inst.state == capacity.StateTerminated {
		return time.Time{}, &capacity.NotFoundError{ID: id}
	}
	now := c.cfg.Now()
	inst.state = capacity.StateInterrupted
	inst.meta.Interrupt("terminate", now.Add(grace))
	inst.kill = time.AfterFunc(grace, func() {
		_ = syscall.Kill(-inst.cmd.Process.Pid, syscall.SIGKILL)
	})
	c.log.Info("interruption notice served", zap.String("instance", id), zap.Duration("grace", grace))
	return now, nil
}

// Describe implements capacity.Provider.
func (c *Cloud) Describe(_ context.Context, id string) (capacity.Instance, capacity.State, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	inst, ok := c.instances[id]
	if !ok {
		return capacity.Instance{}, capacity.StateTerminated, &capacity.NotFoundError{ID: id}
	}
	return inst.Instance, inst.state, nil
}

// List implements capacity.Provider.
func (c *Cloud) List(_ context.Context, tags map[string]string) ([]capacity.Instance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []capacity.Instance
	for _, inst := range c.instances {
		if inst.state != capacity.StateTerminated && hasTags(inst.Tags, tags) {
			out = append(out, inst.Instance)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func hasTags(have, want map[string]string) bool {
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
	all := make([]*instance, 0, len(c.instances))
	for id, inst := range c.instances {
		all = append(all, inst)
		delete(c.instances, id)
	}
	c.mu.Unlock()
	for _, inst := range all {
		c.terminate(inst)
	}
	if c.ownDir {
		_ = os.RemoveAll(c.cfg.Dir)
	}
	return nil
}
