package controlplane

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"refuel/activities"

	"go.uber.org/zap"

	"refuel/pkg/capacity"
	awscloud "refuel/pkg/cloud/aws"
	"refuel/pkg/cloud/gce"
	"refuel/pkg/cloud/local"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/cloud/sim/ec2api"
	"refuel/pkg/cloud/sim/gceapi"
	"refuel/pkg/trace"
)

// Provider names the control plane knows.
const (
	ProviderLocal = "local"
	ProviderSim   = "sim"
	ProviderAWS   = "aws"
	ProviderGCE   = gce.ProviderName
)

// SimConfig configures the trace-driven simulated cloud.
type SimConfig struct {
	// Traces is a directory of ZONE_GPU_COUNT.json availability traces;
	// "" replays the market built into the binary (sim.DefaultMarket).
	Traces string
	// Speed is trace ticks per wall second (0: the market stands still).
	Speed float64
	// Notice is the time between an interruption notice and the kill.
	Notice time.Duration
	// ServeEC2, when set, also serves the sim over EC2's Query API on this
	// address, so standard EC2 clients and the AWS provider can use it.
	ServeEC2 string
	// ServeGCE, when set, also serves the sim over Compute Engine's REST
	// API on this address, with the Compute Engine market built in beside
	// the EC2 one, so the gce provider and gcloud can use it.
	ServeGCE string
	// Quotas are the simulated account's limits (zero: unlimited).
	Quotas sim.Quotas
	// MarketTime makes deadline and flexible runs on the sim keep the
	// market's time: they decide with their policy at every tick and
	// count work, deadline and cost in market time, exactly as `starter
	// sim` replays them. With Speed 0 the runs drive the market's clock.
	// Off, runs keep wall time and the market merely moves under them.
	MarketTime bool
	// RestartOverhead is the market time each start of an instance costs
	// a run keeping market time (0: sim.DefaultRestartOverhead).
	RestartOverhead time.Duration
	// StartTime is how long starting a stopped instance takes (0:
	// sim.DefaultStartTime).
	StartTime time.Duration
	// ControlToken, when set, must come with every call to the EC2
	// endpoint's /sim/ controls, which can take any instance away; with
	// the AWS provider against a sim in another process, it is what this
	// control plane sends to that sim's controls.
	ControlToken string
	// Prices, when set, price each pool they know by its zone and
	// region (sim.Config.WithPrices); otherwise every pool charges its
	// instance type's catalogue prices.
	Prices *trace.Prices
}

// AgentLauncher is how every simulated cloud of this control plane starts
// node agents: this binary's agent subcommand, connected to the cluster.
func AgentLauncher(self []string, address, namespace, checkpointURL string, stepTime time.Duration, dir string, log *zap.Logger) local.LauncherConfig {
	return local.LauncherConfig{
		AgentCommand: func(l local.AgentLaunch) []string {
			return append(append([]string{}, self...), "agent",
				"--instance-id", l.InstanceID, "--task-queue", l.TaskQueue,
				"--metadata-endpoint", l.MetadataEndpoint, "--dir", l.Dir, "--ready-file", l.ReadyFile,
				"--temporal-address", address, "--namespace", namespace,
				"--checkpoint-url", checkpointURL, "--demo-step-time", stepTime.String())
		},
		Dir: dir, Logger: log,
	}
}

// providerSet is what startProviders built.
type providerSet struct {
	// providers are the clouds runs acquire from, in Config.Provider's
	// order: one market of every offering of each.
	providers    []capacity.Provider
	interrupters []activities.Interrupter
	clocks       map[string]capacity.MarketClock
	closers      []func()
}

