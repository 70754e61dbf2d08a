package servingsim

import (
	"time"

	"refuel/pkg/spec"
)

// BenchSpec is refuel's configuration in the autoscaling benchmark. The
// bench's SLO counts capacity equal to demand as met, so refuel targets
// full utilisation, like every other policy there; the margin for
// forecast error is learned, not configured.
func BenchSpec() spec.ServiceSpec {
	s := spec.ServiceSpec{
		ID: "bench-chat", MinReplicas: 1, MaxReplicas: 1000,
		Target: spec.ScalingTarget{GPUUtilization: 1, QueueLength: 2},
		// Two stopped instances: about what this service adds within one
		// cold start-up at its busiest, for the price of two disks.
		WarmPool: 2,
	}
	s.Normalize()
	return s
}

// BenchConfig is the service the autoscaling benchmark simulates. A
// replica prefills 2,000 context tokens/s and decodes 200 tokens/s summed
// over its batch (one mid-range GPU serving a 13B model with continuous
// batching). A requested replica takes 60-180 s to provision, 30-90 s to
// initialise and 45-105 s to load the model. A warm-pool instance is
// stopped with its runtime and weights on disk: it resumes in 20-40 s and
// loads in 30-60 s, and costs only its disk while it waits. The fleet
// reports every 10 s; prices are a g5.xlarge's on demand and a 200 GB
// volume's.
func BenchConfig() Config {
	return Config{
		Model: Model{PrefillTokensPerSecond: 2000, DecodeTokensPerSecond: 200},
		Startup: Startup{
			Provision: Range{Min: 60 * time.Second, Max: 180 * time.Second},
			Init:      Range{Min: 30 * time.Second, Max: 90 * time.Second},
			Load:      Range{Min: 45 * time.Second, Max: 105 * time.Second},
		},
		Warm: Startup{
			Provision: Range{Min: 20 * time.Second, Max: 40 * time.Second},
			Load:      Range{Min: 30 * time.Second, Max: 60 * time.Second},
		},
		Every:            10 * time.Second,
		PricePerHour:     1.006, // a g5.xlarge (1x A10G) on demand
		WarmPricePerHour: 0.02,  // a stopped instance's 200 GB volume
		Seed:             1,
	}
}
