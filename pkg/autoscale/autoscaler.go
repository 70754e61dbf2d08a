package autoscale

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"refuel/pkg/spec"
)

// Autoscaler is refuel's policy for one service and the scaling state of
// the InferenceService workflow.
//
// Each metrics report becomes a load, in replicas, from the service's
// targets. A decision provisions for the load expected one lead time
// ahead: the peak load of the last PeakLeads lead times (what came
// recently may well come again before new replicas could serve it), plus
// a margin learned from how far loads have come out above the forecasts
// made one lead time earlier. It never goes below a scheduled floor
// opening within the lead time, and damps changes: more replicas wait
// out UpscaleDelay, fewer wait out DownscaleDelay and then go only to the
// highest count wanted during it, and a fall within Tolerance is ignored.
type Autoscaler struct {
	Spec spec.ServiceSpec `json:"spec"`
	Lead LeadTime         `json:"lead"`
	// Reports are the metrics reports of the last WorkWindow, oldest first.
	Reports []Metrics `json:"reports,omitempty"`
	// Loads are loads, in replicas, over the last PeakLeads lead times.
	Loads []Point `json:"loads,omitempty"`
	// Forecasts are the loads expected one lead time after they were made.
	Forecasts []Point `json:"forecasts,omitempty"`
	// Misses are how far loads came out above their forecasts, over the
	// last MissWindow, divided by the square root of the forecast.
	Misses []Point `json:"misses,omitempty"`
	// Wants are the replica counts wanted over the longer delay.
	Wants []Point `json:"wants,omitempty"`
	// Since is the first decision: nothing is released before a whole
	// DownscaleDelay of wants is known.
	Since time.Time `json:"since,omitzero"`
	// StaleAfter is how long the latest report counts: past it with no
	// newer one (the load generator or the metrics pipeline stopped), the
	// load is unknown and the fleet is what the schedules and
	// min_replicas say, rather than sized for a reading that no longer
	// holds. 0 keeps the latest report for ever. Its owner sets it.
	StaleAfter time.Duration `json:"-"`
}

// Point is one value at one time.
type Point struct {
	At    time.Time `json:"at"`
	Value float64   `json:"value"`
}

const (
	// Smoothing is the window the work arriving is averaged over: within
	// seconds, arrivals are too noisy to act on.
	Smoothing = time.Minute
	// WorkWindow is how far back the work per request is learned.
	WorkWindow = 10 * time.Minute
	// PeakLeads is how many lead times back the forecast's peak looks.
	PeakLeads = 1.5
	// MissWindow is how far back forecast misses are remembered: long
	// enough for a few hundred of them, short enough to follow the day.
	MissWindow = 3 * time.Hour
	// MissQuantile is the share of past misses the margin covers.
	// Rounding up to whole replicas and the damping of scale-in add
	// slack, so 0.9 gave over 99% of the time served in the benchmark.
	MissQuantile = 0.9
	// missEvery thins the misses kept, to bound the state a workflow
	// carries; misses closer together say nearly the same.
	missEvery = time.Minute
	// minMisses is how many misses the margin needs before it is used.
	minMisses = 30
)

// NewAutoscaler returns the autoscaler for a normalised spec, or the
// spec's validation error.
func NewAutoscaler(s spec.ServiceSpec) (*Autoscaler, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	a := &Autoscaler{Spec: s}
	if d, ok := s.FixedLeadTime(); ok {
		a.Lead.Fixed = d
	}
	return a, nil
}

// Started records a replica's measured start-up for the lead time.
func (a *Autoscaler) Started(s Startup) { a.Lead.Record(s) }