// ProviderNames are the clouds a --provider value names: one, or several
// separated by commas (aws,gce), each once.
func ProviderNames(v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return []string{ProviderLocal}, nil
	}
	var names []string
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		switch {
		case n == "":
			return nil, fmt.Errorf("--provider %q: an empty name; give clouds separated by commas, e.g. aws,gce", v)
		case slices.Contains(names, n):
			return nil, fmt.Errorf("--provider %q: %s named twice; name each cloud once", v, n)
		}
		names = append(names, n)
	}
	if len(names) > 1 && (slices.Contains(names, ProviderLocal) || slices.Contains(names, ProviderSim)) {
		return nil, fmt.Errorf("--provider %q: local and sim are whole markets of their own; combine only public clouds (aws, gce), or run one of them alone", v)
	}
	return names, nil
}

// startProviders builds the configured providers. The aws provider with
// Sim.ServeEC2 set runs the simulated cloud in this process and talks to
// it over EC2's wire protocol, the way it would talk to EC2.
func (s *Stack) startProviders(ctx context.Context, launcher local.LauncherConfig) (providerSet, error) {
	var set providerSet
	names, err := ProviderNames(s.cfg.Provider)
	if err != nil {
		return set, err
	}
	for _, name := range names {
		p, err := s.startProvider(ctx, name, launcher, &set)
		if err != nil {
			return set, err
		}
		set.providers = append(set.providers, p)
	}
	return set, nil
}

// startProvider builds the provider called name.
func (s *Stack) startProvider(ctx context.Context, name string, launcher local.LauncherConfig, set *providerSet) (capacity.Provider, error) {
	cfg := s.cfg
	switch name {
	case ProviderLocal:
		c, err := local.New(local.Config{LauncherConfig: launcher, Offerings: cfg.Offerings, Stock: cfg.Stock})
		if err != nil {
			return nil, err
		}
		s.Cloud = c
		set.interrupters = append(set.interrupters, c)
		set.closers = append(set.closers, func() { _ = c.Close() })
		return c, nil
	case ProviderSim:
		c, err := s.startSim(launcher, set)
		if err != nil {
			return nil, err
		}
		return c, nil
	case ProviderAWS:
		awsCfg := cfg.AWS
		if cfg.Sim.ServeEC2 != "" {
			// The endpoint checks the provider's signatures as EC2 would,
			// with the static credentials it was given.
			s.ec2Credentials = awsCfg
			if _, err := s.startSim(launcher, set); err != nil {
				return nil, err
			}
			if awsCfg.Endpoint == "" {
				awsCfg.Endpoint = "http://" + s.EC2Endpoint
			}
		} else if awsCfg.Endpoint != "" {
			// An endpoint of its own is a sim in another process (worker
			// ec2-sim), whose controls serve the notices of drills; one
			// that is no sim answers that it knows no such instance.
			set.interrupters = append(set.interrupters, sim.Remote{Endpoint: awsCfg.Endpoint, Token: cfg.Sim.ControlToken})
		}
		if awsCfg.Logger == nil {
			awsCfg.Logger = cfg.Logger.Named("aws")
		}
		c, err := awscloud.New(ctx, awsCfg)
		if err != nil {
			return nil, fmt.Errorf("--provider aws: %w", err)
		}
		return c, nil
	case ProviderGCE:
		gceCfg := cfg.GCE
		if cfg.Sim.ServeGCE != "" {
			if _, err := s.startSim(launcher, set); err != nil {
				return nil, err
			}
			if gceCfg.Endpoint == "" {
				gceCfg.Endpoint = s.GCEEndpoint
			}
		}
		if gceCfg.Logger == nil {
			gceCfg.Logger = cfg.Logger.Named("gce")
		}
		c, err := gce.New(ctx, gceCfg)
		if err != nil {
			return nil, fmt.Errorf("--provider gce: %w", err)
		}
		return newGCEReclaims(c), nil
	}
	return nil, fmt.Errorf("--provider %q: use local, sim, aws or gce, or public clouds separated by commas (aws,gce)", name)
}

