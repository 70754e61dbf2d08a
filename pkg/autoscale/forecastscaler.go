package autoscale

import (
	"fmt"
	"slices"
	"time"

	"refuel/pkg/spec"
)

// ForecastScaler is refuel's policy for an inference service. It keeps a
// family of simple forecasters of the load one lead time ahead (recent
// peaks over several windows, quantiles, exponential smoothing with a
// trend, yesterday's load at the same time, the latest load), each with a
// margin at a few levels, and follows at each decision the candidate
// whose decisions would have cost least lately, as Google's Autopilot
// does with its recommenders. docs/autoscaling.md tells the whole story.
//
// A candidate is a forecaster and a margin level. Its margin is the
// conformal quantile, at that level, of the forecaster's own errors at
// the lead time over the last ErrorWindow. It is priced on what following
// it would have cost: the replica-hours it would have held lately, and
// how often the replicas it would have had serving fell short of the
// load over the last hours. The cheapest is the one with the fewest
// replica-hours among those that fell short no more than 1-SLO of the
// time; a shortfall every candidate shared counts against none.
//
// Scale-in follows the ski-rental rule: a replica no longer wanted is
// held until holding it idle has cost what starting one again would (the
// mean cold start-up, paid while it starts), then released.
//
// Everything in it is a physical measurement (start-up times, the load),
// the SLO, or a default of the method documented where it is declared;
// nothing is fitted to a trace.
type ForecastScaler struct {
	Spec spec.ServiceSpec `json:"spec"`
	// Lead learns cold start-ups; WarmLead starts from the warm pool.
	Lead     LeadTime `json:"lead"`
	WarmLead LeadTime `json:"warm_lead"`
	// Reports are the metrics reports of the last WorkWindow, oldest
	// first, at most maxReports.
	Reports []Metrics `json:"reports,omitempty"`
	// Loads are the loads, in replicas, one per Step, over the last
	// loadLeads lead times (at most maxLoads).
	Loads Series `json:"loads"`
	// Profile is the load over the day, for the seasonal forecaster.
	Profile DailyProfile `json:"profile"`
	// Trends are the smoothing forecasters' states, as holtHalfLives.
	Trends []Holt `json:"trends,omitempty"`
	// Forecasters are the family's records, in family order.
	Forecasters []ForecasterRecord `json:"forecasters"`
	// Pending are forecasts waiting for their outcome, oldest first, and
	// Met the latest that met it.
	Pending []PendingForecast `json:"pending,omitempty"`
	Met     PendingForecast   `json:"met"`
	// Candidates are every forecaster with every margin level, in family
	// order, then level order.
	Candidates []Candidate `json:"candidates"`
	// PricedAt is when the candidates were last priced.
	PricedAt time.Time `json:"priced_at,omitzero"`
	// Chosen is the candidate followed at the latest decision.
	Chosen string `json:"chosen,omitempty"`
	// Held are the replicas wanted lately, for the ski-rental rule, and
	// Delayed for the upscale delay.
	Held    Extremes `json:"held"`
	Delayed Extremes `json:"delayed"`
	// PricesFleetWarm makes the candidates count, as the warm pool, the
	// warm entries the fleet held at the latest decision (WarmHeld)
	// rather than the spec's whole warm_pool: a pool being refilled
	// starts fewer warm. Its owner sets it; a service recorded before it
	// prices the spec's.
	PricesFleetWarm bool `json:"prices_fleet_warm,omitempty"`
	WarmHeld        int  `json:"warm_held,omitempty"`
	// StaffsForLatency makes the replicas wanted by a service that serves
	// requests at least those that answer its forecast load within
	// slo.latency (staffing.go). Its owner sets it; a service recorded
	// before it sizes to its forecast and margin alone.
	StaffsForLatency bool     `json:"staffs_for_latency,omitempty"`
	Staffing         Staffing `json:"staffing,omitzero"`
	// StaleAfter is as Autoscaler's; its owner sets it.
	StaleAfter time.Duration `json:"-"`
	// forecast caches forecasts until the loads or the lead change.
	forecast struct {
		lead   time.Duration
		values []float64
	}
}

