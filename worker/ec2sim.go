package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"refuel/controlplane"
	"refuel/internal/cluster"
	"refuel/internal/secretfile"
	"refuel/internal/telemetry"
	"refuel/pkg/cloud/local"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/cloud/sim/ec2api"
)

// ec2sim serves a simulated cloud whose spot market replays traces over
// EC2's Query API (and the sim's own controls under /sim/), starting a
// real node agent per instance that connects to Temporal.
func ec2sim(args []string) int {
	fs := flag.NewFlagSet("ec2-sim", flag.ContinueOnError)
	spotPrices, onDemandPrices := prices{}, prices{}
	var (
		listen    = fs.String("listen", "127.0.0.1:4566", "address to serve the EC2 API on (point clients' endpoint at http://ADDR); the sim's controls are under /sim/")
		traces    = fs.String("traces", "", "directory of availability traces named ZONE_GPU_COUNT.json, or "+sim.BuiltIn+"NAME for a market built into the binary ("+strings.Join(sim.BuiltInMarkets, ", ")+"); default the built-in "+sim.BuiltInMarkets[0])
		speed     = fs.Float64("speed", 1, "trace ticks per second; 0 keeps the market still until POST /sim/advance")
		start     = fs.Int("start", 0, "trace tick the market opens at")
		notice    = fs.Duration("notice", 2*time.Minute, "time between a spot interruption notice and the instance being taken")
		odVCPUs   = fs.Int("quota-ondemand-vcpus", 0, "account quota of on-demand vCPUs (VcpuLimitExceeded); 0 is unlimited")
		odGPUs    = fs.Int("quota-ondemand-gpus", 0, "account quota of on-demand GPUs (VcpuLimitExceeded); 0 is unlimited")
		spotCount = fs.Int("quota-spot-instances", 0, "account quota of running spot instances (MaxSpotInstanceCountExceeded); 0 is unlimited")
		rateLimit = fs.Float64("rate-limit", 0, "API calls per second beyond which calls are throttled (RequestLimitExceeded); 0 is unlimited")
		rateBurst = fs.Int("rate-burst", 0, "API calls allowed in a burst above --rate-limit (default the rate)")
		agents    = fs.Bool("agents", true, "start a node agent per instance; false makes instances records only (a market without machines)")
		dataDir   = fs.String("data-dir", envOr("REFUEL_DATA_DIR", ".refuel"), "instance scratch space goes to DIR/ec2-sim-instances (env REFUEL_DATA_DIR)")
		address   = fs.String("temporal-address", "", "Temporal frontend the agents connect to (default TEMPORAL_ADDRESS, a profile or "+cluster.DefaultFrontendAddr+")")
		namespace = fs.String("namespace", "", "Temporal namespace of the agents (default TEMPORAL_NAMESPACE or "+cluster.DefaultNamespace+")")
		ckptURL   = fs.String("checkpoint-url", os.Getenv("REFUEL_CHECKPOINT_URL"), "checkpoint store for jobs whose spec names none (default file://<data-dir>/checkpoints, as the worker's)")
		stepTime  = fs.Duration("demo-step-time", 100*time.Millisecond, "pace of the demo trainer the agents run: a spec's work becomes work/step-time steps")
		report    = fs.Duration("report", 10*time.Second, "how often to print the market's progress; 0 prints none")
		logLevel  = fs.String("log-level", "info", "debug, info, warn or error")
		creds     = fs.String("credentials", os.Getenv("REFUEL_EC2_SIM_CREDENTIALS"), "ACCESS:SECRET: check every request's Signature Version 4 against these credentials and answer AuthFailure otherwise, as EC2 does (env REFUEL_EC2_SIM_CREDENTIALS); default: signatures are not checked")
		priceFile = fs.String("prices", "", "price each pool by its zone and region from FILE (DescribeSpotPriceHistory's JSON with OnDemandPrices beside it), or from the prices built into the binary with \""+sim.EmbeddedPrices+"\"; where it knows a pool it wins over --spot-price and --ondemand-price")
		ctlToken  = fs.String("control-token-file", os.Getenv("REFUEL_SIM_CONTROL_TOKEN_FILE"), "the /sim/ controls (which can take any instance away) ask for the token in this file (mode 0600) as Authorization: Bearer TOKEN (env REFUEL_SIM_CONTROL_TOKEN_FILE); default: open")
	)
	fs.Var(spotPrices, "spot-price", "starting spot price of an instance type, TYPE=DOLLARS_PER_HOUR such as p3.2xlarge=0.9701; repeatable")
	fs.Var(onDemandPrices, "ondemand-price", "on-demand price of an instance type, TYPE=DOLLARS_PER_HOUR such as p3.2xlarge=3.06; repeatable")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: worker ec2-sim [--traces DIR|builtin:NAME] [flags]\n\nServes a simulated cloud over EC2's Query API (actions: %s).\n\n", strings.Join(ec2api.Actions(), ", "))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "worker ec2-sim: "+format+"\n", a...)
		return 2
	}
	switch {
	case *speed < 0:
		return bad("--speed %v: must be 0 (manual) or more", *speed)
	case *start < 0:
		return bad("--start %d: must be a tick, 0 or more", *start)
	case *notice <= 0:
		return bad("--notice %s: must be positive", *notice)
	case *odVCPUs < 0 || *odGPUs < 0 || *spotCount < 0:
		return bad("--quota-* flags must be 0 (unlimited) or more")
	case *rateLimit < 0 || *rateBurst < 0:
		return bad("--rate-limit and --rate-burst must be 0 or more")
	}
	var apiOpts []ec2api.Option
	if *creds != "" {
		id, secret, err := ec2api.ParseCredentials(*creds)
		if err != nil {
			return bad("--credentials: %v", err)
		}
		apiOpts = append(apiOpts, ec2api.WithCredentials(id, secret))
	}
	var token string
	if *ctlToken != "" {
		t, err := secretfile.Token(*ctlToken)
		if err != nil {
			return bad("--control-token-file: %v", err)
		}
		token = t
	}
	log, err := telemetry.NewLogger(*logLevel, false)
	if err != nil {
		return bad("%v", err)
	}
	defer func() { _ = log.Sync() }()

	catalogue := sim.DefaultCatalogue()
	if err := spotPrices.apply(catalogue, "--spot-price", func(t *sim.InstanceType, p float64) { t.SpotPrice = p }); err != nil {
		return bad("%v", err)
	}
	if err := onDemandPrices.apply(catalogue, "--ondemand-price", func(t *sim.InstanceType, p float64) { t.OnDemandPrice = p }); err != nil {
		return bad("%v", err)
	}
	cfg, skipped, err := sim.MarketAt(*traces, catalogue)
	if err != nil {
		return bad("--traces %s: %v (give a directory of ZONE_GPU_COUNT.json availability traces, or %sNAME)", *traces, err, sim.BuiltIn)
	}
	for _, s := range skipped {
		log.Warn("trace skipped", zap.String("why", s))
	}
	if *priceFile != "" {
		p, err := sim.LoadPrices(*priceFile)
		if err != nil {
			return bad("--prices %s: %v (give a price file or %s)", *priceFile, err, sim.EmbeddedPrices)
		}
		cfg = cfg.WithPrices(p)
	}
	cfg.Speed, cfg.StartTick, cfg.NoticeWindow, cfg.Logger = *speed, *start, *notice, log
	cfg.Quotas = sim.Quotas{OnDemandVCPUs: *odVCPUs, OnDemandGPUs: *odGPUs, SpotInstances: *spotCount}
	cfg.APIRateLimit, cfg.APIBurst = *rateLimit, *rateBurst
	if *agents {
		launcher, err := agentLauncher(*dataDir, *address, *namespace, *ckptURL, *stepTime, log)
		if err != nil {
			return bad("%v", err)
		}
		cfg.Launcher = launcher
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return bad("--listen %s: %v", *listen, err)
	}
	cloud, err := sim.New(cfg)
	if err != nil {
		_ = ln.Close()
		log.Error("cannot start the sim", zap.Error(err))
		return 1
	}
	defer func() { _ = cloud.Close() }()
	mux := http.NewServeMux()
	mux.Handle("/sim/", ec2api.RequireToken(token, cloud.ControlHandler()))
	mux.Handle("/", ec2api.New(cloud, log, apiOpts...))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("EC2 endpoint stopped", zap.Error(err))
		}
	}()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	source := *traces
	if source == "" {
		// --traces left out: the default market built into the binary.
		source = sim.BuiltIn + sim.BuiltInMarkets[0]
	}
	announce(cloud, ln.Addr().String(), source, *speed, *notice, *agents)
	if *report > 0 {
		go reportMarket(ctx, cloud, *report, log)
	}
	<-ctx.Done()
	log.Info("shutting down: terminating every instance")
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	return 0
}

