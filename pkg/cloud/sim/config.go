package sim

import (
	"fmt"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"refuel/pkg/cloud/local"
	"refuel/pkg/trace"
)

// Pool is one instance type in one zone: the unit of stock and price.
type Pool struct {
	Zone         string `json:"zone"`
	InstanceType string `json:"instance_type"`
}

func (p Pool) String() string { return p.Zone + "/" + p.InstanceType }

// PoolConfig says what a pool sells. An instance type is sold in a zone
// only if a pool says so; asking for it anywhere else is Unsupported
// (spec mismatch), which is how spec rules are configured per zone.
type PoolConfig struct {
	Pool
	// Spot is the pool's availability trace: at each tick its point is how
	// many spot instances the pool holds; in a trace of one node (every
	// point 0 or 1) a 1 holds any number, a 0 none. Nil means the pool
	// sells no spot.
	Spot *trace.Trace
	// SpotPrice is the starting spot price; 0 means the catalogue's.
	SpotPrice float64
	// OnDemandPrice is the pool's on-demand price, its region's; 0 means
	// the catalogue's.
	OnDemandPrice float64
	// OnDemandStock caps running on-demand instances; 0 means unlimited.
	OnDemandStock int
	// NoticeWindow is the pool's time between a spot interruption notice
	// and the instance being taken, where its cloud differs (Compute
	// Engine gives 30 s); 0 means Config.NoticeWindow.
	NoticeWindow time.Duration
}

// Quotas are the account's limits; 0 means unlimited.
type Quotas struct {
	// OnDemandVCPUs and OnDemandGPUs cap what running on-demand instances
	// hold together (EC2's VcpuLimitExceeded).
	OnDemandVCPUs int
	OnDemandGPUs  int
	// SpotInstances caps running spot instances
	// (MaxSpotInstanceCountExceeded).
	SpotInstances int
}

// Config configures a simulated cloud. Zero values mean the defaults noted.
type Config struct {
	// Launcher starts a real node agent per instance, as in the local
	// cloud: a process, or virtual with StartVirtual. Neither
	// AgentCommand nor StartVirtual runs no agents: instances are records
	// only, for fast tests of the market.
	Launcher local.LauncherConfig
	// Catalogue is what the pools may sell; default DefaultCatalogue().
	Catalogue []InstanceType
	// Pools are what is sold where (required).
	Pools []PoolConfig
	// Tick is the market's step; default the smallest gap among the pools'
	// traces (10 minutes without traces). A pool's point at tick k is its
	// trace's point at k×Tick, so traces of different gaps mix; past its
	// end a trace plays again from the start, so the market never dies.
	Tick time.Duration
	// Speed is how many ticks pass per wall-clock second; 0 means the
	// market stands still until Advance is called.
	Speed float64
	// StartTick is the trace tick the market opens at.
	StartTick int
	// NoticeWindow is the wall time between a spot interruption notice
	// and the instance being taken; default 2 minutes, as on EC2.
	NoticeWindow time.Duration
	// RestartOverhead is the market time a run counts for each start of an
	// instance (see capacity.MarketClock); default DefaultRestartOverhead.
	RestartOverhead time.Duration
	Quotas          Quotas
	// APIRateLimit throttles calls (RequestLimitExceeded) beyond this many
	// per second, with bursts of APIBurst (default the rate, at least 1);
	// 0 means no limit.
	APIRateLimit float64
	APIBurst     int
	// Now is the clock of every timestamp the sim shows: launch times, spot
	// price history and notices. Default time.Now; a fake clock suits only
	// runs without agents, since agents and their kills run on the wall
	// clock.
	Now    func() time.Time
	Logger *zap.Logger
}

// FromTraces builds a config whose pools are the availability traces found
// under dir (at any depth), each file named ZONE_GPU_COUNT.json or
// ZONE_TYPE.json and mapped to an instance type of the catalogue (nil
// means DefaultCatalogue(); see typeForTrace for the mapping). A file whose
// name maps to no type is skipped, and reported in skipped, since trace
// collections also hold other clouds' machines; a directory where nothing
// maps, a bad trace file or two traces for one pool are errors.
func FromTraces(dir string, catalogue []InstanceType) (cfg Config, skipped []string, err error) {
	paths, err := trace.Find(dir)
	if err != nil {
		return Config{}, nil, err
	}
	return fromTraces(paths, trace.Load, dir, catalogue)
}

// fromTraces builds the pools of FromTraces from the trace files at paths,
// read by load; dir names the collection in errors.
func fromTraces(paths []string, load func(string) (*trace.Trace, error), dir string, catalogue []InstanceType) (cfg Config, skipped []string, err error) {
	if catalogue == nil {
		catalogue = DefaultCatalogue()
	}
	from := map[Pool]string{}
	for _, path := range paths {
		t, err := load(path)
		if err != nil {
			return Config{}, nil, err
		}
		it, ok := typeForTrace(catalogue, t.Instance, t.Count)
		if !ok {
			skipped = append(skipped, fmt.Sprintf("%s: no instance type in the catalogue for %q", path, filepath.Base(path)))
			continue
		}
		p := Pool{Zone: t.Zone, InstanceType: it.Name}
		if first, dup := from[p]; dup {
			return Config{}, nil, fmt.Errorf("two traces for pool %s: %s and %s; point at one collection", p, first, path)
		}
		from[p] = path
		cfg.Pools = append(cfg.Pools, PoolConfig{Pool: p, Spot: t})
	}
	if len(cfg.Pools) == 0 {
		return Config{}, skipped, fmt.Errorf("no trace under %s names a zone and an instance type of the catalogue (ZONE_GPU_COUNT.json, such as us-west-2a_v100_1.json)", dir)
	}
	cfg.Catalogue = catalogue
	return cfg, skipped, nil
}

func (cfg Config) withDefaults() (Config, error) {
	if cfg.Catalogue == nil {
		cfg.Catalogue = DefaultCatalogue()
	}
	if len(cfg.Pools) == 0 {
		return cfg, fmt.Errorf("sim: no pools: the cloud would sell nothing")
	}
	if cfg.Speed < 0 || cfg.StartTick < 0 || cfg.Tick < 0 || cfg.NoticeWindow < 0 || cfg.RestartOverhead < 0 || cfg.APIRateLimit < 0 {
		return cfg, fmt.Errorf("sim: Speed, StartTick, Tick, NoticeWindow, RestartOverhead and APIRateLimit must not be negative")
	}
	if cfg.Tick == 0 {
		for _, p := range cfg.Pools {
			if p.Spot != nil && (cfg.Tick == 0 || p.Spot.Gap < cfg.Tick) {
				cfg.Tick = p.Spot.Gap
			}
		}
		if cfg.Tick == 0 {
			cfg.Tick = 10 * time.Minute
		}
	}
	if cfg.NoticeWindow == 0 {
		cfg.NoticeWindow = 2 * time.Minute
	}
	if cfg.RestartOverhead == 0 {
		cfg.RestartOverhead = DefaultRestartOverhead
	}
	if cfg.APIRateLimit > 0 && cfg.APIBurst <= 0 {
		cfg.APIBurst = max(1, int(cfg.APIRateLimit))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return cfg, nil
}