// Observe takes one metrics report.
func (a *Autoscaler) Observe(m Metrics) {
	a.Reports = append(a.Reports, m)
	a.Reports = dropBefore(a.Reports, m.At.Add(-WorkWindow))
	l, ok := a.load(m.At)
	if !ok {
		return
	}
	lead := a.Lead.Estimate()
	hold := time.Duration(PeakLeads * float64(lead))
	a.Loads = dropBefore(append(a.Loads, Point{m.At, l}), m.At.Add(-hold))
	// The forecast made one lead time ago meets its outcome.
	i, _ := slices.BinarySearchFunc(a.Forecasts, m.At.Add(-lead), func(p Point, t time.Time) int { return p.At.Compare(t) })
	fresh := len(a.Misses) == 0 || m.At.Sub(a.Misses[len(a.Misses)-1].At) >= missEvery
	if fresh && i < len(a.Forecasts) && a.Forecasts[i].At.Sub(m.At.Add(-lead)) < time.Minute {
		f := a.Forecasts[i].Value
		a.Misses = append(a.Misses, Point{m.At, (l - f) / scale(f)})
	}
	a.Misses = dropBefore(a.Misses, m.At.Add(-MissWindow))
	// A peak over less than its whole window is not yet the forecast the
	// autoscaler will make, and would teach it the wrong misses.
	if m.At.Sub(a.Loads[0].At) >= hold-time.Minute {
		a.Forecasts = append(a.Forecasts, Point{m.At, peak(a.Loads)})
	}
	a.Forecasts = dropBefore(a.Forecasts, m.At.Add(-lead-time.Minute))
}

// load is the replicas the reports up to now ask for (loadFrom).
func (a *Autoscaler) load(now time.Time) (replicas float64, known bool) {
	return loadFrom(a.Reports, a.Spec.Target, a.Lead.Estimate(), now)
}

// Decide returns the replicas wanted at now.
func (a *Autoscaler) Decide(now time.Time, f Fleet) Decision {
	s := a.Spec
	if a.Since.IsZero() {
		a.Since = now
	}
	lead := a.Lead.Estimate()
	have := f.Replicas()
	want, reason := have, "no load known yet"
	why := func(n int) string { return fmt.Sprintf("%s: no load reported yet", replicas(n)) }
	stale, silent := a.stale(now)
	if stale {
		want, reason = 0, "metrics stale"
		why = func(n int) string {
			return fmt.Sprintf("%s: no metrics for %s (stale after %s), so the schedules and min_replicas decide",
				replicas(n), minutes(silent), minutes(a.StaleAfter))
		}
	}
	if len(a.Loads) > 0 && !stale {
		p := peak(a.Loads)
		expect := p + a.margin()*scale(p)
		want = replicasFor(expect)
		reason = fmt.Sprintf("load %.2f expected within %s", expect, lead.Round(time.Second))
		why = func(n int) string {
			return fmt.Sprintf("%s: a load of %.1f replicas expected within %s (recent peak %.1f, margin %.1f)",
				replicas(n), expect, minutes(lead), p, expect-p)
		}
		// Tolerance damps scale-in only: too few replicas breaks the SLO
		// at once, too many only costs until the next decision.
		if want < have && expect > float64(have)*(1-s.Tolerance) {
			want, reason = have, fmt.Sprintf("load %.2f within tolerance", expect)
			why = func(n int) string {
				return fmt.Sprintf("holding %s: a load of %.1f replicas expected within %s is within the %.0f%% tolerance",
					replicas(n), expect, minutes(lead), 100*s.Tolerance)
			}
		}
	}
	if floor, said := scheduledFloor(s.Schedules, now, lead, stale, silent, a.StaleAfter); floor > want {
		want, reason, why = floor, said.reason, said.why
	}
	wanted := want
	a.Wants = dropBefore(append(a.Wants, Point{now, float64(want)}), now.Add(-max(s.UpscaleDelay.D(), s.DownscaleDelay.D())))
	switch {
	case stale:
		// The stale time is itself a long delay: the fleet goes to what
		// the schedules and min_replicas say at once.
	case want > have && s.UpscaleDelay > 0:
		// Scale up only as far as has been wanted throughout the delay.
		if held := int(minSince(a.Wants, now.Add(-s.UpscaleDelay.D()))); held < want {
			want, reason = max(held, have), reason+"; upscale delay"
			why = func(n int) string {
				return fmt.Sprintf("%s: %d wanted, %d throughout the upscale delay of %s", replicas(n), wanted, held, minutes(s.UpscaleDelay.D()))
			}
		}
	case want < have && s.DownscaleDelay > 0 && now.Sub(a.Since) < s.DownscaleDelay.D():
		want, reason = have, reason+"; downscale delay"
		why = func(n int) string {
			return fmt.Sprintf("holding %s: %d wanted, but the service has not yet seen a whole downscale delay of %s", replicas(n), wanted, minutes(s.DownscaleDelay.D()))
		}
	case want < have && s.DownscaleDelay > 0:
		// Scale in only as far as nothing wanted more during the delay.
		if held := int(maxSince(a.Wants, now.Add(-s.DownscaleDelay.D()))); held > want {
			want, reason = min(held, have), reason+"; downscale delay"
			why = func(n int) string {
				return fmt.Sprintf("%s: %d wanted now, %d within the downscale delay of %s", replicas(n), wanted, held, minutes(s.DownscaleDelay.D()))
			}
		}
	}
	switch {
	case want < s.MinReplicas && stale:
		want, reason = s.MinReplicas, "metrics stale; min_replicas"
		why = func(n int) string {
			return fmt.Sprintf("%s: min_replicas, as no metrics came for %s (stale after %s)", replicas(n), minutes(silent), minutes(a.StaleAfter))
		}
	case want < s.MinReplicas:
		want, reason = s.MinReplicas, "min_replicas"
		why = func(n int) string { return fmt.Sprintf("%s: min_replicas (%d wanted)", replicas(n), wanted) }
	case want > s.MaxReplicas:
		want, reason = s.MaxReplicas, "max_replicas"
		why = func(n int) string { return fmt.Sprintf("%s: capped at max_replicas (%d wanted)", replicas(n), wanted) }
	}
	return Decision{Replicas: want, Warm: s.WarmPool, Reason: reason, Explanation: why(want)}
}