// agentLauncher starts node agents the way the control plane's local
// cloud does: this binary's agent subcommand, connected to Temporal.
func agentLauncher(dataDir, address, namespace, ckptURL string, stepTime time.Duration, log *zap.Logger) (local.LauncherConfig, error) {
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return local.LauncherConfig{}, fmt.Errorf("--data-dir %s: %w", dataDir, err)
	}
	if ckptURL == "" {
		ckptURL = "file://" + filepath.Join(dir, "checkpoints")
	}
	opts, err := cluster.Options(cluster.Target{Address: address, Namespace: namespace})
	if err != nil {
		return local.LauncherConfig{}, err
	}
	self, err := os.Executable()
	if err != nil {
		return local.LauncherConfig{}, fmt.Errorf("cannot find this executable to start agents: %w", err)
	}
	launcher := controlplane.AgentLauncher([]string{self}, opts.HostPort, opts.Namespace, ckptURL, stepTime,
		filepath.Join(dir, "ec2-sim-instances"), log)
	// Agents get what they need to connect, and none of this process's
	// other settings.
	launcher.Env, err = cluster.ConnectEnv(cluster.Target{Address: address, Namespace: namespace})
	return launcher, err
}

// announce prints what is served where.
func announce(cloud *sim.Cloud, addr, traces string, speed float64, notice time.Duration, agents bool) {
	m := cloud.Market()
	var pools []string
	for _, ps := range m.Pools {
		pools = append(pools, fmt.Sprintf("%s (spot %d, $%.4f/h spot, $%.4f/h on-demand)", ps.Pool, ps.SpotStock, ps.SpotPrice, ps.OnDemandPrice))
	}
	pace := fmt.Sprintf("%g ticks/s, %s of trace per tick", speed, cloud.TickLength())
	if speed == 0 {
		pace = "still until POST /sim/advance, " + cloud.TickLength().String() + " of trace per tick"
	}
	machines := "a node agent per instance"
	if !agents {
		machines = "no agents: instances are records only"
	}
	fmt.Fprintf(os.Stderr, `
  Simulated EC2:  http://%s  (%d actions: %s)
  Sim controls:   http://%s/sim/market, /sim/advance, /sim/interrupt, /sim/faults, /sim/spot-price
  Market:         %d pools from %s, opening at tick %d; %s; spot notices %s; %s
    %s
  Try:            aws ec2 describe-instance-type-offerings --location-type availability-zone --endpoint-url http://%s

`, addr, len(ec2api.Actions()), strings.Join(ec2api.Actions(), ", "), addr, len(m.Pools), traces, m.Tick, pace, notice, machines,
		strings.Join(pools, "\n    "), addr)
}

