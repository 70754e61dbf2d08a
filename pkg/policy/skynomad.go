package policy

import (
	"math"
	"slices"
	"time"

	"refuel/pkg/capacity"
)

// skyNomad follows SkyNomad (Li et al., "SkyNomad: On Using Multi-Region
// Spot Instances to Minimize AI Batch Job Cost", NSDI 2027) as its
// authors built it in their released artifact. Every option (on-demand in
// each zone, spot in each zone in stock) gets a net value in USD per hour,
// eq. (6):
//
//	U = V·(L − d)/L − price − M/L
//
// where V is the value of an hour of progress (eq. (8) floored, see
// progressValue), L the option's predicted lifetime capped at 2 h and at
// the time left (see skyNomadLifetime; unbounded for on-demand), d the
// restart overhead (none for the spot instance held) and M the move of the
// checkpoint there, its transfer's time valued at V plus its egress. A
// start on on-demand in another zone than the one held pays its restart
// and move at once, valued at V, not amortised. An option worth less than
// nothing is dropped; one away from the instance held must beat it by the
// switching margin (skyNomadMargin). Holding nothing, the run takes the
// best option worth more than nothing; holding an instance, it keeps it
// unless an option beats it, and it never lets an instance go to hold
// nothing. Its safety net holds on-demand once waiting longer would miss
// the deadline. docs/simulation.md ("SkyNomad in the simulator") names
// where it departs from the authors' code and why.
func skyNomad(s State, m Market) Choice {
	if s.Remaining <= 0 {
		return None // the paper's thrifty rule
	}
	od := m.onDemand(s)
	if len(m.Zones) == 0 {
		return od
	}
	cod, spot := skyNomadPrices(m)
	v := progressValue(s, cod, slices.Min(spot))
	if math.IsInf(v, 1) {
		return od
	}
	price := func(z Zone) float64 {
		if m.OnDemandPrice == 0 {
			return 1
		}
		return m.onDemandPrice(z)
	}
	// The instance held's value: spot with its start paid, on-demand at
	// its price.
	held := s.Current.Holds()
	cur := 0.0
	if i := m.zone(s.Current.Zone); held && i >= 0 {
		if s.Current.Market == capacity.Spot {
			cur = skyNomadSpot(s, m, i, v, spot[i])
		} else {
			cur = v - price(m.Zones[i])
		}
	}
	margin := skyNomadMargin + skyNomadMarginPerMoveUSD*m.Move.USD + skyNomadMarginOfV*v
	best, bestU := None, cur
	consider := func(c Choice, u, gate float64) {
		if c == s.Current || u < 0 || u <= gate || u <= bestU {
			return
		}
		best, bestU = c, u
	}
	for i, z := range m.Zones {
		gate := math.Inf(-1)
		if held {
			gate = cur + margin
		}
		u := v - price(z)
		if z.Name != s.Current.Zone && (held || s.Done > 0) {
			u -= v * s.RestartOverhead.Hours()
			if m.moves(z) {
				u -= v*m.Move.Time.Hours() + m.Move.USD
			}
		}
		consider(Choice{Market: capacity.OnDemand, Zone: z.Name}, u, gate)
		if z.SpotAvailable {
			if z.Name == s.Current.Zone {
				gate = math.Inf(-1) // from on-demand to spot in its zone
			}
			consider(m.spot(i), skyNomadSpot(s, m, i, v, spot[i]), gate)
		}
	}
	c := best
	if !c.Holds() {
		c = s.Current // nothing beats it: what is held is kept
	}
	if !safe(s, m, c) {
		return od
	}
	return c
}

// The switching margin an option away from the instance held must beat
// it by, in USD per hour: the authors' fixed 0.5 USD/h, 0.0002 USD/h per
// GB of checkpoint (0.01 per USD of its egress at $0.02/GB), and 5% of V.
const (
	skyNomadMargin           = 0.5
	skyNomadMarginPerMoveUSD = 0.01
	skyNomadMarginOfV        = 0.05
)

// skyNomadMaxLifetime caps a predicted spot lifetime, as the authors'
// H100 results were produced with.
const skyNomadMaxLifetime = 2 * time.Hour

// skyNomadSpot is the net value of spot in zone i at price, eq. (6).
func skyNomadSpot(s State, m Market, i int, v, price float64) float64 {
	z := m.Zones[i]
	c := m.spot(i)
	d, move := s.RestartOverhead, 0.0
	switch {
	case c == s.Current:
		d = 0
	case m.moves(z):
		move = v*m.Move.Time.Hours() + m.Move.USD
	}
	l := min(skyNomadLifetime(z.watched(), z.SpotAvailable, s.TimeLeft), skyNomadMaxLifetime)
	if l <= d || l <= 0 {
		return math.Inf(-1)
	}
	return v*(l-d).Hours()/l.Hours() - price - move/l.Hours()
}

