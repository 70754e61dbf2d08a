// Package cost prices what a job rents: the per-job Ledger of paid
// instance segments, the work lost to preemptions and the time spent
// recovering, and a rollup of many jobs by team and pool.
//
// Everything here is a pure function of its arguments. The Ledger lives in
// workflow state, so it takes the time as an argument instead of reading
// the clock, and no result depends on map iteration order.
package cost

import "time"

// Segment is one instance paid for one stretch of time.
type Segment struct {
	InstanceID string `json:"instance_id"`
	Pool       string `json:"pool"`
	// Market is how the instance is sold: capacity.Spot, OnDemand or Base
	// ("spot", "on-demand", "base").
	Market       string    `json:"market"`
	Offering     string    `json:"offering"` // capacity.Offering.Key
	PricePerHour float64   `json:"price_per_hour"`
	Start        time.Time `json:"start"`
	// End is zero while the instance is still paid for.
	End time.Time `json:"end,omitzero"`
	// LostWorkSeconds is work done on this instance and lost with it;
	// RecoverySeconds is its paid time spent restarting and restoring a
	// checkpoint rather than training. Both are within the ledger's
	// totals.
	LostWorkSeconds float64 `json:"lost_work_seconds,omitempty"`
	RecoverySeconds float64 `json:"recovery_seconds,omitempty"`
	// IdleSeconds is its paid time nobody used: a development
	// environment's hours without use, within the ledger's totals.
	IdleSeconds float64 `json:"idle_seconds,omitempty"`
	// Stopped is set on a stretch the instance spent stopped (a warm-pool
	// entry): PricePerHour is then its volume's, and its hours are volume
	// hours, not instance hours.
	Stopped bool `json:"stopped,omitempty"`
}

// IdleUSD is what the segment's idle time cost.
func (s Segment) IdleUSD() float64 { return s.IdleSeconds / 3600 * s.PricePerHour }

func (s Segment) open() bool { return s.End.IsZero() }

// Hours is the paid time up to End, or up to now while open. A segment
// that ends before it starts counts as no time.
func (s Segment) Hours(now time.Time) float64 {
	end := s.End
	if s.open() {
		end = now
	}
	if !end.After(s.Start) {
		return 0
	}
	return end.Sub(s.Start).Hours()
}

// USD is the segment's cost up to End, or up to now while open.
func (s Segment) USD(now time.Time) float64 { return s.Hours(now) * s.PricePerHour }

// Ledger is what one job has paid for. The zero value is an empty ledger.
// Its fields are exported because it is serialised in workflow state.
type Ledger struct {
	// Segments are in the order they were opened.
	Segments []Segment `json:"segments"`
	// LostWorkSeconds is work done and then lost to preemptions, to be
	// computed again.
	LostWorkSeconds float64 `json:"lost_work_seconds"`
	// RecoverySeconds is paid time spent restoring checkpoints and
	// restarting rather than training.
	RecoverySeconds float64 `json:"recovery_seconds"`
	// Resizes are an elastic gang's shrinks and growths, in order.
	Resizes []Resize `json:"resizes,omitempty"`
	// IdleSeconds is paid time nobody used (AddIdle).
	IdleSeconds float64 `json:"idle_seconds,omitempty"`
}

// Resize is an elastic gang changing how many nodes it trains on: from
// Step (the checkpoint it resumed from) on, it trained on To nodes.
type Resize struct {
	Time time.Time `json:"time"`
	Step int64     `json:"step"`
	From int       `json:"from"`
	To   int       `json:"to"`
}

// AddResize books a gang's change of width.
func (l *Ledger) AddResize(at time.Time, step int64, from, to int) {
	l.Resizes = append(l.Resizes, Resize{Time: at, Step: step, From: from, To: to})
}

// Open starts paying for an instance.
func (l *Ledger) Open(seg Segment) {
	l.Segments = append(l.Segments, seg)
}

// Close stops paying for an instance at end. Closing an instance with no
// open segment does nothing, so a retried close is harmless; an end before
// the segment's start closes it at its start (no time).
func (l *Ledger) Close(instanceID string, end time.Time) {
	for i := range l.Segments {
		s := &l.Segments[i]
		if s.InstanceID != instanceID || !s.open() {
			continue
		}
		s.End = end
		if !end.After(s.Start) {
			s.End = s.Start
		}
	}
}

// Reprice ends the instance's open segment at at and opens the next one
// like it, at price, stopped or not: an instance stopped (paid for its
// volume alone) or started again. An instance with no open segment is
// left as it is.
func (l *Ledger) Reprice(instanceID string, at time.Time, price float64, stopped bool) {
	s := l.latest(instanceID)
	if s == nil || !s.open() {
		return
	}
	next := Segment{InstanceID: instanceID, Pool: s.Pool, Market: s.Market, Offering: s.Offering, PricePerHour: price, Start: at, Stopped: stopped}
	l.Close(instanceID, at)
	if next.Start.Before(s.End) {
		next.Start = s.End
	}
	l.Open(next)
}

