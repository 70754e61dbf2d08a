// Package serving holds what a service's balancer and its workflow say to
// each other: which replicas take requests (read from the workflow's
// status), and what the balancer measured (sent to the workflow as the
// "traffic" signal). Both sides are stateless about the other: a balancer
// learns everything from status, and a workflow keeps only the latest
// report of each balancer.
package serving

import (
	"math"
	"time"
)

// SignalTraffic carries a Report from a balancer to its service.
const SignalTraffic = "traffic"

// ReportEvery bounds how often a balancer reports a service's traffic, so
// that it adds at most one history event every 5 s.
const ReportEvery = 5 * time.Second

// Replica states a balancer reads from a service's status.
const (
	ReplicaStarting = "starting"
	ReplicaReady    = "ready"
	// ReplicaDraining takes no new requests; those in flight finish.
	ReplicaDraining = "draining"
)

// Replica is one replica as the balancer routes to it: only ready replicas
// take new requests, draining ones finish what they hold.
type Replica struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Endpoint string `json:"endpoint,omitempty"` // host:port of its model server
}

// Settings are the spec's serving fields a balancer enforces, as status
// shows them. Zero values mean the defaults of docs/contracts.md.
type Settings struct {
	MaxConcurrency      int     `json:"max_concurrency"`
	QueueTimeoutSeconds float64 `json:"queue_timeout_seconds"`
	DrainTimeoutSeconds float64 `json:"drain_timeout_seconds"`
	SLOLatencySeconds   float64 `json:"slo_latency_seconds"`
}

// Traffic is what a balancer measured over its latest window; status
// shows it as `traffic`.
type Traffic struct {
	RPS      float64 `json:"rps"`
	InFlight int     `json:"in_flight"`
	// Serving is the mean of the requests the replicas held over the
	// window (slot-seconds per second); absent from balancers that do
	// not measure it, where InFlight at the report stands for it.
	Serving           float64 `json:"serving,omitempty"`
	Queued            int     `json:"queued"`
	LatencyP50Seconds float64 `json:"latency_p50_seconds"`
	LatencyP90Seconds float64 `json:"latency_p90_seconds"`
	LatencyP99Seconds float64 `json:"latency_p99_seconds"`
	Requests          int     `json:"requests"`
	Errors            int     `json:"errors"`
	// SLOShare is the share of the window's answered requests answered
	// within slo.latency (1 when none were answered).
	SLOShare float64 `json:"slo_share"`
}

// MeanServing is Serving, or, from a balancer that does not measure it,
// the requests in flight at the report.
func (t Traffic) MeanServing() float64 {
	if t.Serving > 0 {
		return t.Serving
	}
	return float64(t.InFlight)
}

// Missed is the requests of the window answered later than slo.latency
// or failed: the SLO share covers the answered ones, and errors are
// among its requests.
func (t Traffic) Missed() int {
	return max(0, t.Requests-int(math.Round(t.SLOShare*float64(t.Requests))))
}

// Report is one balancer's traffic for one service over one window.
type Report struct {
	// Balancer is the host:port clients reach the service at through it.
	Balancer      string    `json:"balancer"`
	At            time.Time `json:"at"`
	WindowSeconds float64   `json:"window_seconds"`
	Traffic
}
