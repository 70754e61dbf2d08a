package servingsim

import (
	"time"

	"refuel/pkg/spec"
)

// BenchSpec is refuel's configuration in the autoscaling benchmark: a
// warm pool of two stopped instances (about what this service adds within
// one cold start-up at its busiest, for the price of two volumes) that
// every policy in the bench is given alike.
func BenchSpec() spec.ServiceSpec {
	s := spec.ServiceSpec{
		ID: "bench-chat", MinReplicas: 1, MaxReplicas: 1000,
		Target:   spec.ScalingTarget{GPUUtilization: 1, QueueLength: 2},
		WarmPool: 2,
		// The model server the bench simulates, with BenchConfig's
		// batch and SLO: what staffing for the latency SLO reads.
		Command:        []string{"sh", "-c", "vllm serve bench-chat --port $REFUEL_PORT"},
		MaxConcurrency: 8,
		SLO:            &spec.SLO{Latency: spec.Duration(5 * time.Second)},
	}
	s.Normalize()
	return s
}

// BenchConfig is the service the autoscaling benchmark simulates. A
// replica prefills 2,000 context tokens/s and decodes 200 tokens/s summed
// over a batch of up to 8 requests (one mid-range GPU serving a 13B model
// with continuous batching). A request is met when its first token comes
// within 5 s of its arrival (its wait for a slot, then its prefill); one
// that waits 30 s for a slot fails. A cold start takes 60-180 s to
// provision, 30-90 s to initialise and 45-105 s to load the model. A
// warm-pool entry is a stopped instance with its runtime and weights on
// its volume: it starts in 30-60 s (EC2 StartInstances to a booted
// instance) and loads in 30-60 s, and costs only its volume while it
// waits. A machine taken from lower-priority work (none unless asked for)
// is handed over after that work's checkpoint, 10-40 s, and loads the
// model cold. The fleet reports every 10 s; prices are a g5.xlarge's on
// demand and a 200 GB gp3 volume's.
func BenchConfig() Config {
	sp := BenchSpec()
	return Config{
		Model: Model{PrefillTokensPerSecond: 2000, DecodeTokensPerSecond: 200},
		Startup: Startup{
			Provision: Range{Min: 60 * time.Second, Max: 180 * time.Second},
			Init:      Range{Min: 30 * time.Second, Max: 90 * time.Second},
			Load:      Range{Min: 45 * time.Second, Max: 105 * time.Second},
		},
		Warm: Startup{
			Provision: Range{Min: 30 * time.Second, Max: 60 * time.Second},
			Load:      Range{Min: 30 * time.Second, Max: 60 * time.Second},
		},
		WarmPool: BenchSpec().WarmPool,
		Borrow: Startup{
			Provision: Range{Min: 10 * time.Second, Max: 40 * time.Second},
			Load:      Range{Min: 45 * time.Second, Max: 105 * time.Second},
		},
		MaxConcurrency:   sp.MaxConcurrency,
		SLOLatency:       sp.SLO.Latency.D(),
		QueueTimeout:     sp.QueueTimeout.D(),
		Every:            10 * time.Second,
		PricePerHour:     1.006, // a g5.xlarge (1x A10G) on demand
		WarmPricePerHour: 0.022, // a stopped instance's 200 GB gp3 volume ($0.08 per GB-month)
		Seed:             1,
	}
}
