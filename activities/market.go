package activities

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"refuel/pkg/capacity"
)

// MarketPool is one zone and instance type whose spot stock a run watches.
type MarketPool struct {
	Zone         string `json:"zone"`
	InstanceType string `json:"instance_type"`
}

// MarketInput asks a provider's market clock for the stock of pools.
type MarketInput struct {
	Provider string       `json:"provider"`
	Pools    []MarketPool `json:"pools"`
	// Tick is the tick to wait for and report. OpenMarket ignores it and
	// reports the present tick with the past before it.
	Tick int `json:"tick"`
	// Nodes is the gang the run holds at once: Stock and Past say whether
	// spot for all of them can be had. 0 means one node. MinNodes, for an
	// elastic gang, is the fewest it trains on: the view adds Counts, and
	// Past tells stock for at least MinNodes apart.
	Nodes    int `json:"nodes,omitempty"`
	MinNodes int `json:"min_nodes,omitempty"`
}

// elastic reports whether the view is for an elastic gang.
func (in MarketInput) elastic() bool { return in.MinNodes > 0 && in.MinNodes < in.Nodes }

// MarketView is the market as a run sees it at a tick.
type MarketView struct {
	// Clocked is false for a provider whose market has no clock of its own
	// (real clouds): its runs keep wall time and nothing else is set.
	Clocked         bool          `json:"clocked"`
	Tick            int           `json:"tick"`
	TickLength      time.Duration `json:"tick_length"`
	RestartOverhead time.Duration `json:"restart_overhead"`
	// Stock says, per pool in the order asked, whether spot for the whole
	// gang (MarketInput.Nodes) can be had during Tick.
	Stock []bool `json:"stock"`
	// Counts is, for an elastic gang, how many of its nodes spot has in
	// stock per pool, at most Nodes.
	Counts []int `json:"counts,omitempty"`
	// Past is each pool's stock from tick PastFrom up to Tick, as Stock,
	// one '1' or '0' per tick, and for an elastic gang 'm' where spot for
	// at least MinNodes but not all can be had; only OpenMarket reports it.
	Past     []string `json:"past,omitempty"`
	PastFrom int      `json:"past_from,omitempty"`
}

// MaxMarketPast bounds the past OpenMarket reports: the most recent ticks
// (eight weeks of ten-minute ticks), so the answer stays well inside
// Temporal's payload limits.
const MaxMarketPast = 8192

// OpenMarket reports the market a run starts on: whether it keeps a
// clock, the present tick, and the past a scheduler watching the pools
// would have seen.
func (a *Capacity) OpenMarket(ctx context.Context, in MarketInput) (MarketView, error) {
	clock, err := a.marketClock(in.Provider)
	if clock == nil || err != nil {
		return MarketView{}, err
	}
	now := clock.Tick()
	view, err := a.stockAt(clock, in, now)
	if err != nil {
		return MarketView{}, err
	}
	view.PastFrom = max(0, now-MaxMarketPast)
	for _, p := range in.Pools {
		var b strings.Builder
		for t := view.PastFrom; t < now; t++ {
			n, err := clock.SpotStock(p.Zone, p.InstanceType, t, in.Nodes)
			if err != nil {
				return MarketView{}, nonRetryable(err)
			}
			switch {
			case n >= max(1, in.Nodes):
				b.WriteByte('1')
			case in.elastic() && n >= in.MinNodes:
				b.WriteByte('m')
			default:
				b.WriteByte('0')
			}
		}
		view.Past = append(view.Past, b.String())
	}
	return view, nil
}

// MarketAt waits until the market reaches in.Tick and reports the stock
// of the pools during it.
func (a *Capacity) MarketAt(ctx context.Context, in MarketInput) (MarketView, error) {
	clock, err := a.marketClock(in.Provider)
	if err != nil {
		return MarketView{}, err
	}
	if clock == nil {
		return MarketView{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("provider %q keeps no market clock", in.Provider), "NoMarketClock", nil)
	}
	if err := clock.AwaitTick(ctx, in.Tick); err != nil {
		return MarketView{}, err
	}
	return a.stockAt(clock, in, in.Tick)
}

func (a *Capacity) stockAt(clock capacity.MarketClock, in MarketInput, tick int) (MarketView, error) {
	view := MarketView{Clocked: true, Tick: tick, TickLength: clock.TickLength(), RestartOverhead: clock.RestartOverhead()}
	for _, p := range in.Pools {
		n, err := clock.SpotStock(p.Zone, p.InstanceType, tick, in.Nodes)
		if err != nil {
			return MarketView{}, nonRetryable(err)
		}
		view.Stock = append(view.Stock, n >= max(1, in.Nodes))
		if in.elastic() {
			view.Counts = append(view.Counts, n)
		}
	}
	return view, nil
}

// marketClock is the named provider's market clock, or nil if its runs
// keep wall time.
func (a *Capacity) marketClock(name string) (capacity.MarketClock, error) {
	if a.provider(name) == nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("no provider named %q on this worker (it has %v)", name, a.names()), "UnknownProvider", nil)
	}
	return a.Clocks[name], nil
}

func nonRetryable(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), string(capacity.SpecMismatch), nil)
}
