package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"refuel/workflows/registry"

	"go.uber.org/zap"

	"refuel/activities"
	"refuel/controlplane"
	"refuel/internal/cluster"
	"refuel/internal/codec"
	"refuel/internal/secretfile"
	"refuel/internal/telemetry"
	awscloud "refuel/pkg/cloud/aws"
	"refuel/pkg/cloud/gce"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/devserver"
	"refuel/pkg/pool"
	"refuel/pkg/trace"
)

func serve(args []string) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	wf := registry.New()
	var (
		address    = fs.String("temporal-address", "", "external Temporal frontend host:port; default TEMPORAL_ADDRESS or profile, else the embedded server")
		namespace  = fs.String("namespace", "", "Temporal namespace (default TEMPORAL_NAMESPACE or "+cluster.DefaultNamespace+")")
		dataDir    = fs.String("data-dir", envOr("REFUEL_DATA_DIR", ".refuel"), "embedded server database, checkpoints and instance scratch space (env REFUEL_DATA_DIR)")
		frontend   = fs.String("frontend", envOr("REFUEL_FRONTEND", cluster.DefaultFrontendAddr), "embedded Temporal frontend address (env REFUEL_FRONTEND)")
		ui         = fs.String("ui", envOr("REFUEL_UI", cluster.DefaultUIAddr), "embedded Web UI address, - for none (env REFUEL_UI)")
		metrics    = fs.String("metrics", envOr("REFUEL_METRICS", cluster.DefaultMetricsAddr), "Prometheus /metrics address, - for none (env REFUEL_METRICS)")
		ckptURL    = fs.String("checkpoint-url", os.Getenv("REFUEL_CHECKPOINT_URL"), "checkpoint store for specs that name none (default file://<data-dir>/checkpoints)")
		stepTime   = fs.Duration("demo-step-time", 100*time.Millisecond, "pace of the demo trainer: a spec's work becomes work/step-time steps")
		provider   = fs.String("provider", envOr("REFUEL_PROVIDER", controlplane.ProviderSim), "cloud to acquire from: sim (trace-driven spot market), local (this machine, unlimited stock), aws or gce, or public clouds separated by commas whose offerings make one market, e.g. aws,gce (env REFUEL_PROVIDER)")
		simTraces  = fs.String("sim-traces", os.Getenv("REFUEL_SIM_TRACES"), "directory of availability traces (ZONE_GPU_COUNT.json files) the sim's spot market replays, or builtin:aws-02-15-2023 (p3.2xlarge in nine zones of three regions, the zones --sim-prices embedded prices); default the built-in market, AWS us-west-2a/b V100 and K80 from 2022-10-26 (env REFUEL_SIM_TRACES)")
		simSpeed   = fs.Float64("sim-speed", 1, "trace ticks per second of the sim's market (0 stands still)")
		simNotice  = fs.Duration("sim-notice", 20*time.Second, "sim: time between a spot interruption notice and the instance being taken")
		simMarket  = fs.Bool("sim-market-time", envOr("REFUEL_SIM_MARKET_TIME", "") == "true", "sim: deadline and flexible runs keep the market's time, deciding with their policy at every tick as starter sim does (with --sim-speed 0 they drive the clock; env REFUEL_SIM_MARKET_TIME=true)")
		simRestart = fs.Duration("sim-restart-overhead", 0, "sim: market time each instance start costs a run keeping market time (default 12m)")
		simPrices  = fs.String("sim-prices", os.Getenv("REFUEL_SIM_PRICES"), "sim: price each pool by its zone and region from FILE (DescribeSpotPriceHistory's JSON with OnDemandPrices beside it), or from the prices built into the binary with \""+sim.EmbeddedPrices+"\" (p3.2xlarge in the nine zones of aws-02-15-2023); default every pool at its instance type's catalogue prices (env REFUEL_SIM_PRICES)")
		egress     = fs.String("egress-usd-per-gb", envOr("REFUEL_EGRESS_USD_PER_GB", formatFloat(wf.Run.EgressUSDPerGB)), "USD per GB a deadline run counts for moving its checkpoint to another region when it weighs a cheaper zone there (env REFUEL_EGRESS_USD_PER_GB)")
		ckptGB     = fs.Float64("checkpoint-gb", wf.Run.CheckpointGB, "size in GB a run counts for its checkpoint while its checkpoints do not report their own, and that runs keeping market time move between regions")
		transfer   = fs.Float64("transfer-gbps", wf.Run.TransferGbps, "Gbit/s a run counts a checkpoint to move between regions at; the transfer adds to that start's overhead")
		simToken   = fs.String("sim-control-token-file", os.Getenv("REFUEL_SIM_CONTROL_TOKEN_FILE"), "the token (in a file of mode 0600) of the sim's /sim/ controls: what --ec2-sim's controls ask for, and what this worker sends, with --provider aws and --aws-endpoint, to a worker ec2-sim started with the same --control-token-file, to serve a drill's notices (env REFUEL_SIM_CONTROL_TOKEN_FILE)")
		ec2Sim     = fs.String("ec2-sim", "", "also serve the sim over EC2's API on this address (e.g. 127.0.0.1:4566); with --provider aws the AWS provider then talks to it")
		awsURL     = fs.String("aws-endpoint", os.Getenv("AWS_ENDPOINT_URL_EC2"), "EC2 endpoint for --provider aws (default AWS's; the sim's with --ec2-sim)")
		awsRegion  = fs.String("aws-region", os.Getenv("AWS_REGION"), "AWS region for --provider aws")
		awsLT      = fs.String("aws-launch-template", envOr("REFUEL_AWS_LAUNCH_TEMPLATE", "refuel-node"), "launch template (name) whose user data starts the node agent (worker agent), for --provider aws")
		gceProject = fs.String("gce-project", os.Getenv(gce.EnvProject), "Google Cloud project for --provider gce (env "+gce.EnvProject+"); the sim serves any")
		gceZones   = fs.String("gce-zones", "", "comma-separated Compute Engine zones --provider gce considers; default every zone of the project that is up")
		gceURL     = fs.String("gce-endpoint", "", "Compute Engine endpoint for --provider gce, e.g. http://127.0.0.1:8085/compute/v1/ for worker gce-sim (default Google's, with Application Default Credentials; the sim's with --gce-sim)")
		gceSim     = fs.String("gce-sim", "", "also serve the sim over Compute Engine's API on this address (e.g. 127.0.0.1:8085), with the Compute Engine market beside the EC2 one; with --provider gce the gce provider then talks to it")
		poolsFile  = fs.String("pools", os.Getenv("REFUEL_POOLS"), "pools file (YAML): a base group runs ask for first and burst pools they overflow to; none lets runs acquire on their own (env REFUEL_POOLS; see examples/pools.yaml)")
		spotRetry  = fs.Duration("spot-retry", wf.Run.SpotRetryInterval, "how often a deadline run on on-demand asks refuel whether to try spot again, backing off to an hour while tries find no stock; 0 keeps such runs on on-demand")
		waitSpot   = fs.Bool("deadline-waits-for-spot", wf.Run.WaitForSpot, "a deadline run that finds no spot waits for it while refuel says its slack allows; false takes on-demand at the first stock-out")
		changeover = fs.Duration("changeover-overhead", wf.Run.RestartOverhead, "what refuel counts a move from on-demand to spot to cost a run (boot, setup, restoring the checkpoint)")
		instances  = fs.String("instances", envOr("REFUEL_INSTANCES", controlplane.InstancesProcess), "how the sim and local clouds host instances: process (a node-agent process each, as on a real cloud) or virtual (the same node agent inside this worker, the demo trainer in-process: a thousand instances cost little more than their runs) (env REFUEL_INSTANCES)")
		planCache  = fs.String("plan-cache-mb", envOr("REFUEL_PLAN_CACHE_MB", "256"), "megabytes of plans this worker keeps for the deadline runs that choose their market, shared by all of them (env REFUEL_PLAN_CACHE_MB)")
		deployment = fs.String("deployment", envOr("REFUEL_DEPLOYMENT", activities.DefaultDeployment), "this control plane's name, tagged refuel:deployment on every instance it launches; its janitor releases only those, so deployments can share a cloud account (env REFUEL_DEPLOYMENT)")
		stopWait   = fs.Duration("stop-timeout", durationEnv("REFUEL_STOP_TIMEOUT", controlplane.DefaultStopTimeout), "on SIGTERM or SIGINT, how long the activities in flight (an Acquire mid-launch, a Release) get to finish before they are cancelled and left to another worker (env REFUEL_STOP_TIMEOUT)")
		tolerance  = fs.Duration("control-plane-tolerance", wf.Run.ControlPlaneTolerance, "how long a run waits to hear again from the agent of an instance its cloud still runs (Temporal or its database away or slow) before it counts the instance lost; the agent trains on meanwhile")
		stale      = fs.Duration("metrics-stale-after", wf.Service.MetricsStaleAfter, "how long a service's latest metrics signal counts: past it with none newer it scales to what its schedules and min_replicas say, and its status says why; 0 keeps the latest for ever")
		memory     = fs.String("market-memory", os.Getenv("REFUEL_MARKET_MEMORY"), "bucket URL of the market memory (stock logs, checkpoint logs) every worker of the deployment shares and learns from as one, e.g. s3://BUCKET?prefix=refuel-memory/; default file://DATA_DIR/market-memory, this worker's alone (env REFUEL_MARKET_MEMORY)")
		noBalance  = fs.Bool("no-balancers", envOr("REFUEL_NO_BALANCERS", "") == "true", "run no balancers for the services here (then run worker balancer elsewhere; env REFUEL_NO_BALANCERS=true)")
		balHost    = fs.String("balancer-host", envOr("REFUEL_BALANCER_HOST", "127.0.0.1"), "address each service's balancer listens on (a port each) and reports as the service's endpoint (env REFUEL_BALANCER_HOST)")
		logLevel   = fs.String("log-level", "info", "debug, info, warn or error")
		logJSON    = fs.Bool("log-json", false, "log JSON lines instead of console text")
		tlsCert    = fs.String("tls-cert", os.Getenv("REFUEL_TLS_CERT"), "serve the embedded frontend and Web UI over TLS with this certificate (PEM), with --tls-key; refuel's clients then need TEMPORAL_TLS_SERVER_CA_CERT_PATH (env REFUEL_TLS_CERT)")
		tlsKey     = fs.String("tls-key", os.Getenv("REFUEL_TLS_KEY"), "private key (PEM) of --tls-cert (env REFUEL_TLS_KEY)")
		tlsCA      = fs.String("tls-client-ca", os.Getenv("REFUEL_TLS_CLIENT_CA"), "require client certificates signed by this CA (PEM) on the embedded frontend: mutual TLS; clients then need TEMPORAL_TLS_CLIENT_CERT_PATH and _KEY_PATH (env REFUEL_TLS_CLIENT_CA)")
		apiKeyFile = fs.String("api-key-file", os.Getenv("REFUEL_API_KEY_FILE"), "API keys the embedded frontend accepts, one a line (mode 0600); every client must send one as TEMPORAL_API_KEY (env REFUEL_API_KEY_FILE)")
		codecKeys  = fs.String("codec-keys", "", "encrypt payloads with these keys, lines ID:BASE64KEY (32 bytes, mode 0600); the first encrypts, all decrypt (env "+codec.EnvKeys+", read by every refuel binary)")
		codecAddr  = fs.String("codec-server", envOr("REFUEL_CODEC_SERVER", codec.DefaultServerAddr), "with codec keys, serve Temporal's remote codec (POST /encode, /decode) for the Web UI and the temporal CLI's --codec-endpoint here; - for none (env REFUEL_CODEC_SERVER)")
		codecToken = fs.String("codec-token-file", os.Getenv("REFUEL_CODEC_TOKEN_FILE"), "the codec server asks every request for the token in this file (mode 0600): Authorization: Bearer TOKEN, or a browser's sign-in at the codec server's address (env REFUEL_CODEC_TOKEN_FILE)")
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
	if v := os.Getenv("REFUEL_STOP_TIMEOUT"); v != "" {
		if _, err := time.ParseDuration(v); err != nil {
			log.Error(fmt.Sprintf("REFUEL_STOP_TIMEOUT %q: give a duration such as 30s", v))
			return 2
		}
	}
	if *stopWait <= 0 || *tolerance <= 0 {
		log.Error("--stop-timeout and --control-plane-tolerance are durations above 0, e.g. 30s and 5m")
		return 2
	}
	wf.Run.ControlPlaneTolerance = *tolerance
	wf.Service.MetricsStaleAfter = *stale
	var simControlToken string
	if *simToken != "" {
		if simControlToken, err = secretfile.Token(*simToken); err != nil {
			log.Error("--sim-control-token-file: " + err.Error())
			return 2
		}
	}
	planCacheMB, err := strconv.Atoi(*planCache)
	if err != nil || planCacheMB <= 0 {
		log.Error(fmt.Sprintf("--plan-cache-mb %q: give a whole number of megabytes above 0 (default 256)", *planCache))
		return 2
	}
	egressUSDPerGB, err := strconv.ParseFloat(*egress, 64)
	if err != nil || egressUSDPerGB < 0 {
		log.Error(fmt.Sprintf("--egress-usd-per-gb %q: give USD per GB of 0 or more, e.g. 0.02", *egress))
		return 2
	}
	if *ckptGB < 0 || *transfer <= 0 {
		log.Error(fmt.Sprintf("--checkpoint-gb %v, --transfer-gbps %v: give the checkpoint's size in GB (0 or more, e.g. 50) and the link's Gbit/s (above 0, e.g. 1)", *ckptGB, *transfer))
		return 2
	}
	var prices *trace.Prices
	if *simPrices != "" {
		if prices, err = sim.LoadPrices(*simPrices); err != nil {
			log.Error(fmt.Sprintf("--sim-prices %s: %v (give a price file or %s)", *simPrices, err, sim.EmbeddedPrices))
			return 2
		}
	}
	if err := activities.CheckDeployment(*deployment); err != nil {
		log.Error("--deployment: " + err.Error())
		return 2
	}
	if *instances != controlplane.InstancesProcess && *instances != controlplane.InstancesVirtual {
		log.Error(fmt.Sprintf("--instances %q: use process (a node-agent process per instance) or virtual (every instance inside this worker)", *instances))
		return 2
	}
	wf.Run.SpotRetryInterval, wf.Run.RestartOverhead, wf.Run.WaitForSpot = *spotRetry, *changeover, *waitSpot
	wf.Run.EgressUSDPerGB, wf.Run.CheckpointGB, wf.Run.TransferGbps = egressUSDPerGB, *ckptGB, *transfer

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
		Target:  cluster.Target{Address: *address, Namespace: *namespace, CodecKeys: *codecKeys},
		DataDir: *dataDir, FrontendAddr: *frontend, UIAddr: *ui, MetricsAddr: *metrics,
		CheckpointURL: *ckptURL, DemoStepTime: *stepTime, Logger: log,
		Provider: *provider, Pools: pools, Workflows: wf,
		Sim: controlplane.SimConfig{Traces: *simTraces, Speed: *simSpeed, Notice: *simNotice, ServeEC2: *ec2Sim,
			MarketTime: *simMarket, RestartOverhead: *simRestart, Prices: prices, ControlToken: simControlToken, ServeGCE: *gceSim},
		AWS: awsConfig(*awsURL, *awsRegion, *awsLT, *ec2Sim != ""),
		GCE: gceConfig(*gceProject, *gceZones, *gceURL, *gceSim != ""),
		Security: controlplane.Security{
			TLS:        devserver.TLS{CertFile: *tlsCert, KeyFile: *tlsKey, ClientCAFile: *tlsCA},
			APIKeyFile: *apiKeyFile, CodecServer: *codecAddr, CodecTokenFile: *codecToken,
		},
		Deployment:   *deployment,
		Instances:    *instances,
		PlanCacheMB:  planCacheMB,
		StopTimeout:  *stopWait,
		MarketMemory: *memory,
		Balancers:    controlplane.BalancersConfig{Off: *noBalance, Host: *balHost},
	})
	if err != nil {
		log.Error("cannot start", zap.Error(err))
		return 1
	}
	log.Info("refuel control plane ready",
		zap.String("temporal", stack.Address),
		zap.String("web_ui", stack.UIURL()),
		zap.String("metrics", stack.MetricsURL()),
		zap.String("task_queue", "refuel"),
		zap.String("provider", *provider),
		zap.String("deployment", *deployment),
		zap.String("ec2_endpoint", stack.EC2Endpoint),
		zap.String("gce_endpoint", stack.GCEEndpoint),
		zap.String("codec_server", stack.CodecURL))
	if ui := stack.UIURL(); ui != "" {
		fmt.Fprintf(os.Stderr, "\n  Temporal Web UI: %s/namespaces/default/workflows\n  Submit a job:    bin/starter submit examples/job.yaml\n\n", ui)
	}
	<-ctx.Done()
	log.Info("shutting down", zap.Duration("stop_timeout", *stopWait))
	stopping := time.Now()
	stack.Stop()
	log.Info("stopped", zap.Duration("took", time.Since(stopping).Round(time.Millisecond)))
	return 0
}

// durationEnv is the duration in the environment variable key, or def.
func durationEnv(key string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(key)); err == nil {
		return d
	}
	return def
}

// formatFloat is f as a flag's default shows it.
func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// gceConfig is the Compute Engine provider's configuration from flags.
// Against the in-process sim any project does: it serves every one.
func gceConfig(project, zones, endpoint string, againstSim bool) gce.Config {
	cfg := gce.Config{Project: project, Endpoint: endpoint}
	for _, z := range strings.Split(zones, ",") {
		if z = strings.TrimSpace(z); z != "" {
			cfg.Zones = append(cfg.Zones, z)
		}
	}
	if againstSim {
		if cfg.Project == "" {
			cfg.Project = "refuel-sim"
		}
		cfg.PollInterval = time.Second // a simulated boot takes a moment
	}
	return cfg
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
