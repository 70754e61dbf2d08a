package autoscale

import (
	"time"

	"refuel/pkg/spec"
)

// loadFrom is the replicas the reports up to now ask for: the largest over
// the targets set, as a Kubernetes HPA does with several metrics.
//
// A utilisation target is applied to the work arriving over the last
// Smoothing rather than to the utilisation measured: measured utilisation
// stops at 100% when the fleet falls behind, and so cannot say by how
// much. The work arriving is the busy replica-seconds plus the growth of
// the queue times the work per request, learned over the last WorkWindow
// as busy replica-seconds per request taken up. A queue longer than its
// target per ready replica adds the replicas that would drain the excess
// within one lead time.
func loadFrom(reports []Metrics, t spec.ScalingTarget, lead time.Duration, now time.Time) (replicas float64, known bool) {
	var busy, taken, recentBusy, span, arrived, held float64
	first := -1
	for i := 1; i < len(reports); i++ {
		r, prev := reports[i], reports[i-1]
		dt := r.At.Sub(prev.At).Seconds()
		b := r.GPUUtilization * float64(r.Replicas) * dt
		busy += b
		taken += r.QPS*dt - (r.QueueLength - prev.QueueLength)
		if prev.At.Before(now.Add(-Smoothing)) {
			continue
		}
		if first < 0 {
			first = i - 1
		}
		recentBusy += b
		span += dt
		arrived += r.QPS * dt
		held += r.InFlight * dt
	}
	if span == 0 {
		return 0, false
	}
	var l float64
	if t.QPS > 0 {
		l = arrived / span / t.QPS
	}
	if t.Concurrency > 0 {
		// Requests in flight, over the smoothing span, per the in-flight
		// target of one replica (Little's law makes it the QPS target
		// that the replicas' own latency sets).
		l = max(l, held/span/t.Concurrency)
	}
	last := reports[len(reports)-1]
	if busy == 0 || taken <= 0 {
		// Nothing served: with nothing arriving or waiting either, there
		// is no load; otherwise the work per request is not known yet,
		// and only a QPS target can say anything.
		idle := arrived == 0 && last.QueueLength == 0 && held == 0
		return l, idle || t.QPS > 0 || t.Concurrency > 0
	}
	perRequest := busy / taken // replica-seconds
	if t.GPUUtilization > 0 {
		work := recentBusy + (last.QueueLength-reports[first].QueueLength)*perRequest
		l = max(l, work/span/t.GPUUtilization)
	}
	if t.QueueLength > 0 {
		excess := last.QueueLength - t.QueueLength*float64(last.Replicas)
		l += max(0, excess) * perRequest / lead.Seconds()
	}
	return l, true
}
