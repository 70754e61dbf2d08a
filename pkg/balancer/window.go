package balancer

import (
	"slices"
	"time"

	"refuel/pkg/serving"
)

// maxSamples bounds the latencies one window keeps (the latest are kept):
// percentiles of 64k samples are exact enough for any window.
const maxSamples = 1 << 16

// window is the traffic measured since the latest report.
type window struct {
	start     time.Time
	requests  int // finished, cancellations apart
	errors    int
	withinSLO int
	latencies []float64 // seconds, of the answered (OutcomeOK) requests
	seen      int       // answered requests, for the ring of latencies
	// busy is the slot-seconds replicas spent holding requests up to
	// tallied: the window's mean of them in flight is busy over its span.
	busy    float64
	tallied time.Time
}

// holdLocked changes the count of requests the replicas hold by delta,
// first tallying the time the count held so far.
func (b *Balancer) holdLocked(delta int) {
	b.tallyLocked(b.now())
	b.held += delta
}

// tallyLocked adds the time since the last tally at the current count to
// the window's busy slot-seconds.
func (b *Balancer) tallyLocked(now time.Time) {
	w := &b.window
	if d := now.Sub(w.tallied); d > 0 {
		w.busy += float64(b.held) * d.Seconds()
		w.tallied = now
	}
}

// record counts one finished request and exports it.
func (b *Balancer) record(outcome string, latency time.Duration) {
	b.metrics.request(b.service, outcome, latency)
	if outcome == OutcomeCanceled {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	w := &b.window
	w.requests++
	if outcome != OutcomeOK {
		w.errors++
		return
	}
	sec := latency.Seconds()
	if slo := b.settings.SLOLatencySeconds; slo <= 0 || sec <= slo {
		w.withinSLO++
	}
	if len(w.latencies) < maxSamples {
		w.latencies = append(w.latencies, sec)
	} else {
		w.latencies[w.seen%maxSamples] = sec
	}
	w.seen++
}

// Traffic is what the balancer measured since the previous call (or its
// start), with the requests in flight and queued now and the mean in
// flight over the window; it starts a new window.
func (b *Balancer) Traffic() (serving.Traffic, time.Duration) {
	b.mu.Lock()
	now := b.now()
	b.tallyLocked(now)
	w := b.window
	b.window = window{start: now, tallied: now, latencies: make([]float64, 0, min(len(w.latencies), maxSamples))}
	inFlight, queued := b.held, len(b.queue)
	b.mu.Unlock()

	span := now.Sub(w.start)
	t := serving.Traffic{InFlight: inFlight, Queued: queued, Requests: w.requests, Errors: w.errors, SLOShare: 1}
	if span > 0 {
		t.RPS = float64(w.requests) / span.Seconds()
		t.Serving = w.busy / span.Seconds()
	}
	if w.requests > 0 {
		t.SLOShare = float64(w.withinSLO) / float64(w.requests)
	}
	slices.Sort(w.latencies)
	t.LatencyP50Seconds = Quantile(w.latencies, 0.5)
	t.LatencyP90Seconds = Quantile(w.latencies, 0.9)
	t.LatencyP99Seconds = Quantile(w.latencies, 0.99)
	return t, span
}

// Quantile is the q-quantile of sorted values (nearest rank); 0 for none.
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
