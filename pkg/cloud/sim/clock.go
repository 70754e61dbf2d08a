package sim

import (
	"context"
	"fmt"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/trace"
)

// DefaultRestartOverhead is what a start costs in market time unless
// configured: the 12 minutes the policy benchmark and its paper use.
const DefaultRestartOverhead = 12 * time.Minute

var _ capacity.MarketClock = (*Cloud)(nil)

// AwaitTick implements capacity.MarketClock. With a running clock it waits
// for the tick; with a clock that stands still (Speed 0) it advances the
// market to the tick at once, so a run decides at every tick as fast as
// it can and the market never runs ahead of it.
func (c *Cloud) AwaitTick(ctx context.Context, tick int) error {
	if c.cfg.Speed == 0 {
		if n := tick - c.Tick(); n > 0 {
			c.Advance(n)
		}
		return nil
	}
	every := time.Duration(float64(time.Second) / c.cfg.Speed)
	for c.Tick() < tick {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.closing.Done():
			return fmt.Errorf("sim: closed while waiting for tick %d", tick)
		case <-time.After(min(every, time.Second)):
		}
	}
	return nil
}

// SpotInStock implements capacity.MarketClock, reading the pool's point
// as starter sim reads it for a gang (trace.GangInStock).
func (c *Cloud) SpotInStock(zone, instanceType string, tick, nodes int) (bool, error) {
	key := Pool{Zone: zone, InstanceType: instanceType}
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.pools[key]
	if !ok {
		return false, fmt.Errorf("sim: no pool %s", key)
	}
	return tick >= 0 && trace.GangInStock(p.point(tick, c.cfg.Tick), nodes, p.everyNode), nil
}

// RestartOverhead implements capacity.MarketClock.
func (c *Cloud) RestartOverhead() time.Duration { return c.cfg.RestartOverhead }
