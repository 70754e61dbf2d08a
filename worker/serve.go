package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"

	"refuel/activities"
	"refuel/controlplane"
	"refuel/internal/cluster"
	"refuel/internal/telemetry"
	awscloud "refuel/pkg/cloud/aws"
	"refuel/pkg/pool"
	"refuel/workflows"
)

func serve(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var (
		address    = fs.String("temporal-address", "", "external Temporal frontend host:port; default TEMPORAL_ADDRESS or profile, else the embedded server")
		namespace  = fs.String("namespace", "", "Temporal namespace (default TEMPORAL_NAMESPACE or "+cluster.DefaultNamespace+")")
		dataDir    = fs.String("data-dir", envOr("REFUEL_DATA_DIR", ".refuel"), "embedded server database, checkpoints and instance scratch space (env REFUEL_DATA_DIR)")
		frontend   = fs.String("frontend", envOr("REFUEL_FRONTEND", cluster.DefaultFrontendAddr), "embedded Temporal frontend address (env REFUEL_FRONTEND)")
		ui         = fs.String("ui", envOr("REFUEL_UI", cluster.DefaultUIAddr), "embedded Web UI address, - for none (env REFUEL_UI)")
		metrics    = fs.String("metrics", envOr("REFUEL_METRICS", cluster.DefaultMetricsAddr), "Prometheus /metrics address, - for none (env REFUEL_METRICS)")
		ckptURL    = fs.String("checkpoint-url", os.Getenv("REFUEL_CHECKPOINT_URL"), "checkpoint store for specs that name none (default file://<data-dir>/checkpoints)")
		stepTime   = fs.Duration("demo-step-time", 100*time.Millisecond, "pace of the demo trainer: a spec's work becomes work/step-time steps")
		provider   = fs.String("provider", envOr("REFUEL_PROVIDER", controlplane.ProviderSim), "cloud to acquire from: sim (trace-driven spot market), local (this machine, unlimited stock) or aws (env REFUEL_PROVIDER)")
		simTraces  = fs.String("sim-traces", envOr("REFUEL_SIM_TRACES", "../shared/traces/availability/1-node/aws-10-26-2022"), "availability traces the sim's spot market replays, ZONE_GPU_COUNT.json files (env REFUEL_SIM_TRACES)")
		simSpeed   = fs.Float64("sim-speed", 1, "trace ticks per second of the sim's market (0 stands still)")
		simNotice  = fs.Duration("sim-notice", 20*time.Second, "sim: time between a spot interruption notice and the instance being taken")
		simMarket  = fs.Bool("sim-market-time", envOr("REFUEL_SIM_MARKET_TIME", "") == "true", "sim: deadline and flexible runs keep the market's time, deciding with their policy at every tick as `starter sim` does (with --sim-speed 0 they drive the clock; env REFUEL_SIM_MARKET_TIME=true)")
		simRestart = fs.Duration("sim-restart-overhead", 0, "sim: market time each instance start costs a run keeping market time (default 12m)")
		ec2Sim     = fs.String("ec2-sim", "", "also serve the sim over EC2's API on this address (e.g. 127.0.0.1:4566); with --provider aws the AWS provider then talks to it")
		awsURL     = fs.String("aws-endpoint", os.Getenv("AWS_ENDPOINT_URL_EC2"), "EC2 endpoint for --provider aws (default AWS's; the sim's with --ec2-sim)")
		awsRegion  = fs.String("aws-region", os.Getenv("AWS_REGION"), "AWS region for --provider aws")
		awsLT      = fs.String("aws-launch-template", envOr("REFUEL_AWS_LAUNCH_TEMPLATE", "refuel-node"), "launch template (name) whose user data starts `worker agent`, for --provider aws")
		poolsFile  = fs.String("pools", os.Getenv("REFUEL_POOLS"), "pools file (YAML): a base group runs ask for first and burst pools they overflow to; none lets runs acquire on their own (env REFUEL_POOLS; see examples/pools.yaml)")
		spotRetry  = fs.Duration("spot-retry", workflows.DefaultRunOptions.SpotRetryInterval, "how often a deadline run on on-demand asks refuel whether to try spot again, backing off to an hour while tries find no stock; 0 keeps such runs on on-demand")
		waitSpot   = fs.Bool("deadline-waits-for-spot", workflows.DefaultRunOptions.WaitForSpot, "a deadline run that finds no spot waits for it while refuel says its slack allows; false takes on-demand at the first stock-out")
		changeover = fs.Duration("changeover-overhead", workflows.DefaultRunOptions.RestartOverhead, "what refuel counts a move from on-demand to spot to cost a run (boot, setup, restoring the checkpoint)")
		deployment = fs.String("deployment", envOr("REFUEL_DEPLOYMENT", activities.DefaultDeployment), "this control plane's name, tagged refuel:deployment on every instance it launches; its janitor releases only those, so deployments can share a cloud account (env REFUEL_DEPLOYMENT)")
		logLevel   = fs.String("log-level", "info", "debug, info, warn or error")
		logJSON    = fs.Bool("log-json", false, "log JSON lines instead of console text")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log, err := telemetry.NewLogger(*logLevel, *logJSON)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	defer func() { _ = log.Sync() }()
	zap.ReplaceGlobals(log)
	if *spotRetry < 0 || *changeover < 0 {
		log.Error("--spot-retry and --changeover-overhead are durations of 0 or more, e.g. 10m")
		return 2
	}
	if err := activities.CheckDeployment(*deployment); err != nil {
		log.Error("--deployment: " + err.Error())
		return 2
	}
	workflows.DefaultRunOptions.SpotRetryInterval = *spotRetry
	workflows.DefaultRunOptions.RestartOverhead = *changeover
	workflows.DefaultRunOptions.WaitForSpot = *waitSpot

	var pools *pool.Config
	if *poolsFile != "" {
		c, err := pool.ReadConfig(*poolsFile)
		if err != nil {
			log.Error("--pools: fix the pools file", zap.Error(err))
			return 2
		}
		pools = &c
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	stack, err := controlplane.Start(startCtx, controlplane.Config{
		Target:  cluster.Target{Address: *address, Namespace: *namespace},
		DataDir: *dataDir, FrontendAddr: *frontend, UIAddr: *ui, MetricsAddr: *metrics,
		CheckpointURL: *ckptURL, DemoStepTime: *stepTime, Logger: log,
		Provider: *provider, Pools: pools,
		Sim: controlplane.SimConfig{Traces: *simTraces, Speed: *simSpeed, Notice: *simNotice, ServeEC2: *ec2Sim,
			MarketTime: *simMarket, RestartOverhead: *simRestart},
		AWS:        awsConfig(*awsURL, *awsRegion, *awsLT, *ec2Sim != ""),
		Deployment: *deployment,
	})
	if err != nil {
		log.Error("cannot start", zap.Error(err))
		return 1
	}
	defer stack.Stop()
	log.Info("refuel control plane ready",
		zap.String("temporal", stack.Address),
		zap.String("web_ui", stack.UIURL()),
		zap.String("metrics", stack.MetricsURL()),
		zap.String("task_queue", "refuel"),
		zap.String("provider", *provider),
		zap.String("deployment", *deployment),
		zap.String("ec2_endpoint", stack.EC2Endpoint))
	if ui := stack.UIURL(); ui != "" {
		fmt.Fprintf(os.Stderr, "\n  Temporal Web UI: %s/namespaces/default/workflows\n  Submit a job:    go run ./starter submit examples/job.yaml\n\n", ui)
	}
	<-ctx.Done()
	log.Info("shutting down: releasing every instance")
	return 0
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// awsConfig is the AWS provider's configuration from flags. Against the
// in-process sim any static credentials and region do: it checks neither.
func awsConfig(endpoint, region, launchTemplate string, againstSim bool) awscloud.Config {
	cfg := awscloud.Config{Endpoint: endpoint, Region: region, LaunchTemplate: awscloud.LaunchTemplate{Name: launchTemplate}}
	if againstSim {
		if cfg.Region == "" {
			cfg.Region = "us-west-2"
		}
		cfg.AccessKeyID, cfg.SecretAccessKey = "sim", "sim"
		cfg.PollInterval = time.Second // a simulated boot takes a moment, not a minute
	}
	return cfg
}
