package capacity

import (
	"context"
	"time"
)

// MarketClock is a provider whose spot market moves in ticks of its own
// clock rather than of the wall clock: the simulated cloud replaying
// traces. Runs on such a market decide at each of its ticks and count
// their time in its time, so that a simulated day takes what the
// simulation makes it take.
type MarketClock interface {
	// TickLength is the market time one tick stands for.
	TickLength() time.Duration
	// Tick is the tick the market is at.
	Tick() int
	// AwaitTick returns once the market is at tick or past it. A market
	// whose clock stands still is moved on to tick, so a run can drive it.
	AwaitTick(ctx context.Context, tick int) error
	// SpotStock is how many of a gang of nodes instances (below 1 counts
	// as 1) spot of the instance type has in stock in the zone during tick
	// (past or present), at most nodes; asking of a pool the market does
	// not sell is an error.
	SpotStock(zone, instanceType string, tick, nodes int) (int, error)
	// RestartOverhead is the market time a start of an instance costs
	// before its work progresses: boot, setup, restoring a checkpoint.
	RestartOverhead() time.Duration
}