// reportMarket logs the market's progress every period: the tick, the
// stock that changed since the last report, and what runs.
func reportMarket(ctx context.Context, cloud *sim.Cloud, every time.Duration, log *zap.Logger) {
	last := cloud.Market()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m := cloud.Market()
		var changes []string
		spot, notices, onDemand := 0, 0, 0
		for i, ps := range m.Pools {
			if was := last.Pools[i].SpotStock; was != ps.SpotStock {
				changes = append(changes, fmt.Sprintf("%s %d→%d", ps.Pool, was, ps.SpotStock))
			}
			spot, notices, onDemand = spot+ps.SpotRunning, notices+ps.Notices, onDemand+ps.OnDemandRunning
		}
		log.Info("market", zap.Int("tick", m.Tick), zap.Duration("trace_time", m.TraceTime), zap.Strings("spot_stock_changes", changes),
			zap.Int("spot_running", spot), zap.Int("under_notice", notices), zap.Int("on_demand_running", onDemand))
		last = m
	}
}

// prices is a repeatable TYPE=DOLLARS_PER_HOUR flag.
type prices map[string]float64

func (p prices) String() string {
	var out []string
	for t, v := range p {
		out = append(out, fmt.Sprintf("%s=%g", t, v))
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func (p prices) Set(s string) error {
	t, v, ok := strings.Cut(s, "=")
	price, err := strconv.ParseFloat(v, 64)
	if !ok || t == "" || err != nil || !(price > 0) {
		return fmt.Errorf("%q: want TYPE=DOLLARS_PER_HOUR, such as p3.2xlarge=0.9701", s)
	}
	p[t] = price
	return nil
}

// apply sets the prices on the catalogue; a type it lacks is an error
// naming the flag.
func (p prices) apply(catalogue []sim.InstanceType, flagName string, set func(*sim.InstanceType, float64)) error {
	for name, price := range p {
		i := slices.IndexFunc(catalogue, func(t sim.InstanceType) bool { return t.Name == name })
		if i < 0 {
			var names []string
			for _, t := range catalogue {
				names = append(names, t.Name)
			}
			return fmt.Errorf("%s %s: no such instance type in the catalogue (%s)", flagName, name, strings.Join(names, ", "))
		}
		set(&catalogue[i], price)
	}
	return nil
}