const (
	// SLO is the share of the time the policy means the replicas serving
	// to keep up with the load, as the autoscale bench measures it: a
	// candidate that fell short more than 1-SLO of the time is priced
	// above any that did not.
	SLO = 0.99
	// ErrorWindow is how far back a forecaster's errors calibrate its
	// margin: an hour, long enough for a hundred errors, short enough to
	// follow the day.
	ErrorWindow = time.Hour
	// ErrorEvery is how often forecasts are kept to meet their outcome
	// and candidates are priced: errors closer together say nearly the
	// same, as the load is a minute's average.
	ErrorEvery = 30 * time.Second
	// LateHalfLife is how fast past lateness fades when candidates are
	// compared: three hours weigh a few hundred intervals, so that a late
	// share of 1% is a count of several, not of one.
	LateHalfLife = 3 * time.Hour
	// minErrors is how many errors a forecaster needs before its margins
	// mean anything: a tenth of the window.
	minErrors = int(ErrorWindow / ErrorEvery / 10)
	// maxReports bounds the reports kept when they come more often than
	// every five seconds.
	maxReports = 120
	// maxLoads bounds the loads kept: two hours of steps.
	maxLoads = int(2 * time.Hour / Step)
	// none marks a forecast or a want not made: loads are never
	// negative.
	none = -1.0
)

// NewForecastScaler returns the policy for a normalised spec, or the
// spec's validation error.
func NewForecastScaler(s spec.ServiceSpec) (*ForecastScaler, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	f := &ForecastScaler{Spec: s}
	if d, ok := s.FixedLeadTime(); ok {
		f.Lead.Fixed = d
	}
	f.sync()
	return f, nil
}

// sync makes the records match the family: a state carried from a
// release with another family keeps what it learned of the forecasters
// and candidates both know; forecasts pending are dropped when the family
// changed.
func (f *ForecastScaler) sync() {
	if len(f.Forecasters) == len(family) && len(f.Candidates) == len(family)*len(marginLevels) && len(f.Trends) == len(holtHalfLives) {
		return
	}
	recs := make([]ForecasterRecord, len(family))
	cands := make([]Candidate, 0, len(family)*len(marginLevels))
	for i, fc := range family {
		recs[i] = ForecasterRecord{Name: fc.name}
		if j := slices.IndexFunc(f.Forecasters, func(r ForecasterRecord) bool { return r.Name == fc.name }); j >= 0 {
			recs[i] = f.Forecasters[j]
		}
		for _, q := range marginLevels {
			c := Candidate{Name: candidateName(fc.name, q)}
			if j := slices.IndexFunc(f.Candidates, func(x Candidate) bool { return x.Name == c.Name }); j >= 0 {
				c = f.Candidates[j]
			}
			cands = append(cands, c)
		}
	}
	f.Forecasters, f.Candidates, f.Pending, f.Met = recs, cands, nil, PendingForecast{}
	f.Trends = make([]Holt, len(holtHalfLives))
}

// Started records a replica's measured start-up for the lead times.
func (f *ForecastScaler) Started(s Startup) {
	if s.Warm {
		s.Warm = false
		f.WarmLead.Record(s)
		return
	}
	f.Lead.Record(s)
}

// Observe takes one metrics report.
func (f *ForecastScaler) Observe(m Metrics) {
	f.sync()
	f.forecast.values = nil
	f.Reports = append(f.Reports, m)
	if f.StaffsForLatency {
		f.Staffing.Observe(m)
	}
	f.Reports = dropBefore(f.Reports, m.At.Add(-WorkWindow))
	if n := len(f.Reports); n > maxReports {
		f.Reports = slices.Delete(f.Reports, 0, n-maxReports)
	}
	lead := f.Lead.Estimate()
	load, ok := loadFrom(f.Reports, f.Spec.Target, lead, m.At)
	if !ok {
		return
	}
	if f.Loads.Put(m.At, load, min(stepsIn(loadLeads*lead), maxLoads)) == 0 {
		return // within the newest step: its value is updated, nothing else
	}
	now := f.Loads.Last
	f.Profile.Put(now, load)
	for i, hl := range holtHalfLives {
		horizon := float64(stepsIn(lead))
		f.Trends[i].update(load, hl[0]*horizon, hl[1]*horizon)
	}
	f.settle(now, load, lead)
	if !f.PricedAt.IsZero() && now.Sub(f.PricedAt) < ErrorEvery-Step/2 {
		return
	}
	forecasts := f.forecasts(lead)
	// The SLO is kept in every moment, so an interval is late if the
	// load rose above the replicas serving at any step of it.
	f.price(now, slices.Max(f.Loads.Tail(stepsIn(ErrorEvery))), lead, forecasts)
	f.keepPending(now, lead, forecasts)
}

