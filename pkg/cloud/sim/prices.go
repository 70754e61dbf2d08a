package sim

import (
	_ "embed"

	"refuel/pkg/trace"
)

// defaultPrices are p3.2xlarge's spot prices in the nine zones of the
// aws-02-15-2023 traces and its on-demand price in their three regions.
// The spot prices are one snapshot of DescribeSpotPriceHistory per zone,
// from a public catalogue that records it by zone ID; the zone IDs are
// mapped to these zone names in order, since the mapping differs between
// accounts, and the snapshot is dated at the traces' start. On-demand
// p3.2xlarge costs the same $3.06 in all three regions; spot ranges from
// $0.36 (us-east-2b) to $1.01 (us-west-2a).
//
//go:embed prices/aws-p3.2xlarge.json
var defaultPrices []byte

// DefaultPrices are the prices refuel embeds: see defaultPrices.
func DefaultPrices() *trace.Prices {
	p, err := trace.ParsePrices("embedded aws-p3.2xlarge prices", defaultPrices)
	if err != nil {
		panic(err) // the embedded file is checked by a test
	}
	return p
}

// EmbeddedPrices names DefaultPrices where a flag takes a price file.
const EmbeddedPrices = "embedded"

// LoadPrices reads the price file at path, or DefaultPrices when path is
// EmbeddedPrices.
func LoadPrices(path string) (*trace.Prices, error) {
	if path == EmbeddedPrices {
		return DefaultPrices(), nil
	}
	return trace.LoadPrices(path)
}

// WithPrices prices cfg's pools from p where it knows their zone and
// instance type: each pool's spot price from p's history (the price at
// start, the start of its history), and its on-demand price from its
// region's. Pools p does not know keep what they had.
func (cfg Config) WithPrices(p *trace.Prices) Config {
	pools := make([]PoolConfig, len(cfg.Pools))
	at := p.Start()
	for i, pc := range cfg.Pools {
		if usd, ok := p.SpotAt(pc.Zone, pc.InstanceType, at); ok {
			pc.SpotPrice = usd
		}
		if usd, ok := p.OnDemandIn(trace.Region(pc.Zone), pc.InstanceType); ok {
			pc.OnDemandPrice = usd
		}
		pools[i] = pc
	}
	cfg.Pools = pools
	return cfg
}

// InstanceTypeOf is the instance type of the default catalogue a trace
// stands for (see typeForTrace), to price it.
func InstanceTypeOf(t *trace.Trace) (string, bool) {
	it, ok := typeForTrace(DefaultCatalogue(), t.Instance, t.Count)
	return it.Name, ok
}
