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

	"refuel/controlplane"
	"refuel/internal/cluster"
	"refuel/internal/telemetry"
)

func serve(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var (
		address   = fs.String("temporal-address", "", "external Temporal frontend host:port; default TEMPORAL_ADDRESS or profile, else the embedded server")
		namespace = fs.String("namespace", "", "Temporal namespace (default TEMPORAL_NAMESPACE or "+cluster.DefaultNamespace+")")
		dataDir   = fs.String("data-dir", envOr("REFUEL_DATA_DIR", ".refuel"), "embedded server database, checkpoints and instance scratch space (env REFUEL_DATA_DIR)")
		frontend  = fs.String("frontend", envOr("REFUEL_FRONTEND", cluster.DefaultFrontendAddr), "embedded Temporal frontend address (env REFUEL_FRONTEND)")
		ui        = fs.String("ui", envOr("REFUEL_UI", cluster.DefaultUIAddr), "embedded Web UI address, - for none (env REFUEL_UI)")
		metrics   = fs.String("metrics", envOr("REFUEL_METRICS", cluster.DefaultMetricsAddr), "Prometheus /metrics address, - for none (env REFUEL_METRICS)")
		ckptURL   = fs.String("checkpoint-url", os.Getenv("REFUEL_CHECKPOINT_URL"), "checkpoint store for specs that name none (default file://<data-dir>/checkpoints)")
		stepTime  = fs.Duration("demo-step-time", 100*time.Millisecond, "pace of the demo trainer: a spec's work becomes work/step-time steps")
		logLevel  = fs.String("log-level", "info", "debug, info, warn or error")
		logJSON   = fs.Bool("log-json", false, "log JSON lines instead of console text")
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

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	stack, err := controlplane.Start(startCtx, controlplane.Config{
		Target:  cluster.Target{Address: *address, Namespace: *namespace},
		DataDir: *dataDir, FrontendAddr: *frontend, UIAddr: *ui, MetricsAddr: *metrics,
		CheckpointURL: *ckptURL, DemoStepTime: *stepTime, Logger: log,
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
		zap.String("task_queue", "refuel"))
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
