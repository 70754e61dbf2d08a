package sim

import (
	"time"

	"refuel/pkg/capacity"
)

// Interrupt serves an interruption notice to an instance and takes it
// after grace, the way a spot market reclaims capacity (the drill uses
// it); it returns when the notice was served.
func (c *Cloud) Interrupt(id string, grace time.Duration) (time.Time, error) {
	c.mu.Lock()
	now := c.cfg.Now()
	stops := c.refreshLocked(now)
	inst, ok := c.instances[id]
	live := ok && inst.state != capacity.StateTerminated && inst.state != capacity.StateStopped
	if live {
		c.noticeLocked(inst, now.Add(grace), "manual interruption")
	}
	c.mu.Unlock()
	c.stopAgents(stops)
	if !live {
		return time.Time{}, &capacity.NotFoundError{ID: id}
	}
	return now, nil
}

// HoldStock takes the stock of an instance's market in its zone away for
// d, every instance type's: no launch there succeeds until then, whatever
// the traces say. Drills use it to take a node while its zone has nothing
// to replace it with.
func (c *Cloud) HoldStock(id string, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	inst, ok := c.instances[id]
	if !ok {
		return &capacity.NotFoundError{ID: id}
	}
	if c.held == nil {
		c.held = map[string]time.Time{}
	}
	c.held[heldKey(inst.Offering.Zone, inst.Offering.Market)] = c.cfg.Now().Add(d)
	return nil
}

// HoldClock stops the market's clock for d from now (d of 0 lets it go
// at once): its ticks pass without moving the market, so no stock
// changes meanwhile. Drills use it to measure a recovery rather than the
// market's next move. Only the clock that runs at Speed stands still; a
// run on the market clock moves it itself.
func (c *Cloud) HoldClock(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.still = c.cfg.Now().Add(d)
}

// clockStill reports whether HoldClock stops the clock now.
func (c *Cloud) clockStill() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg.Now().Before(c.still)
}

// heldKey is what HoldStock holds: a market in a zone.
func heldKey(zone string, m capacity.Market) string { return zone + "/" + string(m) }
