// Package sim is a simulated cloud whose spot market replays real
// availability traces (the shared/traces format): each pool (an instance
// type in a zone) holds as many spot instances as its trace's point at the
// current tick (a trace of one node, every point 0 or 1, holds as many as
// are asked for at its 1s, as starter sim reads it for a gang), and when
// the stock drops below what is running, the newest
// spot instances get an interruption notice and are taken after it. On top
// of stock it has on-demand and spot prices, per-account quotas, spec
// rules (a type sold only in some zones) and injectable faults: failed
// initialisation and API throttling. Failures are capacity.Errors carrying
// EC2's error codes.
//
// Its instances are real node-agent processes started by local.Launcher,
// as in the local cloud, so a run on the sim is the same run as anywhere
// else; only stock, prices, quotas, failures and notices come from the
// sim. With the launcher's StartVirtual they are virtual instead: the same
// agent code inside this process, one goroutine-cheap instance each.
// Package ec2api serves it over EC2's Query API.
package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/local"
	"refuel/pkg/spec"
)

// ProviderName is how JobSpecs name the simulated cloud in
// resources.providers.
const ProviderName = "sim"

// retention is how long a terminated instance stays visible, as on EC2.
const retention = time.Hour

// Cloud is the simulated cloud. Safe for concurrent use.
type Cloud struct {
	cfg      Config
	types    map[string]InstanceType
	pools    map[Pool]*pool
	order    []Pool // pools sorted by zone, then type
	launcher *local.Launcher
	limiter  *rate.Limiter
	log      *zap.Logger
	closing  context.Context // cancelled by Close: agents still starting give up
	shutdown context.CancelFunc
	clock    chan struct{} // closed once the market's clock stopped; nil if manual
	starts   sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	tick      int
	seq       int
	instances map[string]*instance
	claims    map[string]*claim
	failInits int
	throttle  int
	endpoints map[string]string    // instance → metadata endpoint, as launched
	held      map[string]time.Time // zone/market → out of stock until then (HoldStock)
	still     time.Time            // the market's clock stands still until then (HoldClock)
}

// Status is an instance as the sim sees it.
type Status struct {
	capacity.Instance
	State capacity.State `json:"state"`
	// Token is the idempotency token it was launched with.
	Token string `json:"token,omitempty"`
	// Reason says why the instance ended or is ending; zero while it runs
	// undisturbed.
	Reason StateReason `json:"reason,omitzero"`
	// InterruptAt is when a served interruption notice takes the instance;
	// zero without a notice.
	InterruptAt time.Time `json:"interrupt_at,omitzero"`
	// MetadataEndpoint serves the instance's metadata (its notices); empty
	// without agents.
	MetadataEndpoint string `json:"metadata_endpoint,omitempty"`
}

type instance struct {
	capacity.Instance
	seq         int
	token       string
	state       capacity.State
	reason      StateReason
	interruptAt time.Time
	endedAt     time.Time
	// agent is set while the launcher holds a started agent process for
	// the instance, which must be stopped when the instance ends.
	agent bool
	// probe is set on an instance launched only to learn the pool's stock:
	// it gets no agent.
	probe bool
}

var _ capacity.Provider = (*Cloud)(nil)