// skyNomadPrices are the cheapest on-demand price and each zone's spot
// price; prices unknown, on-demand counts 1 and spot 0.3 of it, as
// refuel's plans take them.
func skyNomadPrices(m Market) (cod float64, spot []float64) {
	spot = make([]float64, len(m.Zones))
	if m.OnDemandPrice == 0 {
		for i := range spot {
			spot[i] = 0.3
		}
		return 1, spot
	}
	cod = m.OnDemandPrice
	for i, z := range m.Zones {
		cod = min(cod, m.onDemandPrice(z))
		spot[i] = z.SpotPrice
		if !m.priced() {
			spot[i] = m.Zones[0].SpotPrice
		}
	}
	return cod, spot
}

// progressValue is V, the value of an hour of progress, eq. (8):
// on-demand's price times the schedule ratio, the work left per hour left
// over the progress per hour so far. On schedule V is on-demand's price;
// behind it, more; ahead, less, but never below the cheapest spot price
// (floor): the work has to be done. Before any progress the rate so far
// is taken as the plan's, the work over the deadline, so V rises from
// on-demand's price as T/(T−t) while the run waits.
func progressValue(s State, cod, floor float64) float64 {
	if s.TimeLeft <= 0 {
		return math.Inf(1)
	}
	need := s.Remaining.Hours() / s.TimeLeft.Hours()
	rate := (s.Done + s.Remaining).Hours() / (s.Elapsed + s.TimeLeft).Hours()
	if s.Done > 0 && s.Elapsed > 0 {
		rate = s.Done.Hours() / s.Elapsed.Hours()
	}
	return max(cod*need/rate, floor)
}

// skyNomadLifetime is how much longer a zone's stretch in stock (shown
// available now, with history a) is expected to last, at most horizon:
// the paper's eq. (9) on the Nelson-Aalen estimate of the zone's
// lifetimes (its stretches in stock), conditioned on the age of the
// current one, its cumulative hazard scaled by the volatility ratio (see
// volatility). SkyNomad gives it what its run watched of the zone
// (Zone.Watched), as the authors' code learns lifetimes only from what
// the job saw; refuel, the zone's whole history. The history keeps its
// stretches by age bucket (doubling from 10 minutes), so the hazard is
// estimated per bucket, lifetimes ended there over the time lifetimes
// spent there; a bucket no lifetime reached takes the hazard of the last
// one that did. With no lifetime seen to end, nothing limits it short of
// the horizon.
func skyNomadLifetime(a Availability, available bool, horizon time.Duration) time.Duration {
	if horizon <= 0 {
		return 0
	}
	age := time.Duration(0)
	if available && a.Last {
		age = a.Since
	}
	var rate [ageBuckets]float64 // per hour
	last := 0.0
	for b := range ageBuckets {
		if a.In.Time[b] > 0 {
			last = float64(a.In.Ended[b]) / a.In.Time[b].Hours()
		}
		rate[b] = last
	}
	g := volatility(a.In, a.FitIn, rate)
	var left, survive float64 = 0, 1
	at, end := age, age+horizon
	for b := bucketOf(age); at < end; b++ {
		hi := end
		if b < ageBuckets-1 {
			hi = min(end, bucketStart(b+1))
		}
		span := (hi - at).Hours()
		r := g * rate[b]
		if r == 0 {
			left += survive * span
		} else {
			left += survive * (1 - math.Exp(-r*span)) / r
			survive *= math.Exp(-r * span)
		}
		at = hi
	}
	return time.Duration(left * float64(time.Hour))
}

// volatility is the paper's volatility ratio: how many more lifetimes
// ended lately than the hazard rate predicts, at least 1. The paper takes
// the largest ratio over windows of every length ending now; the zone's
// history keeps one recent window, the stretches since its model was last
// refitted (fit, a fifth or so of them), so that is the window here.
func volatility(all, fit Stretches, rate [ageBuckets]float64) float64 {
	ended, expected := 0, 0.0
	for b := range ageBuckets {
		ended += all.Ended[b] - fit.Ended[b]
		expected += (all.Time[b] - fit.Time[b]).Hours() * rate[b]
	}
	if ended == 0 || expected <= 0 {
		return 1
	}
	return max(1, float64(ended)/expected)
}
