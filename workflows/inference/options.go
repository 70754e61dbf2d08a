package inference

import "time"

// ServiceOptions are the knobs of an InferenceService that are not in its
// ServiceSpec, recorded and kept like RunOptions.
type Options struct {
	// DecisionInterval is how often the service decides when no metrics
	// arrive: schedules open and delays run out on the clock alone.
	DecisionInterval time.Duration
	// FailureBackoff is the first hold after an acquisition failure that
	// waiting does not cure (quota, spec mismatch, price); each further
	// one doubles it, up to MaxFailureBackoff.
	FailureBackoff    time.Duration
	MaxFailureBackoff time.Duration
	// MaxHistory continues as new past this many events, even before
	// the server suggests it.
	MaxHistory int
	// LossCheckInterval is how often the service asks the clouds whether
	// they took back a replica's instance (see lossWatch.goCheck); 0 never.
	LossCheckInterval time.Duration
	// MetricsStaleAfter is how long a service's latest metrics report
	// counts: past it with none newer, it scales to what its schedules
	// and min_replicas say (autoscale.Autoscaler.StaleAfter); 0 never.
	MetricsStaleAfter time.Duration
}

// DefaultServiceOptions are the options an InferenceService uses unless
// the worker is told otherwise.
func DefaultOptions() Options {
	return Options{
		DecisionInterval:  10 * time.Second,
		FailureBackoff:    time.Minute,
		MaxFailureBackoff: 15 * time.Minute,
		MaxHistory:        5000,
		LossCheckInterval: 30 * time.Second,
		// Load generators and metrics pipelines report every few seconds:
		// five minutes of silence means they stopped.
		MetricsStaleAfter: 5 * time.Minute,
	}
}