// New returns a simulated cloud; with Speed > 0 its market's clock runs
// until Close.
func New(cfg Config) (*Cloud, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Cloud{
		cfg: cfg, types: map[string]InstanceType{}, pools: map[Pool]*pool{}, log: cfg.Logger.Named("sim-cloud"),
		tick: cfg.StartTick, instances: map[string]*instance{}, claims: map[string]*claim{}, endpoints: map[string]string{},
	}
	for _, t := range cfg.Catalogue {
		c.types[t.Name] = t
	}
	now := cfg.Now()
	for _, pc := range cfg.Pools {
		it, ok := c.types[pc.InstanceType]
		switch {
		case !ok:
			return nil, fmt.Errorf("sim: pool %s sells %q, which is not in the catalogue", pc.Pool, pc.InstanceType)
		case c.pools[pc.Pool] != nil:
			return nil, fmt.Errorf("sim: pool %s is configured twice", pc.Pool)
		case pc.Spot != nil && len(pc.Spot.Points) == 0:
			return nil, fmt.Errorf("sim: pool %s has an empty trace", pc.Pool)
		}
		if pc.SpotPrice == 0 {
			pc.SpotPrice = it.SpotPrice
		}
		p := &pool{PoolConfig: pc, itype: it, prices: []PricePoint{{Time: now, Price: pc.SpotPrice}}, everyNode: pc.Spot != nil && pc.Spot.OneNode()}
		p.last = p.point(c.tick, cfg.Tick)
		c.pools[pc.Pool] = p
		c.order = append(c.order, pc.Pool)
	}
	sort.Slice(c.order, func(i, j int) bool {
		a, b := c.order[i], c.order[j]
		return a.Zone < b.Zone || a.Zone == b.Zone && a.InstanceType < b.InstanceType
	})
	if cfg.APIRateLimit > 0 {
		c.limiter = rate.NewLimiter(rate.Limit(cfg.APIRateLimit), cfg.APIBurst)
	}
	if cfg.Launcher.AgentCommand != nil || cfg.Launcher.StartVirtual != nil {
		lc := cfg.Launcher
		// Learn each instance's metadata endpoint as its agent is launched:
		// the launcher keeps it to itself otherwise. Virtual instances have
		// none: their agents read their notices in-process.
		if cfg.Launcher.AgentCommand != nil {
			lc.AgentCommand = func(l local.AgentLaunch) []string {
				c.mu.Lock()
				c.endpoints[l.InstanceID] = l.MetadataEndpoint
				c.mu.Unlock()
				return cfg.Launcher.AgentCommand(l)
			}
		}
		if lc.Logger == nil {
			lc.Logger = cfg.Logger
		}
		lc.Placement = c.placement
		if c.launcher, err = local.NewLauncher(lc); err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
	}
	c.closing, c.shutdown = context.WithCancel(context.Background())
	if cfg.Speed > 0 {
		c.clock = make(chan struct{})
		go c.runClock(time.Duration(float64(time.Second) / cfg.Speed))
	}
	return c, nil
}

// Name implements capacity.Provider.
func (c *Cloud) Name() string { return ProviderName }

// Offerings implements capacity.Provider: every pool's on-demand offering,
// and its spot offering if it sells spot, at today's prices. Pools of
// Compute Engine's machine types are sold through its endpoint
// (gceapi) and the gce provider, not here.
func (c *Cloud) Offerings(_ context.Context, r spec.Resources) ([]capacity.Offering, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var all []capacity.Offering
	for _, key := range c.order {
		p := c.pools[key]
		if p.itype.Cloud == CloudGCE {
			continue
		}
		if p.Spot != nil {
			all = append(all, p.offering(capacity.Spot))
		}
		all = append(all, p.offering(capacity.OnDemand))
	}
	return capacity.Match(all, r), nil
}

