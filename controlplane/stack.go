package controlplane

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"refuel/workflows/registry"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"refuel/activities"
	"refuel/balancers"
	"refuel/internal/cluster"
	"refuel/internal/inflight"
	"refuel/internal/telemetry"
	"refuel/nodeagent"
	"refuel/pkg/capacity"
	awscloud "refuel/pkg/cloud/aws"
	"refuel/pkg/cloud/gce"
	"refuel/pkg/cloud/local"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/devserver"
	"refuel/pkg/marketmem"
	"refuel/pkg/policy"
	"refuel/pkg/pool"
	"refuel/workflows"
)

// Config configures a Stack. Zero values mean the documented defaults.
type Config struct {
	// Target names an external cluster; when none is configured (flag,
	// TEMPORAL_ADDRESS or profile) the embedded server is started.
	Target cluster.Target
	// DataDir holds the embedded server's database, checkpoints and the
	// local cloud's instance directories. Default ./.refuel.
	DataDir string
	// InMemory keeps the embedded server's database in memory (tests).
	InMemory bool
	// FrontendAddr and UIAddr place the embedded server and Web UI;
	// UIAddr "-" runs no UI.
	FrontendAddr, UIAddr string
	// MetricsAddr serves /metrics; "-" serves none.
	MetricsAddr string
	// CheckpointURL is the store for jobs whose spec names none.
	// Default file://<DataDir>/checkpoints.
	CheckpointURL string
	// SelfCommand is the argv prefix that runs this binary's subcommands
	// (agent, trainer). Default: this executable.
	SelfCommand []string
	// DemoStepTime paces the demo trainer: work / DemoStepTime steps.
	DemoStepTime time.Duration
	// Provider is the cloud: local (default), sim, aws or gce, or public
	// clouds separated by commas (aws,gce) whose offerings make one
	// market.
	Provider string
	// Sim configures the simulated cloud (provider sim, or aws over the
	// sim's EC2 endpoint).
	Sim SimConfig
	// AWS configures the AWS provider.
	AWS awscloud.Config
	// GCE configures the Compute Engine provider.
	GCE gce.Config
	// Offerings the local cloud sells; default local.DefaultOfferings().
	Offerings []capacity.Offering
	// Stock caps running local instances per offering key.
	Stock map[string]int
	// Pools is the pools file in force: a base group and burst pools
	// owned by the CapacityPool workflow, which runs ask for capacity.
	// Nil runs no pool: runs acquire from the provider on their own.
	Pools *pool.Config
	// PoolMaxHistory is the pool workflow's history length per
	// generation; 0 means workflows.DefaultPoolMaxHistory.
	PoolMaxHistory int
	// OnFrontendRequest, when set, is told the gRPC method of every request
	// the embedded frontend serves (benchmarks count them).
	OnFrontendRequest func(method string)
	// ClientInterceptor, when set, sees every request this stack's client
	// sends and its answer: its worker's, and its virtual instances'
	// agents', which share the client (benchmarks trace them).
	ClientInterceptor grpc.UnaryClientInterceptor
	// Workflows are the workflows with the options they run under; nil
	// means workflows.New(), the defaults.
	Workflows *registry.Workflows
	// JanitorEvery is how often the janitor runs; 0 means every minute,
	// negative means no janitor schedule.
	JanitorEvery time.Duration
	// ReclaimEvery is how often the clouds that say which instances they
	// took back (capacity.Reclaimer) are asked, so that those instances'
	// runs hear instance-taken; 0 means DefaultReclaimEvery, negative
	// never.
	ReclaimEvery time.Duration
	Logger       *zap.Logger
	// Security guards the embedded frontend (TLS, client certificates,
	// API keys) and configures the codec server; see security.go.
	Security Security
	// Deployment names this control plane on every instance it launches
	// (tag refuel:deployment); its janitor releases only those. Default
	// activities.DefaultDeployment.
	Deployment string
	// Instances is how the sim and local clouds (and the base group) host
	// their instances: InstancesProcess (default), a node-agent process
	// each, or InstancesVirtual, the same node agent inside this process
	// on this stack's client connection, with the demo trainer in-process.
	Instances string
	// PlanCacheMB bounds the outlooks this worker keeps for the runs that
	// choose their market (policy.Plans); default 256.
	PlanCacheMB int
	// StopTimeout is how long Stop lets the activities in flight finish
	// before it cancels them; 0 means DefaultStopTimeout.
	StopTimeout time.Duration
	// MarketMemory is the bucket URL of the market memory every worker
	// of the deployment shares (see marketmem); default
	// file://<DataDir>/market-memory, or mem:// with InMemory.
	MarketMemory string
	// Balancers is this worker's host of the running services' balancers.
	Balancers BalancersConfig
}

// BalancersConfig is where a control plane's balancers listen, or that
// it runs none.
type BalancersConfig struct {
	Off  bool
	Host string // default 127.0.0.1
}

// How instances are hosted (Config.Instances, worker --instances).
const (
	InstancesProcess = "process"
	InstancesVirtual = "virtual"
)

