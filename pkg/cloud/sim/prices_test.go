package sim

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
	"refuel/pkg/trace"
)

func TestDefaultPricesCoverTheTracesZones(t *testing.T) {
	p := DefaultPrices()
	zones := []string{"us-east-1a", "us-east-1c", "us-east-1d", "us-east-1f", "us-east-2a", "us-east-2b", "us-west-2a", "us-west-2b", "us-west-2c"}
	lo, hi := 10.0, 0.0
	for _, z := range zones {
		spot, ok := p.SpotAt(z, "p3.2xlarge", p.Start())
		od, odOK := p.OnDemandIn(trace.Region(z), "p3.2xlarge")
		if !ok || !odOK || spot >= od {
			t.Errorf("%s: spot %v (%v), on-demand %v (%v); want both, spot below on-demand", z, spot, ok, od, odOK)
		}
		lo, hi = min(lo, spot), max(hi, spot)
	}
	if hi < 2*lo {
		t.Errorf("spot from $%.2f to $%.2f; want the zones' real differences", lo, hi)
	}
}

func TestWithPricesPricesEachPool(t *testing.T) {
	east := Pool{Zone: "us-east-2b", InstanceType: "p3.2xlarge"}
	west := Pool{Zone: "us-west-2a", InstanceType: "p3.2xlarge"}
	other := Pool{Zone: "us-west-2a", InstanceType: "p2.xlarge"}
	tr := &trace.Trace{Gap: 10 * time.Minute, Points: []int{1}}
	cfg := Config{Pools: []PoolConfig{{Pool: east, Spot: tr}, {Pool: west, Spot: tr}, {Pool: other, Spot: tr}}}.WithPrices(DefaultPrices())
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := map[Pool][2]float64{east: {0.3635, 3.06}, west: {1.01, 3.06}, other: {0.27, 0.90}}
	for _, ps := range c.Market().Pools {
		if w := want[ps.Pool]; ps.SpotPrice != w[0] || ps.OnDemandPrice != w[1] {
			t.Errorf("%s: spot %v, on-demand %v; want %v", ps.Pool, ps.SpotPrice, ps.OnDemandPrice, w)
		}
	}
	offers, err := c.Offerings(context.Background(), spec.Resources{GPUs: 1, InstanceTypes: []string{"p3.2xlarge"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offers {
		if w := want[Pool{Zone: o.Zone, InstanceType: o.InstanceType}]; o.Market == capacity.Spot && o.PricePerHour != w[0] || o.Market == capacity.OnDemand && o.PricePerHour != w[1] {
			t.Errorf("offering %+v; want the pool's own prices %v", o, w)
		}
	}
}

func TestLoadPricesEmbeddedOrFile(t *testing.T) {
	p, err := LoadPrices(EmbeddedPrices)
	if err != nil || !p.Start().Equal(DefaultPrices().Start()) {
		t.Fatalf("embedded prices: %v, start %v; want DefaultPrices", err, p)
	}
	if _, err := LoadPrices(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("a missing file: error %v; want one naming the file", err)
	}
}
