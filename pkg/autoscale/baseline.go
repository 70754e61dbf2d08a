package autoscale

import (
	"fmt"
	"time"
)

// Reactive is a baseline shaped like SkyServe's request-rate autoscaler:
// replicas are the QPS over the last Window divided by TargetQPS, and a
// change is made only after it has been wanted in every decision for
// UpscaleDelay (more) or DownscaleDelay (fewer).
type Reactive struct {
	TargetQPS      float64       `json:"target_qps"`
	Window         time.Duration `json:"window"`
	UpscaleDelay   time.Duration `json:"upscale_delay"`
	DownscaleDelay time.Duration `json:"downscale_delay"`
	Min            int           `json:"min"`
	Max            int           `json:"max"`
	Reports        []Metrics     `json:"reports,omitempty"`
	// UpSince and DownSince are when more, or fewer, replicas started to
	// be wanted in every decision; zero when not.
	UpSince   time.Time `json:"up_since,omitzero"`
	DownSince time.Time `json:"down_since,omitzero"`
}

// NewReactive returns the baseline with SkyServe's default delays: 300 s
// up and 1200 s down, over a 60 s QPS window.
func NewReactive(targetQPS float64, minReplicas, maxReplicas int) *Reactive {
	return &Reactive{TargetQPS: targetQPS, Window: time.Minute, UpscaleDelay: 300 * time.Second, DownscaleDelay: 1200 * time.Second, Min: minReplicas, Max: maxReplicas}
}

func (r *Reactive) Observe(m Metrics) {
	r.Reports = append(r.Reports, m)
	r.Reports = dropBefore(r.Reports, m.At.Add(-r.Window))
}

func (r *Reactive) Started(Startup) {}

func (r *Reactive) Decide(now time.Time, f Fleet) Decision {
	have := f.Replicas()
	if len(r.Reports) == 0 {
		return Decision{Replicas: have, Reason: "no load reported yet"}
	}
	var qps float64
	for _, m := range r.Reports {
		qps += m.QPS
	}
	qps /= float64(len(r.Reports))
	want := min(max(replicasFor(qps/r.TargetQPS), r.Min), r.Max)
	reason := fmt.Sprintf("%.2f QPS", qps)
	switch {
	case want > have:
		r.DownSince = time.Time{}
		if r.UpSince.IsZero() {
			r.UpSince = now
		}
		if now.Sub(r.UpSince) < r.UpscaleDelay {
			return Decision{Replicas: have, Reason: reason + "; upscale delay"}
		}
	case want < have:
		r.UpSince = time.Time{}
		if r.DownSince.IsZero() {
			r.DownSince = now
		}
		if now.Sub(r.DownSince) < r.DownscaleDelay {
			return Decision{Replicas: have, Reason: reason + "; downscale delay"}
		}
	}
	r.UpSince, r.DownSince = time.Time{}, time.Time{}
	return Decision{Replicas: want, Reason: reason}
}

// Static keeps a fixed number of replicas: provisioning for the peak.
type Static struct {
	Replicas int `json:"replicas"`
}

func (Static) Observe(Metrics) {}
func (Static) Started(Startup) {}
func (s Static) Decide(time.Time, Fleet) Decision {
	return Decision{Replicas: s.Replicas, Reason: "static"}
}
