package telemetry

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
	"go.uber.org/zap"
)

// Metrics is one Prometheus registry that carries both the Temporal SDK's
// metrics and refuel's own (recorded through the SDK's handler from
// workflows and activities, so they are replay-safe, or read at scrape
// time by collectors registered on Registry).
type Metrics struct {
	Registry *prometheus.Registry
	Handler  client.MetricsHandler
	scope    tally.Scope
	closer   func() error
}

// NewMetrics builds the registry and the SDK handler over it.
func NewMetrics(log *zap.Logger) (*Metrics, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The reporter itself, not tally's Configuration: that one also puts a
	// handler on http.DefaultServeMux, which clashes on a second start.
	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer: reg, Gatherer: reg, DefaultTimerType: tallyprom.HistogramTimerType,
		OnRegisterError: func(err error) { log.Warn("metric not recorded", zap.Error(err)) },
	})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sanitize,
	}, time.Second)
	v, err := newVecs(reg)
	if err != nil {
		_ = closer.Close()
		return nil, fmt.Errorf("refuel's metrics: %w", err)
	}
	h := handler{vecs: v, sdk: sdktally.NewMetricsHandler(scope)}
	return &Metrics{Registry: reg, Handler: h, scope: scope, closer: closer.Close}, nil
}

// sanitize keeps names and keys to Prometheus' rules but lets label
// values keep the dashes of markets and zones ("on-demand", "us-west-2a"),
// so a dashboard's filters read like the JobSpec.
var sanitize = tally.SanitizeOptions{
	NameCharacters:       sdktally.PrometheusSanitizeOptions.NameCharacters,
	KeyCharacters:        sdktally.PrometheusSanitizeOptions.KeyCharacters,
	ValueCharacters:      tally.ValidCharacters{Ranges: tally.AlphanumericRange, Characters: []rune{'_', '-', '.', ':', '/'}},
	ReplacementCharacter: tally.DefaultReplacementCharacter,
}

// Serve exposes /metrics on addr (and any extra handlers, such as the
// health checks of Health) until the returned server is closed; the
// listener's address is srv.Addr.
func (m *Metrics) Serve(addr string, extra map[string]http.Handler) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics on %s: %w (choose another with --metrics)", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	for path, h := range extra {
		mux.Handle(path, h)
	}
	srv := &http.Server{Addr: ln.Addr().String(), Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			zap.L().Error("metrics server stopped", zap.Error(err))
		}
	}()
	return srv, nil
}

// Close flushes the last metrics.
func (m *Metrics) Close() error { return m.closer() }