// forecasts are every forecaster's forecast from the newest load, none
// where it cannot say yet.
func (f *ForecastScaler) forecasts(lead time.Duration) []float64 {
	if f.forecast.values != nil && f.forecast.lead == lead {
		return f.forecast.values
	}
	h := history{loads: f.Loads, lead: lead, horizon: stepsIn(lead), profile: &f.Profile, trends: f.Trends}
	out := make([]float64, len(family))
	for i, fc := range family {
		out[i] = none
		if v, ok := fc.forecast(h); ok {
			out[i] = round3(v)
		}
	}
	f.forecast.lead, f.forecast.values = lead, out
	return out
}

// hold is the ski-rental break-even time: a replica is paid for while it
// starts, so holding an idle one for as long as a cold start-up takes
// costs what starting one again would. It is the mean of the measured
// cold start-ups, never longer than the spec's downscale_delay.
func (f *ForecastScaler) hold() time.Duration {
	cold, _ := f.meanStarts()
	return min(cold, f.Spec.DownscaleDelay.D())
}

// meanStarts are the means of the measured cold and warm start-ups: the
// lead time before any is measured, or when the spec fixes it. A warm
// start never takes longer than a cold one.
func (f *ForecastScaler) meanStarts() (cold, warm time.Duration) {
	mean := func(l LeadTime) time.Duration {
		if f.Lead.Fixed > 0 || len(l.Samples) == 0 {
			return f.Lead.Estimate()
		}
		var sum time.Duration
		for _, s := range l.Samples {
			sum += s
		}
		return sum / time.Duration(len(l.Samples))
	}
	cold = mean(f.Lead)
	return cold, min(cold, mean(f.WarmLead))
}