// Stack is a running control plane.
type Stack struct {
	Client   client.Client
	Server   *devserver.Server // nil with an external cluster
	Provider capacity.Provider // the cloud runs acquire from: the first of Clouds
	// Clouds are every cloud runs acquire from (Config.Provider names
	// one or several), whose offerings make one market.
	Clouds []capacity.Provider
	Cloud  *local.Cloud // set with the local provider
	Base   *local.Cloud // the base group's machines, when a pools file is in force
	// Memory is the deployment's market memory (Config.MarketMemory):
	// the pools' checkpoint logs `interval: auto` reads, and what runs saw
	// of each spot offering's stock, which deadline runs plan with on
	// clouds without a market clock.
	Memory *marketmem.Store
	// Plans are the outlooks this worker keeps for runs that choose their
	// market (Config.PlanCacheMB).
	Plans *policy.Plans
	Sim   *sim.Cloud // set when the simulated cloud runs here
	// Virtual starts the node agents of virtual instances; nil unless
	// Config.Instances is InstancesVirtual.
	Virtual *nodeagent.Virtual
	// Balancers hosts the running services' balancers; nil when off.
	Balancers *balancers.Host
	// EC2Endpoint is where the in-process sim serves EC2's API, if it does.
	EC2Endpoint string
	// GCEEndpoint is the base URL (http://ADDR/compute/v1/) where the
	// in-process sim serves Compute Engine's API, if it does.
	GCEEndpoint string
	// CodecURL is where the codec server answers, "" when none runs.
	CodecURL    string
	Metrics     *telemetry.Metrics
	Address     string
	cfg         Config
	worker      worker.Worker
	metrics     *http.Server
	codecServer *http.Server
	inFlight    *inflight.Counter
	closers     []func()
	log         *zap.Logger
	// identity is the worker's, as pollers show it to /readyz.
	identity string
	// clouds are the providers whose instances this stack's launcher
	// hosts, asked whose run an instance it took is (tellTaken).
	clouds   []capacity.Provider
	stopping atomic.Bool
	// ec2Credentials are the AWS provider's, which the in-process EC2
	// endpoint checks signatures against.
	ec2Credentials awscloud.Config
}

// Start brings the control plane up and returns once its worker polls.
func Start(ctx context.Context, cfg Config) (*Stack, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Stack{cfg: cfg, log: cfg.Logger}
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()
	if s.Metrics, err = telemetry.NewMetrics(cfg.Logger); err != nil {
		return nil, err
	}
	opts, err := s.connectOptions(ctx)
	if err != nil {
		return nil, err
	}
	if s.Client, err = cluster.Dial(ctx, opts); err != nil {
		return nil, err
	}
	s.Address = opts.HostPort

	launcher := AgentLauncher(cfg.SelfCommand, opts.HostPort, opts.Namespace, cfg.CheckpointURL, cfg.DemoStepTime, cfg.instancesDir(), cfg.Logger)
	if launcher.Env, err = cluster.ConnectEnv(cfg.Target); err != nil {
		return nil, err
	}
	launcher.OnTaken = s.tellTaken
	if cfg.Instances == InstancesVirtual {
		s.Virtual = &nodeagent.Virtual{Client: s.Client, DefaultStoreURL: cfg.CheckpointURL, DemoStepTime: cfg.DemoStepTime, Logger: cfg.Logger.Named("agent")}
		launcher.StartVirtual = s.Virtual.Start
	}
	set, err := s.startProviders(ctx, launcher)
	s.closers = set.closers
	if err != nil {
		return nil, err
	}
	s.Provider, s.Clouds = set.providers[0], set.providers
	providers := slices.Clone(set.providers)
	if cfg.Pools != nil {
		base, listed, err := startBase(*cfg.Pools, launcher, s.Client)
		if err != nil {
			return nil, err
		}
		providers = append(providers, base)
		if listed != nil {
			s.Base = listed
			s.closers = append(s.closers, func() { _ = s.Base.Close() })
			// A base machine can be drained with notice too (maintenance), so
			// the drill works on whichever layer its run was granted.
			set.interrupters = append(set.interrupters, s.Base)
		}
	}
	s.clouds = providers
	joins, err := joinChecker(cfg.Pools)
	if err != nil {
		return nil, err
	}
	if s.Memory, err = openMarketMemory(ctx, cfg); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func() { _ = s.Memory.Close() })
	caps := &activities.Capacity{Providers: providers, Interrupters: set.interrupters, Unavailable: capacity.NewUnavailableCache(0, nil), Clocks: set.clocks, Memory: s.Memory}
	caps.Deployment = cfg.Deployment
	caps.Plans = policy.NewPlans(int64(cfg.PlanCacheMB) << 20)
	s.Plans = caps.Plans
	caps.InProcessInstances = s.Virtual != nil
	jan := &activities.Janitor{Providers: providers, Client: s.Client, Deployment: cfg.Deployment}

	s.inFlight = inflight.New()
	s.worker = worker.New(s.Client, workflows.TaskQueue, worker.Options{
		WorkerStopTimeout: cfg.StopTimeout,
		Interceptors:      []interceptor.WorkerInterceptor{s.inFlight},
	})
	Register(s.worker, cfg.Workflows, caps, jan, &activities.Workspaces{DefaultStoreURL: cfg.CheckpointURL}, &activities.Dispatch{Client: s.Client})
	s.worker.RegisterActivityWithOptions(joins.Verify, activity.RegisterOptions{Name: activities.VerifyJoinName})
	if err := s.worker.Start(); err != nil {
		return nil, fmt.Errorf("control-plane worker: %w", err)
	}
	if cfg.Pools != nil {
		if err := EnsurePool(ctx, s.Client, *cfg.Pools, cfg.PoolMaxHistory); err != nil {
			return nil, err
		}
	}
	if cfg.JanitorEvery >= 0 {
		if err := EnsureJanitorSchedule(ctx, s.Client, cfg.JanitorEvery); err != nil {
			return nil, err
		}
	}
	s.startReclaimWatch(set.providers)
	var layered []layeredProvider
	for _, p := range set.providers {
		layered = append(layered, layeredProvider{p, telemetry.LayerOf(capacity.Spot)})
	}
	if s.Base != nil {
		layered = append(layered, layeredProvider{s.Base, telemetry.LayerOf(capacity.Base)})
	}
	if err := s.Metrics.Registry.Register(newStateCollector(layered, s.Client, opts.Namespace, cfg.Pools != nil, cfg.Logger.Named("metrics"))); err != nil {
		return nil, err
	}
	if !cfg.Balancers.Off {
		if err := s.startBalancers(opts.Namespace); err != nil {
			return nil, err
		}
	}
	if cfg.MetricsAddr != "-" {
		if s.metrics, err = s.Metrics.Serve(cfg.MetricsAddr, telemetry.Health(s.readiness(), 5*time.Second)); err != nil {
			return nil, err
		}
	}
	ok = true
	return s, nil
}

