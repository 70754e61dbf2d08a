package autoscale

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"refuel/pkg/spec"
)

// forecastScaler is the policy for a service whose load, in replicas, is
// its QPS: one request per second per replica.
func forecastScaler(t *testing.T, edit func(*spec.ServiceSpec)) *ForecastScaler {
	t.Helper()
	f, err := NewForecastScaler(service(func(s *spec.ServiceSpec) {
		s.Target = spec.ScalingTarget{QPS: 1}
		if edit != nil {
			edit(s)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// drive reports load(i) every 10 s from start for n steps, deciding
// after each with the fleet at the previous decision, and returns the
// decisions.
func drive(p Policy, start time.Time, n int, load func(i int) float64) []Decision {
	out := make([]Decision, n)
	have := 1
	for i := range n {
		at := start.Add(time.Duration(i) * every)
		p.Observe(Metrics{At: at, QPS: load(i), Replicas: have})
		out[i] = p.Decide(at, Fleet{Ready: have})
		have = out[i].Replicas
	}
	return out
}

func TestForecastScalerFollowsTheLoad(t *testing.T) {
	f := forecastScaler(t, nil)
	steady := drive(f, monday, 720, func(int) float64 { return 5 })
	if d := steady[len(steady)-1]; d.Replicas != 5 || d.Forecast == nil || d.Forecast.Margin != 0 {
		t.Fatalf("a steady load of 5: %d replicas, forecast %+v (%s); want 5 with no margin", d.Replicas, d.Forecast, d.Explanation)
	}
	// A rise is followed as soon as it is seen: the newest load (the
	// last minute's) is a floor.
	rise := drive(f, monday.Add(2*time.Hour), 7, func(int) float64 { return 9 })
	if d := rise[len(rise)-1]; d.Replicas < 9 {
		t.Errorf("after a rise to 9: %d replicas (%s)", d.Replicas, d.Explanation)
	}
}

func TestMarginsAreConformalQuantiles(t *testing.T) {
	r := ForecasterRecord{}
	if r.margins() != nil {
		t.Fatal("margins without errors")
	}
	for i := range 100 {
		r.Errors = append(r.Errors, float64(100-i)) // 100 down to 1
	}
	// With n errors, the level-q margin is the ceil((n+1)q)-th smallest.
	if diff := cmp.Diff(r.margins(), []float64{51, 81, 91, 96, 100}); diff != "" {
		t.Errorf("margins at %v got(-), want(+):\n%s", marginLevels, diff)
	}
}

func TestCandidatesPricedAgainstTheSLO(t *testing.T) {
	within := Candidate{Name: "within", Cost: 100, Late: 0.5, Intervals: 100}
	cases := map[string]struct {
		c, d  Candidate
		allow float64 // 0: the SLO's share
		want  bool
	}{
		"fewer replica-hours within the SLO": {Candidate{Cost: 90, Late: 0.9, Intervals: 100}, within, 0, true},
		"more replica-hours within the SLO":  {Candidate{Cost: 110}, within, 0, false},
		"beyond the SLO, however cheap":      {Candidate{Cost: 1, Late: 2, Intervals: 100}, within, 0, false},
		"within the SLO, however dear":       {within, Candidate{Cost: 1, Late: 2, Intervals: 100}, 0, true},
		"both beyond: fewer late":            {Candidate{Cost: 200, Late: 3, Intervals: 100}, Candidate{Cost: 100, Late: 4, Intervals: 100}, 0, true},
		// Where the requests have shown room, the allowance eases.
		"within an eased allowance, cheaper": {Candidate{Cost: 90, Late: 1.5, Intervals: 100}, within, 2 * (1 - SLO), true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			allow := tc.allow
			if allow == 0 {
				allow = 1 - SLO
			}
			if got := tc.c.cheaper(tc.d, allow); got != tc.want {
				t.Errorf("cheaper %v; want %v", got, tc.want)
			}
		})
	}
}

// What a candidate is priced on: an interval counts late for the
// candidates whose replicas serving fell short of the load, as one
// interval whatever the load, but for none when every candidate fell
// short (a rise none foresaw); replica-hours fade within a few lead
// times.
func TestCandidatePricing(t *testing.T) {
	f := forecastScaler(t, nil) // a fixed lead of 5 min, no warm pool
	lead := f.Lead.Estimate()
	for i := range f.Forecasters {
		f.Forecasters[i].Errors = make([]float64, minErrors) // no margins
	}
	f.Loads.Put(monday, 1, maxLoads)
	at := monday
	price := func(n int, load, first, rest float64) {
		for range n {
			at = at.Add(ErrorEvery)
			forecasts := make([]float64, len(family))
			for i := range forecasts {
				forecasts[i] = rest
			}
			forecasts[0] = first
			f.price(at, load, lead, forecasts)
		}
	}
	late := func(forecaster int) float64 { return f.Candidates[forecaster*len(marginLevels)].Late }
	settle := 2 * stepsOf(lead) // a start-up and a break-even time of wants

	price(settle, 4, 5, 5)
	price(1, 6, 5, 5)
	if late(0) != 0 || late(1) != 0 {
		t.Fatalf("a rise every candidate missed counted late: %g, %g", late(0), late(1))
	}
	price(settle, 4, 8, 5)
	price(1, 60, 8, 5) // every one short: shared
	price(1, 6, 8, 5)  // the first forecaster's 8 serving: the rest short
	if late(0) != 0 || late(1) < 0.99 || late(1) > 1 {
		t.Errorf("after a rise only the first forecaster's candidates met: late %g and %g; want 0 and one interval", late(0), late(1))
	}
	// Priced once it has a start-up and a break-even time of wants:
	// from the settle-th interval on, each fading by LateHalfLife.
	var want float64
	for k := range settle + 4 {
		want += math.Exp2(-float64(k) * ErrorEvery.Seconds() / LateHalfLife.Seconds())
	}
	if c := f.Candidates[len(marginLevels)]; math.Abs(c.Intervals-want) > 0.01 {
		t.Errorf("priced on %g intervals; want %.3f", c.Intervals, want)
	}
	if f.Candidates[0].Cost <= f.Candidates[len(marginLevels)].Cost {
		t.Fatalf("holding 8 priced at %g, no dearer than holding 5 at %g", f.Candidates[0].Cost, f.Candidates[len(marginLevels)].Cost)
	}
	price(5*stepsOf(lead)+settle, 4, 5, 5)
	if a, b := f.Candidates[0].Cost, f.Candidates[len(marginLevels)].Cost; a > 1.05*b {
		t.Errorf("five lead times after it wanted 8 no more, its price %g is still over the 5's %g", a, b)
	}
}

// A replica no longer wanted is held for the break-even time, the mean
// cold start-up (capped by downscale_delay), and then released.
func TestSkiRentalHold(t *testing.T) {
	cases := map[string]struct {
		downscale time.Duration
		starts    []time.Duration
		hold      time.Duration
	}{
		"the fixed lead time before any start-up": {10 * time.Minute, nil, 5 * time.Minute},
		"the mean cold start-up":                  {10 * time.Minute, []time.Duration{2 * time.Minute, 4 * time.Minute}, 3 * time.Minute},
		"capped by downscale_delay":               {time.Minute, []time.Duration{4 * time.Minute}, time.Minute},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := forecastScaler(t, func(s *spec.ServiceSpec) {
				s.DownscaleDelay = spec.Duration(tc.downscale)
				if tc.starts != nil {
					s.LeadTime = "auto"
				}
			})
			for _, d := range tc.starts {
				f.Started(Startup{Provision: d})
			}
			drive(f, monday, 720, func(int) float64 { return 10 })
			ds := drive(f, monday.Add(2*time.Hour), 360, func(int) float64 { return 4 })
			wantedLess, released := -1, -1
			for i, d := range ds {
				if wantedLess < 0 && d.Forecast != nil && replicasFor(max(d.Forecast.Load+d.Forecast.Margin, d.Forecast.Now)) < 10 {
					wantedLess = i
				}
				if released < 0 && d.Replicas < 10 {
					released = i
				}
				if wantedLess >= 0 && released < 0 && !strings.HasPrefix(d.Explanation, "holding 10 replicas") {
					t.Fatalf("%s after the fall: %q; want it holding", time.Duration(i)*every, d.Explanation)
				}
			}
			if wantedLess < 0 || released < 0 {
				t.Fatalf("never wanted fewer (%d) or released (%d)", wantedLess, released)
			}
			if got := time.Duration(released-wantedLess) * every; got < tc.hold-every || got > tc.hold+every {
				t.Errorf("held %s after it wanted fewer; want %s", got, tc.hold)
			}
		})
	}
}

// A load that moves every ten minutes in a pattern that repeats each day
// is unforeseeable from the last hours alone: by the third day the
// seasonal forecaster is followed, and has the replicas in place when
// each rise comes.
func TestSeasonalNaiveLearnsTheDay(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	blocks := make([]float64, 24*6)
	for i := range blocks {
		blocks[i] = float64(2 + rng.IntN(12))
	}
	load := func(i int) float64 { return blocks[(i/60)%len(blocks)] }
	f := forecastScaler(t, nil)
	ds := drive(f, monday, 3*8640, load)
	seasonal, covered, rises := 0, 0, 0
	for i := 2 * 8640; i < len(ds); i++ {
		if strings.HasPrefix(f.Chosen, "seasonal-naive") && ds[i].Forecast != nil && ds[i].Forecast.Forecaster == "seasonal-naive" {
			seasonal++
		}
		if i%60 == 0 && load(i) > load(i-1) {
			rises++
			if float64(ds[i-1].Replicas) >= load(i) { // decided before the rise
				covered++
			}
		}
	}
	if seasonal < 8640/2 {
		t.Errorf("seasonal-naive followed in %d of the third day's 8640 decisions; want most", seasonal)
	}
	if covered < rises*9/10 {
		t.Errorf("replicas in place before %d of the third day's %d rises; want nearly all", covered, rises)
	}
}

// MaxStateBytes holds over a week of reports every five seconds, with
// start-ups, schedules and a daily cycle; and carrying the state through
// JSON every hour, as continue-as-new and a worker restart do, changes
// no decision (over the first two days).
func TestStateBoundedOverAWeek(t *testing.T) {
	run := func(carry bool, days int) ([]Decision, int) {
		f := forecastScaler(t, func(s *spec.ServiceSpec) {
			s.LeadTime = "auto"
			s.MaxReplicas = 1000
			s.Schedules = []spec.ScalingWindow{{Cron: "0 9 * * 1-5", Duration: spec.Duration(8 * time.Hour), MinReplicas: 6}}
		})
		rng := rand.New(rand.NewPCG(1, 2))
		var out []Decision
		largest := 0
		have := 4
		const step = 5 * time.Second
		for i := range days * int(24*time.Hour/step) {
			at := monday.Add(time.Duration(i) * step)
			day := 2 * math.Pi * float64(at.Sub(monday)) / float64(24*time.Hour)
			qps := max(0, 40+30*math.Sin(day)+rng.NormFloat64()*math.Sqrt(40))
			f.Observe(Metrics{At: at, QPS: qps, Replicas: have, QueueLength: float64(rng.IntN(5))})
			if i%53 == 0 {
				f.Started(Startup{Provision: time.Duration(60+rng.IntN(120)) * time.Second, Init: time.Minute, Load: time.Minute, Warm: i%3 == 0})
			}
			d := f.Decide(at, Fleet{Ready: have})
			out = append(out, d)
			have = max(1, d.Replicas)
			if i%720 == 0 {
				data, err := json.Marshal(f)
				if err != nil {
					t.Fatal(err)
				}
				largest = max(largest, len(data))
				if carry {
					var next ForecastScaler
					if err := json.Unmarshal(data, &next); err != nil {
						t.Fatal(err)
					}
					f = &next
				}
			}
		}
		return out, largest
	}
	carried, largest := run(true, 7)
	if largest > MaxStateBytes {
		t.Errorf("the state grew to %d bytes of JSON; want at most %d", largest, MaxStateBytes)
	}
	t.Logf("largest state over a week: %d bytes of JSON", largest)
	straight, _ := run(false, 2)
	if diff := cmp.Diff(carried[:len(straight)], straight); diff != "" {
		t.Errorf("carried(-), straight(+):\n%s", diff)
	}
}

func TestForecastScalerExplains(t *testing.T) {
	f := forecastScaler(t, nil)
	ds := drive(f, monday, 720, func(i int) float64 { return 5 + float64(i%7)/2 })
	d := ds[len(ds)-1]
	fc := d.Forecast
	if fc == nil || fc.Expected == nil {
		t.Fatalf("no forecast, or none met: %+v", fc)
	}
	if !strings.HasPrefix(d.Explanation, replicas(d.Replicas)+": "+fc.Forecaster+" (") ||
		!strings.Contains(d.Explanation, "from the last 60 min's errors") || !strings.Contains(d.Explanation, "within 5 min") {
		t.Errorf("explanation %q; want the replicas, the forecaster, the lead and the margin's origin", d.Explanation)
	}
	if !strings.HasPrefix(f.Chosen, fc.Forecaster+"+q") {
		t.Errorf("chosen %q; want the forecaster %s with its margin level", f.Chosen, fc.Forecaster)
	}
}

func TestForecastScalerStaleMetrics(t *testing.T) {
	window := []spec.ScalingWindow{{Cron: "0 8 * * *", Duration: spec.Duration(10 * time.Hour), MinReplicas: 3}}
	cases := map[string]struct {
		staleAfter time.Duration
		min        int
		schedules  []spec.ScalingWindow
		silence    time.Duration
		want       int
		reason     string
	}{
		"fresh":                  {staleAfter: 5 * time.Minute, min: 1, silence: time.Minute, want: 8, reason: "peak"},
		"stale, to min_replicas": {staleAfter: 5 * time.Minute, min: 1, silence: 6 * time.Minute, want: 1, reason: "metrics stale; min_replicas"},
		"stale, to none":         {staleAfter: 5 * time.Minute, min: 0, silence: 6 * time.Minute, want: 0, reason: "metrics stale"},
		"stale, to the schedule": {staleAfter: 5 * time.Minute, min: 1, schedules: window, silence: 6 * time.Minute, want: 3, reason: "metrics stale; scheduled window"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := forecastScaler(t, func(s *spec.ServiceSpec) { s.MinReplicas, s.Schedules = tc.min, tc.schedules })
			f.StaleAfter = tc.staleAfter
			start := monday.Add(9 * time.Hour)
			ds := drive(f, start, 60, func(int) float64 { return 7.5 })
			if d := ds[len(ds)-1]; d.Replicas != 8 {
				t.Fatalf("with fresh metrics %d replicas (%s); want 8", d.Replicas, d.Reason)
			}
			d := f.Decide(start.Add(59*every+tc.silence), Fleet{Ready: 8})
			if d.Replicas != tc.want || !strings.HasPrefix(d.Reason, tc.reason) {
				t.Errorf("after %s without metrics: %d replicas (%s: %s); want %d (%s)", tc.silence, d.Replicas, d.Reason, d.Explanation, tc.want, tc.reason)
			}
		})
	}
}

func TestSeries(t *testing.T) {
	var s Series
	s.Put(monday, 1, 4)
	s.Put(monday.Add(4*time.Second), 2, 4)  // the same step: replaced
	s.Put(monday.Add(30*time.Second), 3, 4) // two steps missed: repeated
	s.Put(monday.Add(40*time.Second), 4, 4) // one kept too many: the oldest goes
	if diff := cmp.Diff(s, Series{Last: monday.Add(40 * time.Second), Values: []float64{2, 2, 3, 4}}); diff != "" {
		t.Errorf("got(-), want(+):\n%s", diff)
	}
	if n := s.Put(monday, 9, 4); n != 0 || s.Newest() != 4 {
		t.Errorf("a sample from the past was taken: %d new steps, newest %g", n, s.Newest())
	}
}

func TestExtremes(t *testing.T) {
	var hi, lo Extremes
	values := []float64{3, 5, 4, 4, 2, 6, 1}
	for i, v := range values {
		at := monday.Add(time.Duration(i) * time.Minute)
		hi.Put(at, v, 3*time.Minute, true)
		lo.Put(at, v, 3*time.Minute, false)
		from := at.Add(-2 * time.Minute)
		wantHi, wantLo := math.Inf(-1), math.Inf(1)
		for _, w := range values[max(0, i-2) : i+1] {
			wantHi, wantLo = max(wantHi, w), min(wantLo, w)
		}
		if got, _ := hi.Since(from); got != wantHi {
			t.Errorf("at %d: highest %g; want %g", i, got, wantHi)
		}
		if got, _ := lo.Since(from); got != wantLo {
			t.Errorf("at %d: lowest %g; want %g", i, got, wantLo)
		}
	}
	if len(hi.Points) > 3 {
		t.Errorf("kept %d points for a window of three", len(hi.Points))
	}
}

func TestDailyProfile(t *testing.T) {
	var p DailyProfile
	p.Put(monday.Add(10*time.Hour), 4)
	p.Put(monday.Add(10*time.Hour+time.Minute), 7)
	p.Put(monday.Add(10*time.Hour+2*time.Minute), 5)
	if _, ok := p.At(monday.Add(34 * time.Hour)); ok {
		t.Error("a forecast from less than a day of loads")
	}
	p.Put(monday.Add(34*time.Hour+5*time.Minute), 1)
	if got, ok := p.At(monday.Add(58*time.Hour + 3*time.Minute)); !ok || got != 7 {
		t.Errorf("10:00-10:05 two days on: %g (%v); want the bin's highest, 7", got, ok)
	}
	p.Put(monday.Add(58*time.Hour), 2) // the same bin a day later starts afresh
	if got, _ := p.At(monday.Add(82 * time.Hour)); got != 2 {
		t.Errorf("after the bin was reached again: %g; want 2", got)
	}
}

// A candidate that asked for more replicas one warm start-up ago is
// priced as serving them only as far as the warm pool goes: the spec's
// warm_pool, or, for a policy that reads the fleet, the warm entries the
// fleet held at its latest decision.
func TestCandidatePricingCountsTheWarmPoolHeld(t *testing.T) {
	cases := map[string]struct {
		readsFleet bool
		fleetWarm  int
		late       bool
	}{
		"the spec's warm pool":               {readsFleet: false, fleetWarm: 0, late: false},
		"the fleet holds the whole pool":     {readsFleet: true, fleetWarm: 2, late: false},
		"the fleet's pool is being refilled": {readsFleet: true, fleetWarm: 0, late: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := forecastScaler(t, func(s *spec.ServiceSpec) { s.LeadTime, s.WarmPool = "", 2 })
			f.PricesFleetWarm = tc.readsFleet
			f.Decide(monday, Fleet{Ready: 4, Warm: tc.fleetWarm})
			f.Lead.Samples, f.WarmLead.Samples = []time.Duration{5 * time.Minute}, []time.Duration{ErrorEvery}
			lead := f.Lead.Estimate()
			for i := range f.Forecasters {
				f.Forecasters[i].Errors = make([]float64, minErrors) // no margins
			}
			f.Loads.Put(monday, 1, maxLoads)
			at := monday
			price := func(n int, load, first, rest float64) {
				for range n {
					at = at.Add(ErrorEvery)
					forecasts := make([]float64, len(family))
					for i := range forecasts {
						forecasts[i] = rest
					}
					forecasts[0] = first
					f.price(at, load, lead, forecasts)
				}
			}
			// The first forecaster wants 4, then 8 one warm start-up before
			// the load reaches 6; the others hold 7 throughout.
			price(2*stepsOf(lead), 4, 4, 7)
			price(1, 4, 8, 7)
			price(1, 6, 8, 7)
			if late := f.Candidates[0].Late > 0; late != tc.late {
				t.Errorf("the rising candidate late %g; want late %v", f.Candidates[0].Late, tc.late)
			}
		})
	}
}