// AddLostWork records seconds of work done on an instance and lost with
// it, to be computed again. Amounts that are not positive are ignored.
func (l *Ledger) AddLostWork(instanceID string, seconds float64) {
	if seconds > 0 {
		l.LostWorkSeconds += seconds
		if s := l.latest(instanceID); s != nil {
			s.LostWorkSeconds += seconds
		}
	}
}

// AddRecovery records seconds of an instance's paid time spent
// restarting and restoring a checkpoint. Amounts that are not positive
// are ignored.
func (l *Ledger) AddRecovery(instanceID string, seconds float64) {
	if seconds > 0 {
		l.RecoverySeconds += seconds
		if s := l.latest(instanceID); s != nil {
			s.RecoverySeconds += seconds
		}
	}
}

// AddIdle records seconds of an instance's paid time nobody used.
// Amounts that are not positive are ignored.
func (l *Ledger) AddIdle(instanceID string, seconds float64) {
	if seconds > 0 {
		l.IdleSeconds += seconds
		if s := l.latest(instanceID); s != nil {
			s.IdleSeconds += seconds
		}
	}
}

// latest is the instance's newest segment, or nil.
func (l *Ledger) latest(instanceID string) *Segment {
	for i := len(l.Segments) - 1; i >= 0; i-- {
		if l.Segments[i].InstanceID == instanceID {
			return &l.Segments[i]
		}
	}
	return nil
}

// CostUSD is everything paid, open segments counted up to now.
func (l Ledger) CostUSD(now time.Time) float64 {
	var usd float64
	for _, s := range l.Segments {
		usd += s.USD(now)
	}
	return usd
}

// Hours is the instance time paid for, open segments counted up to now;
// time stopped is VolumeHours.
func (l Ledger) Hours(now time.Time) float64 {
	var h float64
	for _, s := range l.Segments {
		if !s.Stopped {
			h += s.Hours(now)
		}
	}
	return h
}

// VolumeHours is the time instances spent stopped, paid for their volume
// alone, open segments counted up to now.
func (l Ledger) VolumeHours(now time.Time) float64 {
	var h float64
	for _, s := range l.Segments {
		if s.Stopped {
			h += s.Hours(now)
		}
	}
	return h
}

// LostWorkUSD prices the lost work at the job's mean price per hour (cost
// over hours, both up to now). The ledger does not record which segment
// each loss happened on, and the recomputation is paid wherever the job
// runs next, so the mean is the honest price; 0 before anything was paid.
func (l Ledger) LostWorkUSD(now time.Time) float64 {
	return l.atMeanPrice(l.LostWorkSeconds, now)
}

// RecoveryUSD prices the recovery time like LostWorkUSD.
func (l Ledger) RecoveryUSD(now time.Time) float64 {
	return l.atMeanPrice(l.RecoverySeconds, now)
}

func (l Ledger) atMeanPrice(seconds float64, now time.Time) float64 {
	h := l.Hours(now)
	if h == 0 {
		return 0
	}
	return seconds / 3600 * l.CostUSD(now) / h
}

// Line is the time and money of one slice of a breakdown.
type Line struct {
	Hours float64 `json:"hours"`
	USD   float64 `json:"usd"`
}

func (l *Line) add(hours, usd float64) {
	l.Hours += hours
	l.USD += usd
}

// Breakdown splits a ledger's cost by market (spot, on-demand and base
// apart) and by pool.
type Breakdown struct {
	ByMarket    map[string]Line `json:"by_market"`
	ByPool      map[string]Line `json:"by_pool"`
	TotalUSD    float64         `json:"total_usd"`
	Hours       float64         `json:"hours"`
	LostWorkUSD float64         `json:"lost_work_usd"` // included in TotalUSD
	RecoveryUSD float64         `json:"recovery_usd"`  // included in TotalUSD
	// IdleUSD is what idle time cost, each segment's at its own price
	// (included in TotalUSD).
	IdleUSD float64 `json:"idle_usd,omitempty"`
	// VolumeHours is the time instances spent stopped (warm-pool
	// entries), and VolumeUSD what it cost at their volumes' price; both
	// apart from Hours, VolumeUSD within TotalUSD and the markets' and
	// pools' USD.
	VolumeHours float64 `json:"volume_hours,omitempty"`
	VolumeUSD   float64 `json:"volume_usd,omitempty"`
}

// Breakdown splits the cost up to now. The maps are filled walking the
// segments in order, so every sum is the same on every replay.
func (l Ledger) Breakdown(now time.Time) Breakdown {
	b := Breakdown{ByMarket: map[string]Line{}, ByPool: map[string]Line{}}
	for _, s := range l.Segments {
		h, usd := s.Hours(now), s.USD(now)
		if s.Stopped {
			b.VolumeHours += h
			b.VolumeUSD += usd
			h = 0 // volume hours are not instance hours
		}
		m, p := b.ByMarket[s.Market], b.ByPool[s.Pool]
		m.add(h, usd)
		p.add(h, usd)
		b.ByMarket[s.Market], b.ByPool[s.Pool] = m, p
		b.Hours += h
		b.TotalUSD += usd
		b.IdleUSD += s.IdleUSD()
	}
	b.LostWorkUSD = l.LostWorkUSD(now)
	b.RecoveryUSD = l.RecoveryUSD(now)
	return b
}
