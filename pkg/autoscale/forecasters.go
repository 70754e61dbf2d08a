package autoscale

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// forecaster is one member of the family the ForecastScaler chooses
// from: a simple rule for the load one lead time ahead.
type forecaster struct {
	name string
	// about says what it does, for explanations, given the lead time.
	about func(lead time.Duration) string
	// forecast is the load it expects one lead time after the newest
	// sample; ok is false while it has too little history.
	forecast func(h history) (load float64, ok bool)
}

// history is what a forecaster may read.
type history struct {
	loads   Series
	lead    time.Duration
	horizon int // steps in one lead time
	profile *DailyProfile
	trends  []Holt
}

// Windows of the family are multiples of the lead time: what matters to
// a forecast is how the load moves within the time a replica takes to
// start, so the same rule fits a service whose replicas start in a minute
// and one whose start in twenty.
var (
	peakLeads     = []float64{0.5, 1, 2, 4}
	quantileLeads = 2.0
	// holtHalfLives are the half-lives, in lead times, of the level and
	// the trend of each smoothing forecaster: one quick to follow, one
	// steady.
	holtHalfLives = [][2]float64{{0.25, 1}, {1, 4}}
)

// loadLeads is how many lead times of load samples the family reads.
const loadLeads = 4

// family is every forecaster, in a fixed order (ties in cost go to the
// first).
var family = func() []forecaster {
	var fs []forecaster
	for _, k := range peakLeads {
		fs = append(fs, forecaster{
			name: "peak-" + leads(k),
			about: func(lead time.Duration) string {
				return "the peak of the last " + minutes(time.Duration(k*float64(lead)))
			},
			forecast: func(h history) (float64, bool) {
				n := min(int(math.Ceil(k*float64(h.horizon))), maxLoads)
				if len(h.loads.Values) < n {
					return 0, false
				}
				return slices.Max(h.loads.Tail(n)), true
			},
		})
	}
	for _, q := range []float64{0.5, 0.9} {
		fs = append(fs, forecaster{
			name: fmt.Sprintf("p%.0f-%s", 100*q, leads(quantileLeads)),
			about: func(lead time.Duration) string {
				return fmt.Sprintf("the %.0fth percentile of the last %s", 100*q, minutes(time.Duration(quantileLeads*float64(lead))))
			},
			forecast: func(h history) (float64, bool) {
				n := min(int(math.Ceil(quantileLeads*float64(h.horizon))), maxLoads)
				if len(h.loads.Values) < n {
					return 0, false
				}
				return quantile(h.loads.Tail(n), q), true
			},
		})
	}
	for i, hl := range holtHalfLives {
		fs = append(fs, forecaster{
			name: "holt-" + leads(hl[0]),
			about: func(time.Duration) string {
				return "the level and trend smoothed over " + leads(hl[0]) + " and " + leads(hl[1]) + " lead times"
			},
			forecast: func(h history) (float64, bool) {
				if i >= len(h.trends) || h.trends[i].Samples < h.horizon {
					return 0, false
				}
				t := h.trends[i]
				return max(0, t.Level+t.Trend*float64(h.horizon)), true
			},
		})
	}
	fs = append(fs, forecaster{
		name: "seasonal-naive",
		about: func(lead time.Duration) string {
			return "yesterday's load " + minutes(lead) + " from now"
		},
		forecast: func(h history) (float64, bool) {
			return h.profile.At(h.loads.Last.Add(h.lead))
		},
	})
	fs = append(fs, forecaster{
		name: "last",
		about: func(time.Duration) string {
			return "the latest load"
		},
		forecast: func(h history) (float64, bool) {
			return h.loads.Newest(), len(h.loads.Values) > 0
		},
	})
	return fs
}()

func leads(k float64) string { return fmt.Sprintf("%gL", k) }

// Holt is exponential smoothing with a trend (Holt's linear method) on
// the load, per step.
type Holt struct {
	Level   float64 `json:"level"`
	Trend   float64 `json:"trend"` // per step
	Samples int     `json:"samples"`
}

// update takes the next sample, smoothing the level with a half-life of
// levelHL steps and the trend with one of trendHL steps.
func (h *Holt) update(v float64, levelHL, trendHL float64) {
	if h.Samples == 0 {
		h.Level, h.Trend, h.Samples = v, 0, 1
		return
	}
	a, b := 1-math.Exp2(-1/max(levelHL, 1)), 1-math.Exp2(-1/max(trendHL, 1))
	prev := h.Level
	h.Level = a*v + (1-a)*(h.Level+h.Trend)
	h.Trend = b*(h.Level-prev) + (1-b)*h.Trend
	h.Level, h.Trend = round3(h.Level), math.Round(h.Trend*1e5)/1e5
	h.Samples = min(h.Samples+1, 1<<20)
}

// quantile is the q-quantile of xs by the nearest rank below.
func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}