// Acquire implements capacity.Provider. It counts as one API call for
// throttling, then tries the offerings in order; a spot market priced
// above req.MaxPricePerHour (or, without one, above on-demand) fails with
// SpotMaxPriceTooLow.
func (c *Cloud) Acquire(ctx context.Context, req capacity.Request) (capacity.Instance, error) {
	if err := c.APICall(); err != nil {
		return capacity.Instance{}, err
	}
	var errs []error
	var offers []Offer
	for _, o := range req.Offerings {
		if o.Provider != ProviderName {
			errs = append(errs, capacity.NewError(capacity.SpecMismatch, o, CodeUnsupported, "the sim does not sell offerings of provider %q", o.Provider))
			continue
		}
		offers = append(offers, Offer{Pool: Pool{Zone: o.Zone, InstanceType: o.InstanceType}, Market: o.Market, MaxPrice: req.MaxPricePerHour})
	}
	if len(offers) > 0 {
		st, err := c.Launch(ctx, LaunchRequest{Token: req.IdempotencyToken(), Offers: offers, Tags: local.RequestTags(req), Wait: true, Probe: req.Probe != ""})
		if err == nil {
			return st.Instance, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return capacity.Instance{}, capacity.NewError(capacity.SpecMismatch, capacity.Offering{Provider: ProviderName}, "", "the request named no offerings")
	}
	return capacity.Instance{}, errors.Join(errs...)
}

// Release implements capacity.Provider.
func (c *Cloud) Release(_ context.Context, id string) error {
	prev, err := c.end(id, ReasonUserShutdown)
	if err == nil && prev == capacity.StateTerminated {
		return &capacity.NotFoundError{ID: id}
	}
	if err == nil {
		c.log.Info("instance released", zap.String("instance", id))
	}
	return err
}

// Terminate ends an instance the way EC2's TerminateInstances does: one
// already terminated stays so (its previous state is terminated); an
// unknown one is *capacity.NotFoundError.
func (c *Cloud) Terminate(id string) (previous capacity.State, err error) {
	return c.end(id, ReasonUserShutdown)
}

func (c *Cloud) end(id string, reason StateReason) (capacity.State, error) {
	c.mu.Lock()
	now := c.cfg.Now()
	stops := c.refreshLocked(now)
	inst, ok := c.instances[id]
	if !ok {
		c.mu.Unlock()
		c.stopAgents(stops)
		return capacity.StateTerminated, &capacity.NotFoundError{ID: id}
	}
	prev := inst.state
	if c.endLocked(inst, now, reason) {
		stops = append(stops, id)
	}
	c.mu.Unlock()
	c.stopAgents(stops)
	return prev, nil
}

// Describe implements capacity.Provider. Terminated instances stay
// visible for an hour, as on EC2; then they are not found.
func (c *Cloud) Describe(_ context.Context, id string) (capacity.Instance, capacity.State, error) {
	st, err := c.Status(id)
	if err != nil {
		return capacity.Instance{}, capacity.StateTerminated, err
	}
	return st.Instance, st.State, nil
}

// List implements capacity.Provider; nil tags list the instances refuel
// manages, but for Compute Engine's, which the gce provider lists.
func (c *Cloud) List(_ context.Context, tags map[string]string) ([]capacity.Instance, error) {
	if tags == nil {
		tags = map[string]string{capacity.TagManagedBy: capacity.ManagedBy}
	}
	var out []capacity.Instance
	for _, st := range c.Instances() {
		if st.State != capacity.StateTerminated && st.State != capacity.StateStopped && local.HasTags(st.Tags, tags) && c.types[st.Offering.InstanceType].Cloud != CloudGCE {
			out = append(out, st.Instance)
		}
	}
	return out, nil
}

// placement is an instance's zone and whether its type is Compute
// Engine's, for its agent's metadata.
func (c *Cloud) placement(id string) (zone string, gce bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	inst, ok := c.instances[id]
	if !ok {
		return "", false
	}
	return inst.Offering.Zone, c.types[inst.Offering.InstanceType].Cloud == CloudGCE
}

// Status returns an instance as the sim sees it, or *capacity.NotFoundError.
func (c *Cloud) Status(id string) (Status, error) {
	c.refresh()
	c.mu.Lock()
	defer c.mu.Unlock()
	inst, ok := c.instances[id]
	if !ok {
		return Status{}, &capacity.NotFoundError{ID: id}
	}
	return c.statusLocked(inst), nil
}

// Instances returns every instance still visible, terminated ones
// included, oldest first.
func (c *Cloud) Instances() []Status {
	c.refresh()
	c.mu.Lock()
	defer c.mu.Unlock()
	all := make([]*instance, 0, len(c.instances))
	for _, inst := range c.instances {
		all = append(all, inst)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].seq < all[j].seq })
	out := make([]Status, len(all))
	for i, inst := range all {
		out[i] = c.statusLocked(inst)
	}
	return out
}

