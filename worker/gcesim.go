package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"refuel/internal/secretfile"
	"refuel/internal/telemetry"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/cloud/sim/ec2api"
	"refuel/pkg/cloud/sim/gceapi"
)

// gcesim serves a simulated cloud whose spot market replays traces over
// Compute Engine's REST API (and the sim's own controls under /sim/),
// starting a real node agent per instance that connects to Temporal.
func gcesim(args []string) int {
	fs := flag.NewFlagSet("gce-sim", flag.ContinueOnError)
	var (
		listen    = fs.String("listen", "127.0.0.1:8085", "address to serve Compute Engine's API on (point clients at http://ADDR/compute/v1/); the sim's controls are under /sim/")
		traces    = fs.String("traces", "", "directory of availability traces named ZONE_GPU_COUNT.json (such as us-central1-a_h100_1.json), or "+sim.BuiltIn+gceapi.BuiltInMarket+" (the default: 13 zones of H100 spot)")
		ec2Traces = fs.String("ec2-traces", "", "also sell the EC2 market of these traces (as worker ec2-sim --traces) in the same market, over EC2's Query API at http://ADDR/; default none")
		speed     = fs.Float64("speed", 1, "trace ticks per second; 0 keeps the market still until POST /sim/advance")
		start     = fs.Int("start", 0, "trace tick the market opens at")
		odGPUs    = fs.Int("quota-ondemand-gpus", 0, "account quota of on-demand GPUs (QUOTA_EXCEEDED); 0 is unlimited")
		spotCount = fs.Int("quota-spot-instances", 0, "account quota of running spot VMs (QUOTA_EXCEEDED); 0 is unlimited")
		rateLimit = fs.Float64("rate-limit", 0, "API calls per second beyond which calls are refused (rateLimitExceeded); 0 is unlimited")
		projects  = fs.String("projects", "", "comma-separated project ids to serve; others are answered 404 as a project that does not exist; default any")
		agents    = fs.Bool("agents", true, "start a node agent per instance; false makes instances records only (a market without machines)")
		dataDir   = fs.String("data-dir", envOr("REFUEL_DATA_DIR", ".refuel"), "instance scratch space goes under DIR (env REFUEL_DATA_DIR)")
		address   = fs.String("temporal-address", "", "Temporal frontend the agents connect to (default TEMPORAL_ADDRESS, a profile or the local cluster)")
		namespace = fs.String("namespace", "", "Temporal namespace of the agents (default TEMPORAL_NAMESPACE or default)")
		ckptURL   = fs.String("checkpoint-url", os.Getenv("REFUEL_CHECKPOINT_URL"), "checkpoint store for jobs whose spec names none (default file://<data-dir>/checkpoints, as the worker's)")
		stepTime  = fs.Duration("demo-step-time", 100*time.Millisecond, "pace of the demo trainer the agents run")
		logLevel  = fs.String("log-level", "info", "debug, info, warn or error")
		ctlToken  = fs.String("control-token-file", os.Getenv("REFUEL_SIM_CONTROL_TOKEN_FILE"), "the /sim/ controls ask for the token in this file (mode 0600) as Authorization: Bearer TOKEN (env REFUEL_SIM_CONTROL_TOKEN_FILE); default: open")
	)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: worker gce-sim [--listen ADDR] [--traces DIR|builtin:NAME] [flags]\n\nServes a simulated cloud over Compute Engine's REST API under /compute/v1/projects/{any project}/.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "worker gce-sim: "+format+"\n", a...)
		return 2
	}
	switch {
	case *speed < 0:
		return bad("--speed %v: must be 0 (manual) or more", *speed)
	case *start < 0:
		return bad("--start %d: must be a tick, 0 or more", *start)
	case *odGPUs < 0 || *spotCount < 0:
		return bad("--quota-* flags must be 0 (unlimited) or more")
	case *rateLimit < 0:
		return bad("--rate-limit must be 0 or more")
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

	var cfg sim.Config
	if *ec2Traces != "" {
		if cfg, _, err = sim.MarketAt(*ec2Traces, nil); err != nil {
			return bad("--ec2-traces %s: %v", *ec2Traces, err)
		}
	}
	cfg, skipped, err := gceapi.AddMarket(cfg, *traces)
	if err != nil {
		return bad("--traces %s: %v (give a directory of ZONE_GPU_COUNT.json availability traces, or %s%s)", *traces, err, sim.BuiltIn, gceapi.BuiltInMarket)
	}
	for _, s := range skipped {
		log.Warn("trace skipped", zap.String("why", s))
	}
	cfg.Speed, cfg.StartTick, cfg.Logger = *speed, *start, log
	cfg.Quotas = sim.Quotas{OnDemandGPUs: *odGPUs, SpotInstances: *spotCount}
	cfg.APIRateLimit = *rateLimit
	if *agents {
		launcher, err := agentLauncher(*dataDir, *address, *namespace, *ckptURL, *stepTime, log)
		if err != nil {
			return bad("%v", err)
		}
		cfg.Launcher = launcher
	}
	cloud, err := sim.New(cfg)
	if err != nil {
		log.Error("cannot start the sim", zap.Error(err))
		return 1
	}
	defer func() { _ = cloud.Close() }()
	var opts []gceapi.Option
	if *projects != "" {
		opts = append(opts, gceapi.WithProjects(strings.Split(*projects, ",")...))
	}
	others := http.NewServeMux()
	others.Handle("/sim/", ec2api.RequireToken(token, cloud.ControlHandler()))
	if *ec2Traces != "" {
		others.Handle("/", ec2api.New(cloud, log))
	}
	srv, err := gceapi.Start(cloud, *listen, log, others, opts...)
	if err != nil {
		return bad("--listen %s: %v", *listen, err)
	}
	defer func() { _ = srv.Close() }()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	m := cloud.Market()
	fmt.Fprintf(os.Stderr, `
  Simulated Compute Engine:  %s  (any project)
  Sim controls:              http://%s/sim/market, /sim/advance, /sim/interrupt, /sim/faults
  Market:                    %d pools, opening at tick %d, %g ticks/s
  Try:                       CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE=%s CLOUDSDK_AUTH_DISABLE_CREDENTIALS=true \
                             CLOUDSDK_CORE_PROJECT=demo gcloud compute instances list

`, srv.Endpoint(), srv.Addr(), len(m.Pools), m.Tick, *speed, srv.Endpoint())
	<-ctx.Done()
	log.Info("shutting down: terminating every instance")
	return 0
}
