package sim

import (
	"context"
	"fmt"
	"time"

	"refuel/pkg/capacity"
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

// SpotStock implements capacity.MarketClock, reading the pool's point as
// starter sim reads it for a gang: a count in a trace of counts, and in a
// one-node trace a 1 that stands for every node alike.
func (c *Cloud) SpotStock(zone, instanceType string, tick, nodes int) (int, error) {
	key := Pool{Zone: zone, InstanceType: instanceType}
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.pools[key]
	if !ok {
		return 0, fmt.Errorf("sim: no pool %s", key)
	}
	if tick < 0 {
		return 0, nil
	}
	return min(p.stock(tick, c.cfg.Tick), max(1, nodes)), nil
}

// RestartOverhead implements capacity.MarketClock.
func (c *Cloud) RestartOverhead() time.Duration { return c.cfg.RestartOverhead }
