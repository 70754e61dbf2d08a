package local

import (
	"context"
	"fmt"
	"testing"
	"time"

	"refuel/pkg/capacity"
)

// Instance IDs never repeat across restarts of the cloud on one data dir
// (nor between two clouds at once, as two workers on one cluster have):
// a stale Release from before must not end a later run's instance, even
// when that run asks with the same run and attempt.
func TestInstanceIDsAreUniqueAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	seen := map[string]string{}
	start := func() *Cloud {
		c, err := New(Config{LauncherConfig: LauncherConfig{AgentCommand: fakeAgent(false), Dir: dir, ReadyTimeout: 5 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	acquire := func(c *Cloud, life string, tags map[string]string) {
		for i, o := range DefaultOfferings() {
			req := request(fmt.Sprintf("run-%d-%d", len(tags), i), 1, o)
			req.Tags = tags
			inst, err := c.Acquire(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if prev, ok := seen[inst.ID]; ok {
				t.Errorf("%s gave %s again, first given by %s", life, inst.ID, prev)
			}
			seen[inst.ID] = life
		}
	}
	for _, life := range []string{"first life", "after a restart", "after another"} {
		before := len(seen)
		c := start()
		acquire(c, life, nil)
		acquire(c, life+" (base node)", map[string]string{capacity.TagNode: "gpu-node-01"})
		// A Release of any earlier life's instance finds nothing to end.
		for id, from := range seen {
			if from != life && from != life+" (base node)" {
				if err := c.Release(context.Background(), id); !capacity.IsNotFound(err) {
					t.Errorf("%s: releasing %s of the %s = %v; want NotFound", life, id, from, err)
				}
			}
		}
		if list, _ := c.List(context.Background(), nil); len(list) != len(seen)-before {
			t.Errorf("%s: %d instances running after stale releases; want %d", life, len(list), len(seen)-before)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	a, b := start(), start()
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	acquire(a, "worker a", nil)
	acquire(b, "worker b", nil)
	if len(seen) != 4*(2*3+2) {
		t.Errorf("%d distinct IDs; want %d", len(seen), 4*(2*3+2))
	}
}
