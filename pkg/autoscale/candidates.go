package autoscale

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// ForecasterRecord is what the ForecastScaler learned of one forecaster.
type ForecasterRecord struct {
	Name string `json:"name"`
	// Errors are how far loads came out above its forecasts made one
	// lead time before, one per ErrorEvery over the last ErrorWindow,
	// oldest first, each divided by the square root of the larger of the
	// forecast and the load: arrivals are Poisson-like, so their noise
	// grows with the square root of the rate, and a margin in these
	// units fits the quiet night and the busy afternoon alike.
	Errors []float64 `json:"errors,omitempty"`
	// levels caches margins until Errors change.
	levels []float64
}

// Candidate is a forecaster with its margin at one level, and what
// following it would have cost.
type Candidate struct {
	Name string `json:"name"`
	// Wants are the replicas it wanted, one per ErrorEvery, over the
	// last cold start-up and break-even time, oldest first; none where
	// it could not say.
	Wants []float64 `json:"wants,omitempty"`
	// Cost is the replica-seconds following it would have held, each
	// interval's share fading with a half-life of one lead time: what a
	// candidate holds is known exactly in every interval, so a short
	// memory compares candidates as their margins stand now.
	Cost float64 `json:"cost"`
	// Late counts the intervals in which the replicas it would have had
	// serving fell short of the load, and Intervals all it was priced
	// on, each fading with a half-life of LateHalfLife: a late share of
	// 1-SLO needs hundreds of intervals to mean anything.
	Late      float64 `json:"late"`
	Intervals float64 `json:"intervals"`
	// Priced counts the intervals it was priced on.
	Priced int `json:"priced"`
}

// PendingForecast is every forecaster's forecast made at one time, in
// family order; none where it had none.
type PendingForecast struct {
	At    time.Time `json:"at"`
	Loads []float64 `json:"loads"`
}

// marginLevels are the levels of the candidates' margins: conformal
// quantiles of a forecaster's errors from the median to the SLO's.
var marginLevels = []float64{0.5, 0.8, 0.9, 0.95, SLO}

const (
	// minPriced is how many intervals a candidate is priced on before it
	// is followed: a late share within 1-SLO means something only once it
	// counts 1/(1-SLO) intervals (50 minutes).
	minPriced = int(1 / (1 - SLO))
	// maxPriced bounds, in ErrorEvery intervals, the start-up and the
	// break-even time the candidates are priced over (20 min each).
	maxPriced = 40
	// maxPending bounds the forecasts waiting for their outcome: with a
	// lead time longer than maxPending intervals, they are kept further
	// apart.
	maxPending = 60
)

func candidateName(forecaster string, level float64) string {
	return fmt.Sprintf("%s+q%g", forecaster, 100*level)
}

// settle meets every forecast made one lead time ago or more with the
// load now, and learns its error.
func (f *ForecastScaler) settle(now time.Time, load float64, lead time.Duration) {
	keep := int(ErrorWindow / ErrorEvery)
	for len(f.Pending) > 0 && now.Sub(f.Pending[0].At) >= lead-Step/2 {
		p := f.Pending[0]
		f.Pending = f.Pending[1:]
		if now.Sub(p.At) > lead+2*ErrorEvery {
			continue // from before a gap in the reports: no outcome of its own
		}
		f.Met = p
		for i := range f.Forecasters {
			r := &f.Forecasters[i]
			if p.Loads[i] < 0 {
				continue
			}
			r.Errors = append(r.Errors, math.Round(100*(load-p.Loads[i])/scale(max(p.Loads[i], load)))/100)
			r.levels = nil
			if n := len(r.Errors); n > keep {
				r.Errors = slices.Delete(r.Errors, 0, n-keep)
			}
		}
	}
}

// keepPending keeps the forecasts made now to meet their outcome, every
// ErrorEvery, or further apart for a long lead time.
func (f *ForecastScaler) keepPending(now time.Time, lead time.Duration, forecasts []float64) {
	every := max(ErrorEvery, lead/maxPending)
	if n := len(f.Pending); n > 0 && now.Sub(f.Pending[n-1].At) < every-Step/2 {
		return
	}
	f.Pending = append(f.Pending, PendingForecast{At: now, Loads: forecasts})
}