// startSim starts the simulated cloud, and its EC2 endpoint if asked.
func (s *Stack) startSim(launcher local.LauncherConfig, set *providerSet) (*sim.Cloud, error) {
	if s.Sim != nil {
		return s.Sim, nil // one market for every cloud it serves
	}
	cfg := s.cfg
	simCfg, skipped, err := simMarket(cfg.Sim.Traces)
	if err != nil {
		return nil, err
	}
	if cfg.Sim.ServeGCE != "" {
		var more []string
		if simCfg, more, err = gceapi.AddMarket(simCfg, ""); err != nil {
			return nil, fmt.Errorf("--gce-sim: %w", err)
		}
		skipped = append(skipped, more...)
	}
	for _, why := range skipped {
		s.log.Warn("trace skipped", zap.String("why", why))
	}
	if cfg.Sim.Prices != nil {
		simCfg = simCfg.WithPrices(cfg.Sim.Prices)
	}
	simCfg.Launcher = launcher
	simCfg.Speed, simCfg.NoticeWindow, simCfg.Logger = cfg.Sim.Speed, cfg.Sim.Notice, cfg.Logger.Named("sim")
	simCfg.Quotas, simCfg.RestartOverhead = cfg.Sim.Quotas, cfg.Sim.RestartOverhead
	simCfg.StartTime = cfg.Sim.StartTime
	c, err := sim.New(simCfg)
	if err != nil {
		return nil, err
	}
	if cfg.Sim.MarketTime && cfg.Provider == ProviderSim {
		set.clocks = map[string]capacity.MarketClock{c.Name(): c}
	}
	s.Sim = c
	set.interrupters = append(set.interrupters, c)
	set.closers = append(set.closers, func() { _ = c.Close() })
	if cfg.Sim.ServeGCE != "" {
		srv, err := gceapi.Start(c, cfg.Sim.ServeGCE, cfg.Logger, ec2api.RequireToken(cfg.Sim.ControlToken, c.ControlHandler()))
		if err != nil {
			return nil, fmt.Errorf("--gce-sim %s: %w", cfg.Sim.ServeGCE, err)
		}
		s.GCEEndpoint = srv.Endpoint()
		set.closers = append(set.closers, func() { _ = srv.Close() })
	}
	if cfg.Sim.ServeEC2 == "" {
		return c, nil
	}
	ln, err := net.Listen("tcp", cfg.Sim.ServeEC2)
	if err != nil {
		return nil, fmt.Errorf("--ec2-sim %s: %w", cfg.Sim.ServeEC2, err)
	}
	var opts []ec2api.Option
	if aws := s.ec2Credentials; aws.AccessKeyID != "" && aws.SecretAccessKey != "" {
		opts = append(opts, ec2api.WithCredentials(aws.AccessKeyID, aws.SecretAccessKey))
	}
	mux := http.NewServeMux()
	mux.Handle("/sim/", ec2api.RequireToken(cfg.Sim.ControlToken, c.ControlHandler()))
	mux.Handle("/", ec2api.New(c, cfg.Logger.Named("ec2api"), opts...))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	s.EC2Endpoint = ln.Addr().String()
	set.closers = append(set.closers, func() { _ = srv.Close() })
	return c, nil
}

// instancesDir is where simulated machines keep their scratch space.
func (cfg Config) instancesDir() string { return filepath.Join(cfg.DataDir, "instances") }

// simMarket is the market the sim replays: the traces under dir, or the
// built-in market when dir is "".
func simMarket(dir string) (sim.Config, []string, error) {
	cfg, skipped, err := sim.MarketAt(dir, nil)
	if err != nil {
		return cfg, nil, fmt.Errorf("--sim-traces %s: %w (give a directory of ZONE_GPU_COUNT.json availability traces, %s%s, or leave it empty for the default built-in market)",
			dir, err, sim.BuiltIn, strings.Join(sim.BuiltInMarkets, " or "+sim.BuiltIn))
	}
	return cfg, skipped, nil
}
