package balancer

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Names of what balancers export to Prometheus.
const (
	MetricRequestSeconds = "refuel_serving_request_duration_seconds"
	MetricRequests       = "refuel_serving_requests_total"
	MetricReplicasReady  = "refuel_serving_replicas_ready"
	LabelService         = "service"
	LabelOutcome         = "outcome"
)

// Metrics are the Prometheus series every balancer of a process shares,
// labelled by service. A nil *Metrics exports nothing.
type Metrics struct {
	latency  *prometheus.HistogramVec
	requests *prometheus.CounterVec
	ready    *prometheus.GaugeVec
}

// NewMetrics registers the balancers' series with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricRequestSeconds,
			Help:    "Time from a request's arrival at the balancer to the end of its answer (its whole stream), queueing included, by service.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{LabelService}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRequests,
			Help: "Requests a balancer finished, by service and outcome (ok, replica_error, unreachable, queue_timeout, canceled).",
		}, []string{LabelService, LabelOutcome}),
		ready: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricReplicasReady,
			Help: "Replicas a balancer routes new requests to, by service.",
		}, []string{LabelService}),
	}
	for _, c := range []prometheus.Collector{m.latency, m.requests, m.ready} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) request(service, outcome string, latency time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(service, outcome).Inc()
	if outcome != OutcomeCanceled {
		m.latency.WithLabelValues(service).Observe(latency.Seconds())
	}
}

func (m *Metrics) replicasReady(service string, n int) {
	if m != nil {
		m.ready.WithLabelValues(service).Set(float64(n))
	}
}

// Forget drops a service's series, when its balancer closes.
func (m *Metrics) Forget(service string) {
	if m == nil {
		return
	}
	m.latency.DeleteLabelValues(service)
	m.ready.DeleteLabelValues(service)
	m.requests.DeletePartialMatch(prometheus.Labels{LabelService: service})
}
