package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"refuel/balancers"
	"refuel/internal/cluster"
	"refuel/internal/telemetry"
	"refuel/pkg/balancer"
)

// balancerMain is `worker balancer`: the balancers of every running
// service, apart from a control plane, until SIGTERM or SIGINT.
func balancerMain(args []string) int {
	fs := flag.NewFlagSet("worker balancer", flag.ContinueOnError)
	var (
		address   = fs.String("temporal-address", "", "Temporal frontend host:port (default TEMPORAL_ADDRESS or profile)")
		namespace = fs.String("namespace", "", "Temporal namespace (default TEMPORAL_NAMESPACE or "+cluster.DefaultNamespace+")")
		codecKeys = fs.String("codec-keys", "", "payload keys, lines ID:BASE64KEY (env REFUEL_CODEC_KEYS)")
		host      = fs.String("balancer-host", envOr("REFUEL_BALANCER_HOST", "127.0.0.1"), "address each service's balancer listens on (a port each) and reports as the service's endpoint (env REFUEL_BALANCER_HOST)")
		metrics   = fs.String("metrics", "-", "serve Prometheus /metrics on this address, - for none")
		logLevel  = fs.String("log-level", "info", "debug, info, warn or error")
		logJSON   = fs.Bool("log-json", false, "log JSON lines instead of console text")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log, err := telemetry.NewLogger(*logLevel, *logJSON)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker balancer:", err)
		return 2
	}
	defer func() { _ = log.Sync() }()
	target := cluster.Target{Address: *address, Namespace: *namespace, CodecKeys: *codecKeys}
	opts, err := cluster.Options(target)
	if err != nil {
		log.Error("connection flags: " + err.Error())
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	dialCtx, cancel := context.WithTimeout(ctx, time.Minute)
	c, err := cluster.Dial(dialCtx, opts)
	cancel()
	if err != nil {
		log.Error("cannot connect", zap.Error(err))
		return 1
	}
	defer c.Close()
	reg := prometheus.NewRegistry()
	m, err := balancer.NewMetrics(reg)
	if err != nil {
		log.Error("metrics", zap.Error(err))
		return 1
	}
	if *metrics != "-" {
		srv := &http.Server{Addr: *metrics, Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
				log.Error("metrics", zap.Error(err))
			}
		}()
		defer srv.Close()
	}
	h := balancers.New(balancers.Temporal{Client: c, Namespace: opts.Namespace}, balancers.Config{Host: *host, Metrics: m, Log: log.Named("balancers")})
	log.Info("balancing every running service", zap.String("host", *host), zap.String("temporal", opts.HostPort))
	h.Run(ctx)
	return 0
}
