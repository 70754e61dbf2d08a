// Package servingsim replays request traffic against an inference
// service's replica fleet on a virtual clock: replicas take time to
// provision, initialise and load the model; ready replicas serve requests
// in arrival order; an autoscale.Policy decides the fleet from the
// metrics the fleet reports. It measures what the autoscaling benchmark
// compares: SLO attainment and the replica-hours paid.
package servingsim

import (
	"math/rand/v2"
	"time"

	"refuel/pkg/traffic"
)

// Model is how much work a request is: a replica prefills the context
// and then decodes the generated tokens, each at its own rate. The rates
// are a replica's throughput with continuous batching, so a replica
// serves the sum of the work of its requests in that much time.
type Model struct {
	PrefillTokensPerSecond float64
	DecodeTokensPerSecond  float64
}

// Work is the replica time a request takes.
func (m Model) Work(r traffic.Request) time.Duration {
	s := float64(r.ContextTokens)/m.PrefillTokensPerSecond + float64(r.GeneratedTokens)/m.DecodeTokensPerSecond
	return time.Duration(s * float64(time.Second))
}

// Range is a duration drawn uniformly from [Min, Max].
type Range struct{ Min, Max time.Duration }

func (r Range) draw(rng *rand.Rand) time.Duration {
	if r.Max <= r.Min {
		return r.Min
	}
	return r.Min + time.Duration(rng.Int64N(int64(r.Max-r.Min)+1))
}

// Startup draws a replica's provision, initialisation and model-load
// times from the given ranges.
type Startup struct {
	Provision, Init, Load Range
}

// Max is the longest a replica can take to start.
func (s Startup) Max() time.Duration { return s.Provision.Max + s.Init.Max + s.Load.Max }