// price adds what each candidate wants now to its wants, and what
// following it would have cost over the last ErrorEvery to its price:
// the replicas it holds now, and whether the replicas it would have
// serving fell short of load, the highest load of the interval. A
// replica it holds is one it wanted within the last break-even time (the
// ski-rental rule); one it asked for serves one start-up later: a warm
// one, from the warm pool, after a warm start-up, as many as the pool
// holds (the fleet's warm entries, or the spec's warm_pool for a policy
// that does not read them); the rest after a cold one.
//
// An interval in which every candidate priced fell short (a rise none of
// them foresaw) counts late for none: it is no candidate's fault, and
// tells none of them apart. Counted, it would put every lean candidate
// beyond the SLO for hours after a single surge, and leave the policy
// following the one whose margin the surge itself had swollen.
func (f *ForecastScaler) price(now time.Time, load float64, lead time.Duration, forecasts []float64) {
	cold, warm := f.meanStarts()
	pool := f.Spec.WarmPool
	if f.PricesFleetWarm {
		pool = min(pool, f.WarmHeld)
	}
	coldN, warmN, holdN := min(stepsOf(cold), maxPriced), min(stepsOf(warm), maxPriced), min(stepsOf(f.hold()), maxPriced)
	if !f.PricedAt.IsZero() && now.Sub(f.PricedAt) > 2*ErrorEvery {
		// A gap in the reports: what was wanted before it says nothing
		// of what would be serving now.
		for i := range f.Candidates {
			f.Candidates[i].Wants = nil
		}
	}
	f.PricedAt = now
	held := make([]float64, len(f.Candidates))
	short := make([]bool, len(f.Candidates))
	anyOnTime := false
	for i, fc := range forecasts {
		margins := f.Forecasters[i].margins()
		for j := range marginLevels {
			k := i*len(marginLevels) + j
			c := &f.Candidates[k]
			want := none
			if fc >= 0 && margins != nil {
				want = float64(replicasFor(max(fc+margins[j]*scale(fc), f.Loads.Newest())))
			}
			c.Wants = append(c.Wants, want)
			if n := len(c.Wants); n > coldN+holdN {
				c.Wants = slices.Delete(c.Wants, 0, n-coldN-holdN)
			}
			held[k] = none
			if len(c.Wants) < coldN+holdN || slices.Contains(c.Wants, none) {
				continue
			}
			// h[n] is what it held n intervals after the start of the
			// last cold start-up.
			h := make([]float64, coldN+1)
			for n := range h {
				end := len(c.Wants) - coldN + n
				h[n] = slices.Max(c.Wants[max(0, end-holdN):end])
			}
			serving := min(slices.Min(h[coldN-warmN:]), slices.Min(h)+float64(pool))
			held[k], short[k] = h[coldN], load > serving+1e-9
			anyOnTime = anyOnTime || !short[k]
		}
	}
	costDecay := math.Exp2(-ErrorEvery.Seconds() / lead.Seconds())
	lateDecay := math.Exp2(-ErrorEvery.Seconds() / LateHalfLife.Seconds())
	for k := range f.Candidates {
		if held[k] == none {
			continue
		}
		c := &f.Candidates[k]
		late := 0.0
		if short[k] && anyOnTime {
			late = 1
		}
		c.Cost = round3(c.Cost*costDecay + held[k]*ErrorEvery.Seconds())
		c.Late = round3(c.Late*lateDecay + late)
		c.Intervals = round3(c.Intervals*lateDecay + 1)
		c.Priced = min(c.Priced+1, math.MaxInt32)
	}
}

// stepsOf is how many ErrorEvery intervals d spans, at least 1.
func stepsOf(d time.Duration) int { return max(1, int((d+ErrorEvery/2)/ErrorEvery)) }

// cheaper reports whether following c costs less than following d. The
// replicas serving may fall short of the load allow of the time (1-SLO,
// eased up to twice that where the requests show room: Staffing.Slack);
// a candidate that fell short more often is priced above every one that
// did not, and above one that fell short less often. Within the
// allowance, the one that held fewer replica-hours lately is cheaper.
func (c Candidate) cheaper(d Candidate, allow float64) bool {
	cOK, dOK := c.Late <= allow*c.Intervals, d.Late <= allow*d.Intervals
	switch {
	case cOK != dOK:
		return cOK
	case !cOK && c.Late != d.Late:
		return c.Late < d.Late
	}
	return c.Cost < d.Cost
}

// margins are the forecaster's margins at every level, in units of the
// square root of the load: at level q, the conformal quantile of its
// errors, the smallest error that at least q of them, and of one more to
// come, do not exceed. They are negative for a forecaster that runs
// high. Nil while it has too few errors.
func (r *ForecasterRecord) margins() []float64 {
	n := len(r.Errors)
	if n < minErrors {
		return nil
	}
	if r.levels != nil {
		return r.levels
	}
	s := slices.Clone(r.Errors)
	slices.Sort(s)
	out := make([]float64, len(marginLevels))
	for i, q := range marginLevels {
		k := int(math.Ceil(float64(n+1)*q)) - 1
		out[i] = s[min(max(k, 0), n-1)]
	}
	r.levels = out
	return out
}

// choice is the candidate followed and what it expects.
type choice struct {
	forecaster int
	level      float64 // of its margin; 0 before any candidate is priced
	load       float64 // expected one lead time ahead
	margin     float64 // in replicas
	expected   float64 // what it expected, one lead time ago, for now; none if nothing
}

// choose is the cheapest priced candidate that can forecast now; before
// any is priced, the peak over the longest window known, with no margin.
// ok is false while no load is known.
func (f *ForecastScaler) choose(lead time.Duration) (choice, bool) {
	if len(f.Loads.Values) == 0 {
		return choice{}, false
	}
	forecasts := f.forecasts(lead)
	allow := 1 - SLO
	if f.StaffsForLatency {
		allow = f.Staffing.Allowance()
	}
	best := -1
	for i, c := range f.Candidates {
		if c.Priced < minPriced || forecasts[i/len(marginLevels)] < 0 {
			continue
		}
		if best < 0 || c.cheaper(f.Candidates[best], allow) {
			best = i
		}
	}
	var ch choice
	if best >= 0 {
		i, j := best/len(marginLevels), best%len(marginLevels)
		ch = choice{forecaster: i, level: marginLevels[j], load: forecasts[i], margin: f.Forecasters[i].margins()[j] * scale(forecasts[i])}
	} else {
		ch = choice{forecaster: 0, load: f.Loads.Newest()}
		for i := range peakLeads {
			if forecasts[i] >= 0 {
				ch = choice{forecaster: i, load: forecasts[i]}
			}
		}
	}
	ch.margin = round3(ch.margin)
	ch.expected = none
	if m := f.Met; len(m.Loads) == len(family) && f.Loads.Last.Sub(m.At) <= lead+ErrorEvery {
		ch.expected = m.Loads[ch.forecaster]
	}
	return ch, true
}
