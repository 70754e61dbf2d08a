package serving

import (
	"slices"
	"time"
)

// Keep puts r in reports, in place of the latest report of the same
// balancer, and drops those older than stale before r's time: a service
// keeps the latest report of each balancer that still reports. Reports
// stay in the order of their balancers' first report.
func Keep(reports []Report, r Report, stale time.Duration) []Report {
	out := slices.DeleteFunc(reports, func(x Report) bool {
		return x.Balancer != r.Balancer && x.At.Before(r.At.Add(-stale))
	})
	if i := slices.IndexFunc(out, func(x Report) bool { return x.Balancer == r.Balancer }); i >= 0 {
		out[i] = r
		return out
	}
	return append(out, r)
}

// Total is the service's traffic across its balancers: rates, counts,
// in flight, serving and queued add up; latency quantiles are the worst
// balancer's (an upper bound); the SLO share is weighted by requests.
func Total(reports []Report) Traffic {
	var t Traffic
	met := 0.0
	for _, r := range reports {
		t.RPS += r.RPS
		t.InFlight += r.InFlight
		t.Serving += r.MeanServing()
		t.Queued += r.Queued
		t.Requests += r.Requests
		t.Errors += r.Errors
		t.LatencyP50Seconds = max(t.LatencyP50Seconds, r.LatencyP50Seconds)
		t.LatencyP90Seconds = max(t.LatencyP90Seconds, r.LatencyP90Seconds)
		t.LatencyP99Seconds = max(t.LatencyP99Seconds, r.LatencyP99Seconds)
		met += r.SLOShare * float64(r.Requests)
	}
	t.SLOShare = 1
	if t.Requests > 0 {
		t.SLOShare = met / float64(t.Requests)
	}
	return t
}
