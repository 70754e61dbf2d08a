package sim

import (
	"fmt"
	"math"
	"sort"
	"time"

	"go.uber.org/zap"

	"refuel/pkg/capacity"
)

// PricePoint is the spot price of a pool from a moment on.
type PricePoint struct {
	Time  time.Time
	Price float64
}

// Market is a snapshot of the market: where its clock is and what each
// pool holds.
type Market struct {
	// Tick is the trace tick the market is at (StartTick at opening).
	Tick int
	// TraceTime is Tick × the tick length: how far into the traces.
	TraceTime time.Duration
	Pools     []PoolState
}

// PoolState is one pool in a Market snapshot.
type PoolState struct {
	Pool
	SellsSpot bool `json:"sells_spot"`
	// SpotStock is the trace's point now: the spot instances the pool
	// holds, or with EveryNode, whether it holds any.
	SpotStock int `json:"spot_stock"`
	// EveryNode says the pool's trace is of one node (every point 0 or
	// 1): a point of 1 is stock for every spot launch alike, as starter
	// sim reads it for a gang (trace.GangInStock).
	EveryNode bool `json:"every_node,omitempty"`
	// SpotRunning counts spot instances pending or running and not under
	// notice; a spot launch succeeds while it is below the stock.
	SpotRunning int `json:"spot_running"`
	// Notices counts spot instances serving an interruption notice.
	Notices         int     `json:"notices"`
	OnDemandRunning int     `json:"on_demand_running"`
	SpotPrice       float64 `json:"spot_price"`
	OnDemandPrice   float64 `json:"on_demand_price"`
}

type pool struct {
	PoolConfig
	itype     InstanceType
	prices    []PricePoint // oldest first; the last is today's spot price
	last      int          // the point at the previous tick, to log changes
	everyNode bool         // a one-node trace: a point of 1 stocks any number
}

// unlimitedStock is the stock of a one-node trace's point of 1: more spot
// instances than any account runs in one pool.
const unlimitedStock = math.MaxInt32

// SpotSpare is how many more spot instances the pool would launch now.
func (ps PoolState) SpotSpare() int {
	stock := ps.SpotStock
	if ps.EveryNode && stock > 0 {
		stock = unlimitedStock
	}
	return max(0, stock-ps.SpotRunning)
}

// point is the pool's spot stock at a tick: its trace's point at the
// tick's trace time, the trace replaying from its start once it ends.
func (p *pool) point(tick int, tickLen time.Duration) int {
	if p.Spot == nil {
		return 0
	}
	i := int(time.Duration(tick) * tickLen / p.Spot.Gap)
	return p.Spot.Points[i%len(p.Spot.Points)]
}

// stock is how many spot instances the pool holds at a tick: its point,
// read as starter sim reads it (trace.GangInStock): a count in a trace of
// counts, and in a one-node trace a 1 that stands for every node alike.
func (p *pool) stock(tick int, tickLen time.Duration) int {
	point := p.point(tick, tickLen)
	if p.everyNode && point > 0 {
		return unlimitedStock
	}
	return point
}

func (p *pool) spotPrice() float64 { return p.prices[len(p.prices)-1].Price }

// onDemandPrice is the pool's on-demand price: its own, or its type's.
func (p *pool) onDemandPrice() float64 {
	if p.OnDemandPrice > 0 {
		return p.OnDemandPrice
	}
	return p.itype.OnDemandPrice
}

func (p *pool) offering(m capacity.Market) capacity.Offering {
	price := p.onDemandPrice()
	if m == capacity.Spot {
		price = p.spotPrice()
	}
	return capacity.Offering{Provider: ProviderName, InstanceType: p.InstanceType, Zone: p.Zone, Market: m, GPUs: p.itype.GPUs, PricePerHour: price}
}

// Advance moves the market n ticks on, applying each tick's stock in turn:
// a pool whose stock fell below its running spot instances serves notices
// to the newest of them (those that have invested least in their runs)
// until the rest fit.
func (c *Cloud) Advance(n int) {
	c.mu.Lock()
	now := c.cfg.Now()
	stops := c.refreshLocked(now)
	for range n {
		c.tick++
		c.applyStockLocked(now)
	}
	c.mu.Unlock()
	c.stopAgents(stops)
}

// Tick is the trace tick the market is at.
func (c *Cloud) Tick() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tick
}

// TickLength is the trace time of one tick.
func (c *Cloud) TickLength() time.Duration { return c.cfg.Tick }

func (c *Cloud) runClock(every time.Duration) {
	defer close(c.clock)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.closing.Done():
			return
		case <-t.C:
			if !c.clockStill() {
				c.Advance(1)
			}
		}
	}
}

func (c *Cloud) applyStockLocked(now time.Time) {
	spot := c.runningSpotLocked()
	for _, key := range c.order {
		p := c.pools[key]
		if p.Spot == nil {
			continue
		}
		stock := p.point(c.tick, c.cfg.Tick)
		if stock != p.last {
			c.log.Debug("spot stock changed", zap.Stringer("pool", key), zap.Int("tick", c.tick), zap.Int("from", p.last), zap.Int("to", stock))
			p.last = stock
		}
		running := spot[key] // newest first
		stock = p.stock(c.tick, c.cfg.Tick)
		for i := 0; i < len(running)-stock; i++ {
			c.noticeLocked(running[i], now.Add(c.noticeWindow(p)), fmt.Sprintf("spot stock of %s fell to %d at tick %d with %d running", key, stock, c.tick, len(running)))
		}
	}
}

