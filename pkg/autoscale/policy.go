// Package autoscale decides how many replicas an inference service should
// have: refuel's Autoscaler (targets per replica with hysteresis, cron
// windows, scale-ahead by a learned lead time, a warm pool), and the
// policies the benchmark compares it with, all behind one interface.
//
// Everything here is deterministic: times are arguments, state lives in
// structs with exported fields that a workflow carries across
// continue-as-new, and nothing depends on map order or randomness.
package autoscale

import "time"

// Metrics is one report of a service's load, as the InferenceService
// workflow's `metrics` signal carries it.
type Metrics struct {
	At time.Time `json:"at"`
	// QPS is the requests arriving per second over the report's interval.
	QPS float64 `json:"qps"`
	// QueueLength is the requests waiting for a replica at At.
	QueueLength float64 `json:"queue_length"`
	// GPUUtilization is the ready replicas' mean busy share over the
	// interval, 0 to 1.
	GPUUtilization float64 `json:"gpu_utilization"`
	// Replicas is the number of ready replicas the report covers.
	Replicas int `json:"replicas"`
	// InFlight is the requests a balancer holds at At, taken by a
	// replica or waiting for one: what a concurrency target divides.
	InFlight float64 `json:"in_flight,omitempty"`
	// Serving is the requests the replicas were serving (taken, not
	// waiting): the interval's mean where the reporter integrates it, else
	// the count at At. With QPS, Little's law gives how long a request
	// holds its slot, which staffing for the latency SLO needs.
	Serving float64 `json:"serving,omitempty"`
	// Requests are the requests finished over the report's interval, and
	// Missed those of them answered later than slo.latency or failed:
	// what staffing for the latency SLO steers by.
	Requests float64 `json:"requests,omitempty"`
	Missed   float64 `json:"missed,omitempty"`
}

// Fleet is the service's replicas as they stand.
type Fleet struct {
	Ready    int `json:"ready"`    // serving
	Starting int `json:"starting"` // requested, not serving yet
	Warm     int `json:"warm"`     // prepared instances in the warm pool
}

// Replicas is every replica requested and not released.
func (f Fleet) Replicas() int { return f.Ready + f.Starting }

// Decision is what a policy wants.
type Decision struct {
	// Replicas is the number of replicas (ready and starting) wanted.
	Replicas int `json:"replicas"`
	// Warm is the number of prepared instances wanted in the warm pool.
	Warm int `json:"warm"`
	// Reason says in a few words what decided Replicas, for status and logs.
	Reason string `json:"reason"`
	// Explanation says it in a line a person reads, with the numbers
	// that decided: "4 replicas: a load of 3.4 replicas expected within
	// 5.5 min (recent peak 3.0, margin 0.4)". Empty from a policy that
	// does not explain itself.
	Explanation string `json:"explanation,omitempty"`
	// Forecast is what a forecasting policy expected; nil from others.
	Forecast *Forecast `json:"forecast,omitempty"`
}

// Forecast is the load a policy expects one lead time ahead, beside
// what it expected, one lead time ago, for now and what came.
type Forecast struct {
	// Forecaster is the member of the family followed.
	Forecaster string `json:"forecaster"`
	// At is the moment forecast: the newest load's time plus the lead.
	At time.Time `json:"at"`
	// Load is the load expected at At, in replicas, and Margin what was
	// added to it for the forecaster's recent errors.
	Load   float64 `json:"load"`
	Margin float64 `json:"margin"`
	// Now is the newest load, at NowAt, and Expected what the forecaster
	// expected for it one lead time before; nil when it made no forecast
	// then.
	Now      float64   `json:"now"`
	NowAt    time.Time `json:"now_at"`
	Expected *float64  `json:"expected,omitempty"`
}

// Policy decides a service's replicas. The workflow (or the benchmark)
// feeds it every metrics report and every measured start-up as they come,
// and asks for a decision on its own schedule.
type Policy interface {
	Observe(m Metrics)
	Started(s Startup)
	Decide(now time.Time, f Fleet) Decision
}

// Startup is how long one replica took from request to serving, by phase.
type Startup struct {
	Provision time.Duration `json:"provision"` // request to instance running
	Init      time.Duration `json:"init"`      // instance running to runtime ready
	Load      time.Duration `json:"load"`      // loading the model until serving
	// Warm is set for a replica that came from the warm pool: its
	// provision and init were done before it was asked for.
	Warm bool `json:"warm,omitempty"`
}

// Total is the time from request to serving.
func (s Startup) Total() time.Duration { return s.Provision + s.Init + s.Load }