// stale reports whether the latest report is older than StaleAfter at
// now, and how old it is. A service that never had a report is not
// stale: its load is simply not known yet.
func (a *Autoscaler) stale(now time.Time) (bool, time.Duration) {
	return staleness(a.Reports, a.StaleAfter, now)
}

// replicas writes a count of replicas: "1 replica", "3 replicas".
func replicas(n int) string {
	if n == 1 {
		return "1 replica"
	}
	return fmt.Sprintf("%d replicas", n)
}

// minutes writes a duration as a person reads it: "45 s", "5.5 min".
func minutes(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.0f s", d.Seconds())
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", d.Minutes()), ".0") + " min"
}

// margin is the MissQuantile of the remembered misses, in units of the
// square root of the load: arrivals are Poisson-like, so their noise
// grows with the square root of the rate, and a margin in these units
// fits the quiet night and the busy afternoon alike. It is never
// negative: forecasts that came out too high are left to the damping of
// scale-in rather than cut below the recent peak.
func (a *Autoscaler) margin() float64 {
	if len(a.Misses) < minMisses {
		return 0
	}
	v := make([]float64, len(a.Misses))
	for i, p := range a.Misses {
		v[i] = p.Value
	}
	slices.Sort(v)
	return max(0, v[int(MissQuantile*float64(len(v)-1))])
}

func scale(load float64) float64 { return math.Sqrt(max(load, 1)) }

// replicasFor rounds a load up to whole replicas, forgiving float noise.
func replicasFor(load float64) int { return int(math.Ceil(load - 1e-9)) }

func peak(ps []Point) float64 {
	var v float64
	for _, p := range ps {
		v = max(v, p.Value)
	}
	return v
}

func minSince(ps []Point, from time.Time) float64 {
	v := math.Inf(1)
	for _, p := range ps {
		if !p.At.Before(from) {
			v = min(v, p.Value)
		}
	}
	return v
}

func maxSince(ps []Point, from time.Time) float64 {
	v := math.Inf(-1)
	for _, p := range ps {
		if !p.At.Before(from) {
			v = max(v, p.Value)
		}
	}
	return v
}

// dropBefore removes the leading points older than from.
func dropBefore[T interface{ at() time.Time }](xs []T, from time.Time) []T {
	i := 0
	for i < len(xs) && xs[i].at().Before(from) {
		i++
	}
	return slices.Delete(xs, 0, i)
}

func (p Point) at() time.Time   { return p.At }
func (m Metrics) at() time.Time { return m.At }