// noticeWindow is the time a notice in pool p leaves before the instance
// is taken.
func (c *Cloud) noticeWindow(p *pool) time.Duration {
	if p.NoticeWindow > 0 {
		return p.NoticeWindow
	}
	return c.cfg.NoticeWindow
}

// noticeWindowOf is the notice its pool gives an instance (the cloud's
// default for one unknown).
func (c *Cloud) noticeWindowOf(id string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if inst, ok := c.instances[id]; ok {
		if p := c.pools[Pool{Zone: inst.Offering.Zone, InstanceType: inst.Offering.InstanceType}]; p != nil {
			return c.noticeWindow(p)
		}
	}
	return c.cfg.NoticeWindow
}

// runningSpotLocked groups the spot instances holding stock (pending or
// running, not under notice) by pool, newest first.
func (c *Cloud) runningSpotLocked() map[Pool][]*instance {
	out := map[Pool][]*instance{}
	for _, inst := range c.instances {
		if inst.Offering.Market == capacity.Spot && holdsStock(inst.state) {
			key := Pool{Zone: inst.Offering.Zone, InstanceType: inst.Offering.InstanceType}
			out[key] = append(out[key], inst)
		}
	}
	for _, list := range out {
		sort.Slice(list, func(i, j int) bool { return list[i].seq > list[j].seq })
	}
	return out
}

// holdsStock reports whether an instance in state s counts against its
// pool's stock: one under notice has already been given back.
func holdsStock(s capacity.State) bool {
	return s == capacity.StatePending || s == capacity.StateRunning
}

// Market returns a snapshot of the market.
func (c *Cloud) Market() Market {
	c.refresh()
	c.mu.Lock()
	defer c.mu.Unlock()
	m := Market{Tick: c.tick, TraceTime: time.Duration(c.tick) * c.cfg.Tick}
	states := map[Pool]*PoolState{}
	for _, key := range c.order {
		p := c.pools[key]
		ps := PoolState{Pool: key, SellsSpot: p.Spot != nil, SpotStock: p.point(c.tick, c.cfg.Tick), EveryNode: p.everyNode, SpotPrice: p.spotPrice(), OnDemandPrice: p.onDemandPrice()}
		m.Pools = append(m.Pools, ps)
	}
	for i := range m.Pools {
		states[m.Pools[i].Pool] = &m.Pools[i]
	}
	for _, inst := range c.instances {
		ps := states[Pool{Zone: inst.Offering.Zone, InstanceType: inst.Offering.InstanceType}]
		switch {
		case ps == nil || inst.state == capacity.StateTerminated:
		case inst.Offering.Market == capacity.OnDemand:
			ps.OnDemandRunning++
		case inst.state == capacity.StateInterrupted:
			ps.Notices++
		default:
			ps.SpotRunning++
		}
	}
	return m
}

// SetSpotPrice changes a pool's spot price from now on; the change shows
// in its price history.
func (c *Cloud) SetSpotPrice(key Pool, price float64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.pools[key]
	switch {
	case !ok || p.Spot == nil:
		return fmt.Errorf("pool %s sells no spot", key)
	case !(price > 0):
		return fmt.Errorf("spot price %v: must be positive", price)
	}
	p.prices = append(p.prices, PricePoint{Time: c.cfg.Now(), Price: price})
	c.log.Info("spot price changed", zap.Stringer("pool", key), zap.Float64("price", price))
	return nil
}

// SpotPriceHistory returns a pool's spot prices, oldest first: the price
// it opened at, then every change. Nil for a pool that sells no spot.
func (c *Cloud) SpotPriceHistory(key Pool) []PricePoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.pools[key]
	if !ok || p.Spot == nil {
		return nil
	}
	return append([]PricePoint(nil), p.prices...)
}

// Catalogue returns the instance types sold in at least one pool.
func (c *Cloud) Catalogue() []InstanceType {
	var out []InstanceType
	for _, t := range c.cfg.Catalogue {
		for _, key := range c.order {
			if key.InstanceType == t.Name {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

// Now is the sim's clock.
func (c *Cloud) Now() time.Time { return c.cfg.Now() }

// SpotStockLately returns a pool's spot stock at each tick of the last
// span of trace time up to the market's tick, oldest first, from the
// first tick at the earliest: what its trace says it held lately. Nil for
// a pool that sells no spot.
func (c *Cloud) SpotStockLately(key Pool, span time.Duration) []int {
	c.refresh()
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.pools[key]
	if !ok || p.Spot == nil {
		return nil
	}
	from := max(0, c.tick-int(span/c.cfg.Tick))
	out := make([]int, 0, c.tick-from+1)
	for t := from; t <= c.tick; t++ {
		out = append(out, p.point(t, c.cfg.Tick))
	}
	return out
}