// connectOptions resolves the cluster, starting the embedded one if none
// is configured.
func (s *Stack) connectOptions(ctx context.Context) (client.Options, error) {
	cfg := s.cfg
	opts, err := cluster.Options(cfg.Target)
	if err != nil {
		return opts, err
	}
	guard, err := s.prepareSecurity()
	if err != nil {
		return opts, err
	}
	defer func() {
		if s.codecServer == nil && guard.codecLn != nil {
			_ = guard.codecLn.Close() // the start failed before serving it
		}
	}()
	if !cluster.External(cfg.Target) {
		dataDir := cfg.DataDir
		if cfg.InMemory {
			dataDir = ""
		}
		uiAddr := cfg.UIAddr
		if uiAddr == "-" {
			uiAddr = ""
		}
		s.Server, err = devserver.Start(ctx, devserver.Options{
			DataDir: dataDir, FrontendAddr: cfg.FrontendAddr, UIAddr: uiAddr,
			Namespace: opts.Namespace, SearchAttributes: workflows.SearchAttributeTypes, Logger: cfg.Logger.Named("temporal"),
			TLS: guard.tls, APIKeys: guard.apiKeys, Client: guard.client, UICodec: guard.uiCodec,
			OnRequest: cfg.OnFrontendRequest,
		})
		if err != nil {
			return opts, err
		}
		opts.HostPort = s.Server.FrontendAddr()
	}
	s.serveCodec(guard)
	opts.Logger = telemetry.SDKLogger(cfg.Logger.Named("sdk"))
	opts.MetricsHandler = s.Metrics.Handler
	if cfg.ClientInterceptor != nil {
		opts.ConnectionOptions.DialOptions = append(opts.ConnectionOptions.DialOptions, grpc.WithChainUnaryInterceptor(cfg.ClientInterceptor))
	}
	if opts.Identity == "" {
		host, _ := os.Hostname()
		opts.Identity = fmt.Sprintf("%d@%s@refuel", os.Getpid(), host)
	}
	s.identity = opts.Identity
	return opts, nil
}

// MetricsURL is where /metrics is served, "" when it is not.
func (s *Stack) MetricsURL() string {
	if s.metrics == nil {
		return ""
	}
	return "http://" + s.metrics.Addr + "/metrics"
}

// UIURL is the Web UI's address, "" when none runs here.
func (s *Stack) UIURL() string {
	if s.Server == nil {
		return ""
	}
	return s.Server.UIURL()
}

// Stop ends everything the stack started, instances first so no agent
// outlives it.
func (s *Stack) Stop() {
	s.stopping.Store(true)
	if s.worker != nil {
		s.drain()
	}
	if s.Cloud != nil || s.Sim != nil || s.Base != nil {
		s.log.Info("ending the instances this worker hosts (the local and simulated clouds' node agents are its own); their runs recover once a worker is back")
	} else {
		s.log.Info("instances stay with their runs: the agents train on, and any worker of the deployment carries on")
	}
	for _, close := range s.closers {
		close()
	}
	if s.metrics != nil {
		_ = s.metrics.Close()
	}
	if s.codecServer != nil {
		_ = s.codecServer.Close()
	}
	if s.Client != nil {
		s.Client.Close()
	}
	if s.Server != nil {
		_ = s.Server.Stop()
	}
	if s.Metrics != nil {
		_ = s.Metrics.Close()
	}
}