// Decide returns the replicas wanted at now.
func (f *ForecastScaler) Decide(now time.Time, fl Fleet) Decision {
	f.sync()
	if f.PricesFleetWarm {
		f.WarmHeld = fl.Warm
	}
	s := f.Spec
	lead := f.Lead.Estimate()
	have := fl.Replicas()
	want, reason := have, "no load known yet"
	var forecast *Forecast
	basis := "no load reported yet"
	why := func(n int) string { return fmt.Sprintf("%s: %s", replicas(n), basis) }
	stale, silent := staleness(f.Reports, f.StaleAfter, now)
	if stale {
		want, reason = 0, "metrics stale"
		why = func(n int) string {
			return fmt.Sprintf("%s: no metrics for %s (stale after %s), so the schedules and min_replicas decide",
				replicas(n), minutes(silent), minutes(f.StaleAfter))
		}
	}
	if c, known := f.choose(lead); known && !stale {
		fc := family[c.forecaster]
		current := f.Loads.Newest()
		want = replicasFor(max(0, c.load+c.margin, current))
		staffed := 0
		if f.StaffsForLatency {
			staffed = replicasFor(f.Staffing.Floor(max(c.load, current), current, f.Reports, f.Spec))
		}
		f.Chosen = fc.name
		if c.level > 0 {
			f.Chosen = candidateName(fc.name, c.level)
		}
		forecast = &Forecast{Forecaster: fc.name, At: f.Loads.Last.Add(lead), Load: round3(c.load), Margin: c.margin, Now: current, NowAt: f.Loads.Last}
		if c.expected >= 0 {
			e := c.expected
			forecast.Expected = &e
		}
		reason = fmt.Sprintf("%s expects %.2f within %s, margin %.2f", fc.name, c.load, lead.Round(time.Second), c.margin)
		margin := fmt.Sprintf("margin %.1f from the last %s's errors (their %g%% quantile)", c.margin, minutes(ErrorWindow), 100*c.level)
		if c.level == 0 {
			margin = "no margin until its errors are known"
		}
		basis = fmt.Sprintf("%s (%s) expects %.1f within %s, %s", fc.name, fc.about(lead), c.load, minutes(lead), margin)
		if f.StaffsForLatency && f.Staffing.Slack > 1 {
			basis += fmt.Sprintf("; chosen among candidates short of the load at most %.2g%% of the time, as %.2g%% of requests missed the SLO lately",
				100*f.Staffing.Allowance(), 100*f.Staffing.Share())
		}
		if staffed > want {
			want = staffed
			reason += fmt.Sprintf("; staffed for slo.latency at %.2g%% late", 100*f.Staffing.Tolerance)
			basis += fmt.Sprintf("; %d replicas answer that load within slo.latency %s for all but %.2g%% of requests (queueing at this scale: %.2g%% of requests missed the SLO lately)",
				staffed, f.Spec.SLO.Latency.D(), 100*f.Staffing.Tolerance, 100*f.Staffing.Share())
		}
		why = func(n int) string { return fmt.Sprintf("%s: %s", replicas(n), basis) }
	}
	if floor, said := scheduledFloor(s.Schedules, now, lead, stale, silent, f.StaleAfter); floor > want {
		want, reason, why = floor, said.reason, said.why
	}
	wanted := want
	hold := f.hold()
	f.Held.Put(now, float64(want), hold, true)
	f.Delayed.Put(now, float64(want), s.UpscaleDelay.D(), false)
	switch {
	case stale:
		// The stale time is itself a long delay: the fleet goes to what
		// the schedules and min_replicas say at once.
	case want > have && s.UpscaleDelay > 0:
		// Scale up only as far as has been wanted throughout the delay.
		if held, ok := f.Delayed.Since(now.Add(-s.UpscaleDelay.D())); ok && int(held) < want {
			want, reason = max(int(held), have), reason+"; upscale delay"
			why = func(n int) string {
				return fmt.Sprintf("%s: %d wanted, %d throughout the upscale delay of %s", replicas(n), wanted, int(held), minutes(s.UpscaleDelay.D()))
			}
		}
	case want < have:
		// Ski rental: a replica idle for less than the break-even time
		// is held; one idle longer is released.
		if held, ok := f.Held.Since(now.Add(-hold)); ok && int(held) > want {
			want, reason = min(int(held), have), reason+"; held"
			why = func(n int) string {
				return fmt.Sprintf("holding %s (%d wanted: %s): a replica idle for less than the %s a cold start takes costs less to keep than to start again",
					replicas(n), wanted, basis, minutes(hold))
			}
		}
	}
	switch {
	case want < s.MinReplicas && stale:
		want, reason = s.MinReplicas, "metrics stale; min_replicas"
		why = func(n int) string {
			return fmt.Sprintf("%s: min_replicas, as no metrics came for %s (stale after %s)", replicas(n), minutes(silent), minutes(f.StaleAfter))
		}
	case want < s.MinReplicas:
		want, reason = s.MinReplicas, "min_replicas"
		why = func(n int) string { return fmt.Sprintf("%s: min_replicas (%d wanted)", replicas(n), wanted) }
	case want > s.MaxReplicas:
		want, reason = s.MaxReplicas, "max_replicas"
		why = func(n int) string { return fmt.Sprintf("%s: capped at max_replicas (%d wanted)", replicas(n), wanted) }
	}
	return Decision{Replicas: want, Warm: s.WarmPool, Reason: reason, Explanation: why(want), Forecast: forecast}
}

// staleness reports whether the latest report is older than after at
// now, and how old it is. A service that never had a report is not
// stale: its load is simply not known yet.
func staleness(reports []Metrics, after time.Duration, now time.Time) (bool, time.Duration) {
	if after <= 0 || len(reports) == 0 {
		return false, 0
	}
	age := now.Sub(reports[len(reports)-1].At)
	return age >= after, age
}

// MaxStateBytes is the most the ForecastScaler's state takes as JSON,
// which a workflow carries across continue-as-new: every part of it is
// bounded by a window or a count (TestStateBoundedOverAWeek holds it to
// this over a week of reports every five seconds).
const MaxStateBytes = 64 << 10
