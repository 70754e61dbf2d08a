package sim

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDefaultMarketIsTheRealTraceSet(t *testing.T) {
	cfg, skipped, err := DefaultMarket(nil)
	if err != nil || len(skipped) != 0 {
		t.Fatalf("DefaultMarket: skipped %v, %v", skipped, err)
	}
	zones := map[string]int{}
	for _, p := range cfg.Pools {
		zones[p.Zone]++
		if p.Spot == nil || p.Spot.Len() != 3895 || p.Spot.Gap != 10*time.Minute {
			t.Errorf("pool %s: trace %+v; want 3,895 points 10 minutes apart", p.Pool, p.Spot)
		}
	}
	if len(cfg.Pools) != 8 || zones["us-west-2a"] != 4 || zones["us-west-2b"] != 4 {
		t.Errorf("pools by zone %v (%d pools); want 4 in us-west-2a and 4 in us-west-2b", zones, len(cfg.Pools))
	}
	if _, err := New(cfg); err != nil {
		t.Errorf("a cloud on the default market: %v", err)
	}
}

// The built-in markets are the shared collections, byte for byte, when
// those are present beside the repository.
func TestBuiltInMarketsMatchTheSharedTraces(t *testing.T) {
	for _, name := range BuiltInMarkets {
		shared := filepath.Join("..", "..", "..", "..", "shared", "traces", "availability", "1-node", name)
		got, err := embeddedTraces.ReadDir("traces/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(shared); err != nil {
			t.Skip("shared traces not present")
		}
		for _, e := range got {
			b, err := os.ReadFile(filepath.Join(shared, e.Name()))
			if err != nil {
				t.Errorf("%s/%s: not in the shared collection: %v", name, e.Name(), err)
				continue
			}
			if mine, _ := embeddedTraces.ReadFile("traces/" + name + "/" + e.Name()); !bytes.Equal(b, mine) {
				t.Errorf("%s/%s: the embedded copy differs from the shared one", name, e.Name())
			}
		}
	}
}

func TestMarketAtNamesABuiltInMarketOrADirectory(t *testing.T) {
	for where, want := range map[string]int{"": 8, "builtin:aws-10-26-2022": 8, "builtin:aws-02-15-2023": 9} {
		cfg, skipped, err := MarketAt(where, nil)
		if err != nil || len(skipped) != 0 || len(cfg.Pools) != want {
			t.Errorf("MarketAt(%q): %d pools, skipped %v, %v; want %d", where, len(cfg.Pools), skipped, err, want)
		}
	}
	// Every zone of the nine-zone market is one the embedded prices know.
	cfg, _, _ := MarketAt("builtin:aws-02-15-2023", nil)
	priced := cfg.WithPrices(DefaultPrices())
	for _, p := range priced.Pools {
		if p.SpotPrice == 0 || p.OnDemandPrice == 0 {
			t.Errorf("pool %s is not priced by the embedded prices", p.Pool)
		}
	}
	if _, _, err := MarketAt("builtin:nowhere", nil); err == nil || !strings.Contains(err.Error(), "builtin:aws-02-15-2023") {
		t.Errorf("an unknown built-in market: %v; want an error naming the ones there are", err)
	}
	if _, _, err := MarketAt(t.TempDir(), nil); err == nil {
		t.Error("an empty directory gave a market")
	}
}
