package policy

import (
	"math"
	"time"

	"refuel/pkg/capacity"
)

// skyNomad follows SkyNomad (Li et al., "SkyNomad: On Using Multi-Region
// Spot Instances to Minimize AI Batch Job Cost", arXiv 2601.06520, 2026),
// as its paper describes it. Every option (holding nothing, on-demand in
// each zone, spot in each zone in stock) gets a utility in USD per hour,
// eq. (6):
//
//	U = V·η − price − E/L
//
// where V is the value of an hour of progress (eq. (8), see progressValue),
// L the option's predicted lifetime (see skyNomadLifetime; unbounded for
// on-demand), η = (L − d)⁺/L the share of it that works once the cold start
// d is paid, and E the egress of moving the checkpoint there, amortised
// over L. Holding nothing is worth 0. The run takes the best option when
// it beats what it holds by the hysteresis margin (a switch terminates
// the instance held), and its safety net holds on-demand once waiting
// longer would miss the deadline. Where the paper leaves a parameter open
// the choice is documented in docs/simulation.md ("SkyNomad in the
// simulator"), which also says how each part maps onto this model.
func skyNomad(s State, m Market) Choice {
	if s.Remaining <= 0 {
		return None // the paper's thrifty rule
	}
	od := m.onDemand(s)
	if len(m.Zones) == 0 {
		return od
	}
	cod, spot := skyNomadPrices(m)
	v := progressValue(s, cod)
	if math.IsInf(v, 1) {
		return od
	}
	// Options in order of preference on ties: what the run holds, then
	// the on-demand a fallback would take (in the zone held, else where
	// it is cheapest with the move counted), then zone order.
	cur, curU := None, 0.0
	best, bestU := None, 0.0
	consider := func(c Choice, u float64) {
		if c == s.Current {
			cur, curU = c, u
		}
		if u > bestU || u == bestU && (c == s.Current || c == od && best != s.Current) {
			best, bestU = c, u
		}
	}
	for i, z := range m.Zones {
		price := m.onDemandPrice(z)
		if m.OnDemandPrice == 0 {
			price = 1
		}
		// A move of the checkpoint is amortised over an on-demand
		// instance's unbounded lifetime: it adds nothing to U.
		consider(Choice{Market: capacity.OnDemand, Zone: z.Name}, v-price)
		if z.SpotAvailable {
			consider(m.spot(i), skyNomadSpot(s, m, i, v, spot[i]))
		}
	}
	c := best
	if s.Current.Holds() && cur == s.Current && bestU <= curU+skyNomadHysteresis*v {
		c = s.Current
	}
	if !safe(s, m, c) {
		return od
	}
	return c
}

// skyNomadHysteresis is the margin ∆ a switch away from a held instance
// must gain, as a share of V: the paper's footnote names ∆ without a value;
// the authors' artifact adds this share of V to a fixed 0.5 USD/h sized for
// H100 prices, which is left out here.
const skyNomadHysteresis = 0.05

// skyNomadSpot is the utility of spot in zone i at price, eq. (6).
func skyNomadSpot(s State, m Market, i int, v, price float64) float64 {
	z := m.Zones[i]
	c := m.spot(i)
	d, egress := s.RestartOverhead, 0.0
	switch {
	case c == s.Current:
		d = s.OverheadLeft
	case m.moves(z):
		d += m.Move.Time
		egress = m.Move.USD
	}
	l := skyNomadLifetime(z, s.TimeLeft)
	if l <= 0 {
		return math.Inf(-1)
	}
	eta := max(0, l-d).Hours() / l.Hours()
	return v*eta - price - egress/l.Hours()
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

// progressValue is V, the shadow price of an hour of progress, eq. (8):
// on-demand's price times the schedule ratio, the work left per hour left
// over the progress per hour so far. On schedule V is on-demand's price,
// and on-demand is worth no more than waiting; behind it, more; ahead,
// less. The paper's V is undefined before any progress: the run counts as
// on schedule then, as the authors' artifact takes it.
func progressValue(s State, cod float64) float64 {
	if s.TimeLeft <= 0 {
		return math.Inf(1)
	}
	if s.Done <= 0 || s.Elapsed <= 0 {
		return cod
	}
	return cod * s.Elapsed.Hours() / s.TimeLeft.Hours() * s.Remaining.Hours() / s.Done.Hours()
}

// skyNomadLifetime is how much longer zone z's stretch in stock is
// expected to last, at most horizon: the paper's eq. (9) on the
// Nelson-Aalen estimate of the zone's lifetimes (its stretches in stock),
// conditioned on the age of the current one, its cumulative hazard scaled
// by the volatility ratio (see volatility). The zone's history keeps its
// stretches by age bucket (doubling from 10 minutes), so the hazard is
// estimated per bucket, lifetimes ended there over the time lifetimes
// spent there; a bucket no lifetime reached takes the hazard of the last
// one that did. With no lifetime seen to end, nothing limits it short of
// the horizon.
func skyNomadLifetime(z Zone, horizon time.Duration) time.Duration {
	if horizon <= 0 {
		return 0
	}
	a := z.History
	age := time.Duration(0)
	if z.SpotAvailable && a.Last {
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