// Tag adds or replaces tags on an instance.
func (c *Cloud) Tag(id string, tags map[string]string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	inst, ok := c.instances[id]
	if !ok {
		return &capacity.NotFoundError{ID: id}
	}
	// A fresh map: statuses handed out earlier share the old one.
	merged := maps.Clone(inst.Tags)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, tags)
	inst.Tags = merged
	return nil
}

// Close stops the market's clock and terminates every instance: nothing
// the sim started outlives it.
func (c *Cloud) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.shutdown()
	if c.clock != nil {
		<-c.clock
	}
	c.starts.Wait()
	if c.launcher != nil {
		c.launcher.Close()
	}
	return nil
}

func (c *Cloud) statusLocked(inst *instance) Status {
	st := Status{Instance: inst.Instance, State: inst.state, Token: inst.token, Reason: inst.reason, InterruptAt: inst.interruptAt}
	st.Tags = maps.Clone(inst.Tags)
	if inst.state != capacity.StateTerminated {
		st.MetadataEndpoint = c.endpoints[inst.ID] // closed with the agent
	}
	return st
}

// noticeLocked serves an interruption notice: the instance is taken at at.
func (c *Cloud) noticeLocked(inst *instance, at time.Time, why string) {
	inst.state = capacity.StateInterrupted
	inst.interruptAt = at
	inst.reason = ReasonSpotTermination
	if inst.agent {
		if err := c.launcher.Interrupt(inst.ID, at); err != nil {
			c.log.Warn("cannot serve the notice to the agent", zap.String("instance", inst.ID), zap.Error(err))
		}
	}
	c.log.Info("interruption notice served", zap.String("instance", inst.ID), zap.String("pool", inst.Offering.Zone+"/"+inst.Offering.InstanceType),
		zap.String("why", why), zap.Time("terminate_at", at))
}

// endLocked terminates an instance for reason (an interrupted one keeps
// the notice's reason) and reports whether its agent must be stopped.
func (c *Cloud) endLocked(inst *instance, now time.Time, reason StateReason) bool {
	if inst.state == capacity.StateTerminated {
		return false
	}
	if inst.state != capacity.StateInterrupted || inst.reason == (StateReason{}) {
		inst.reason = reason
	}
	inst.state = capacity.StateTerminated
	inst.endedAt = now
	stop := inst.agent
	inst.agent = false
	return stop
}

// refreshLocked brings instance states up to now: notices that ran out
// end their instances, agents that died end theirs, and instances
// terminated long ago are forgotten. It returns the agents to stop.
func (c *Cloud) refreshLocked(now time.Time) []string {
	var stops []string
	for id, inst := range c.instances {
		switch {
		case inst.state == capacity.StateTerminated:
			if now.Sub(inst.endedAt) > retention {
				delete(c.instances, id)
				delete(c.endpoints, id)
				if cl := c.claims[inst.token]; cl != nil && cl.id == id {
					delete(c.claims, inst.token)
				}
			}
		case inst.state == capacity.StateInterrupted && !now.Before(inst.interruptAt):
			if c.endLocked(inst, now, ReasonSpotTermination) {
				stops = append(stops, id)
			}
		case inst.agent && !c.launcher.Alive(id):
			if c.endLocked(inst, now, ReasonInstanceShutdown) {
				stops = append(stops, id)
			}
		}
	}
	return stops
}

// refresh brings instance states up to now.
func (c *Cloud) refresh() {
	c.mu.Lock()
	stops := c.refreshLocked(c.cfg.Now())
	c.mu.Unlock()
	c.stopAgents(stops)
}

// stopAgents ends agent processes; called without the lock, since
// stopping waits for the process to exit.
func (c *Cloud) stopAgents(ids []string) {
	for _, id := range ids {
		_ = c.launcher.Stop(id)
	}
}
