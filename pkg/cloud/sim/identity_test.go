package sim

import (
	"context"
	"fmt"
	"testing"

	"refuel/pkg/capacity"
)

// Instance IDs never repeat across restarts of the sim (a stale Release
// from before a restart must not end a later run's instance), even for
// requests with the same run and attempt.
func TestInstanceIDsAreUniqueAcrossRestarts(t *testing.T) {
	seen := map[string]int{}
	for life := range 3 {
		c, _ := newMarket(t, points(4), points(4), nil)
		for i := range 8 {
			o := []capacity.Offering{{Provider: ProviderName, InstanceType: v100A.InstanceType, Zone: v100A.Zone, Market: capacity.OnDemand}}
			inst, err := c.Acquire(context.Background(), capacity.Request{RunID: fmt.Sprintf("run-%d", i), Attempt: 1, Offerings: o})
			if err != nil {
				t.Fatal(err)
			}
			if prev, ok := seen[inst.ID]; ok {
				t.Errorf("life %d gave %s again, first given in life %d", life, inst.ID, prev)
			}
			seen[inst.ID] = life
		}
		for id, from := range seen {
			if from != life {
				if err := c.Release(context.Background(), id); !capacity.IsNotFound(err) {
					t.Errorf("life %d: releasing %s of life %d = %v; want NotFound", life, id, from, err)
				}
			}
		}
		_ = c.Close()
	}
}
