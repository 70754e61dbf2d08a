package sim

import (
	"bytes"
	"os"
	"path/filepath"
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

// The built-in market is the shared collection, byte for byte, when that
// is present beside the repository.
func TestDefaultMarketMatchesTheSharedTraces(t *testing.T) {
	shared := filepath.Join("..", "..", "..", "..", "shared", "traces", "availability", "1-node", "aws-10-26-2022")
	want, err := filepath.Glob(filepath.Join(shared, "*.json"))
	if err != nil || len(want) == 0 {
		t.Skip("shared traces not present")
	}
	got, err := embeddedTraces.ReadDir(defaultMarketDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("%d embedded traces, %d shared", len(got), len(want))
	}
	for _, path := range want {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		e, err := embeddedTraces.ReadFile(defaultMarketDir + "/" + filepath.Base(path))
		if err != nil || !bytes.Equal(b, e) {
			t.Errorf("%s: embedded copy differs or is missing (%v)", filepath.Base(path), err)
		}
	}
}
