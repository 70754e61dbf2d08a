package autoscale

import (
	"slices"
	"time"
)

// LeadTime learns how far ahead of need a replica must be requested: a
// high quantile of the latest measured cold start-ups (provision, init and
// model load). A high quantile rather than the mean, because a replica
// that arrives late costs SLO while one that arrives early costs only its
// wait. The zero value estimates DefaultLeadTime until it has samples.
type LeadTime struct {
	// Fixed, when positive, is used as is and samples are ignored.
	Fixed time.Duration `json:"fixed,omitempty"`
	// Samples are the latest cold start-ups, oldest first.
	Samples []time.Duration `json:"samples,omitempty"`
}

const (
	// DefaultLeadTime is assumed before any start-up is measured: cloud
	// GPU instances commonly take 1-3 min to provision and as much again
	// to boot and load a model.
	DefaultLeadTime = 5 * time.Minute
	// leadSamples bounds the history, so it follows changes in the
	// clouds and stays small in workflow state.
	leadSamples = 20
	// leadQuantile is the share of start-ups the estimate covers.
	leadQuantile = 0.9
)

// Record adds a measured start-up. Warm starts are left out: the lead
// must hold when the warm pool is empty.
func (l *LeadTime) Record(s Startup) {
	if s.Warm {
		return
	}
	l.Samples = append(l.Samples, s.Total())
	if n := len(l.Samples); n > leadSamples {
		l.Samples = slices.Delete(l.Samples, 0, n-leadSamples)
	}
}

// Estimate is the lead time to plan with.
func (l LeadTime) Estimate() time.Duration {
	if l.Fixed > 0 {
		return l.Fixed
	}
	if len(l.Samples) == 0 {
		return DefaultLeadTime
	}
	s := slices.Clone(l.Samples)
	slices.Sort(s)
	return s[int(leadQuantile*float64(len(s)-1)+0.5)]
}
