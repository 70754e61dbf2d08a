package autoscale

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"refuel/pkg/spec"
)

// monday is 00:00 UTC on a Monday, so cron windows read naturally.
var monday = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

const every = 10 * time.Second

// feed sends n reports of m, one every 10 s from start, deciding after
// each; it returns the time of the last report and the last decision.
func feed(p Policy, start time.Time, n int, m Metrics, f Fleet) (time.Time, Decision) {
	var d Decision
	at := start
	for i := range n {
		at = start.Add(time.Duration(i) * every)
		m.At = at
		p.Observe(m)
		d = p.Decide(at, f)
	}
	return at, d
}

func service(edit func(*spec.ServiceSpec)) spec.ServiceSpec {
	s := spec.ServiceSpec{ID: "svc", MinReplicas: 1, MaxReplicas: 50, Target: spec.ScalingTarget{GPUUtilization: 0.5}, LeadTime: "5m"}
	if edit != nil {
		edit(&s)
	}
	s.Normalize()
	return s
}

func autoscaler(t *testing.T, edit func(*spec.ServiceSpec)) *Autoscaler {
	t.Helper()
	a, err := NewAutoscaler(service(edit))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestLoadFromTargets(t *testing.T) {
	cases := map[string]struct {
		target spec.ScalingTarget
		m      Metrics
		want   float64
	}{
		"utilisation":              {spec.ScalingTarget{GPUUtilization: 0.5}, Metrics{QPS: 4, GPUUtilization: 0.6, Replicas: 10}, 12},
		"qps":                      {spec.ScalingTarget{QPS: 2}, Metrics{QPS: 9, GPUUtilization: 0.1, Replicas: 10}, 4.5},
		"the larger target wins":   {spec.ScalingTarget{QPS: 2, GPUUtilization: 0.5}, Metrics{QPS: 30, GPUUtilization: 0.6, Replicas: 10}, 15},
		"idle":                     {spec.ScalingTarget{GPUUtilization: 0.8}, Metrics{Replicas: 3}, 0},
		"queue within its target":  {spec.ScalingTarget{GPUUtilization: 1, QueueLength: 2}, Metrics{QPS: 5, GPUUtilization: 0.9, QueueLength: 10, Replicas: 10}, 9},
		"queue beyond adds drains": {spec.ScalingTarget{GPUUtilization: 1, QueueLength: 1}, Metrics{QPS: 5, GPUUtilization: 0.9, QueueLength: 10, Replicas: 5}, 4.5 + 5*0.9/300},
		"concurrency":              {spec.ScalingTarget{Concurrency: 4}, Metrics{QPS: 50, InFlight: 10, Replicas: 1}, 2.5},
		"concurrency beside qps":   {spec.ScalingTarget{Concurrency: 4, QPS: 10}, Metrics{QPS: 50, InFlight: 10, Replicas: 1}, 5},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := autoscaler(t, func(s *spec.ServiceSpec) {
				s.Target = tc.target
				s.MinReplicas = 1
				if tc.target.Concurrency > 0 {
					s.Command = []string{"server"} // a concurrency target is a serving service's
				}
			})
			feed(a, monday, 12, tc.m, Fleet{Ready: tc.m.Replicas})
			got := a.Loads[len(a.Loads)-1].Value
			if math.Abs(got-tc.want) > 1e-6 {
				t.Errorf("load %.6f; want %.6f", got, tc.want)
			}
		})
	}
}

func TestLoadSeesPastSaturation(t *testing.T) {
	// 10 replicas all busy and the queue growing by 10 requests a report:
	// measured utilisation says 10 replicas, the arriving work says more.
	a := autoscaler(t, func(s *spec.ServiceSpec) { s.Target = spec.ScalingTarget{GPUUtilization: 1} })
	m := Metrics{QPS: 5, GPUUtilization: 0.9, Replicas: 10}
	at, _ := feed(a, monday, 30, m, Fleet{Ready: 10}) // learn 1.8 replica-s per request
	for i := 1; i <= 6; i++ {
		a.Observe(Metrics{At: at.Add(time.Duration(i) * every), QPS: 6, GPUUtilization: 1, QueueLength: float64(10 * i), Replicas: 10})
	}
	if got := a.Loads[len(a.Loads)-1].Value; got < 10.5 {
		t.Errorf("load %.2f while the queue grows; want above the 10 replicas busy", got)
	}
}

func TestHysteresis(t *testing.T) {
	busy := func(replicas int, util float64) Metrics {
		return Metrics{QPS: 5, GPUUtilization: util, Replicas: replicas}
	}
	cases := map[string]struct {
		edit   func(*spec.ServiceSpec)
		before Metrics // for 15 min, to learn and settle
		after  Metrics
		steps  int // reports of after
		fleet  Fleet
		want   int
	}{
		"scale up at once without an upscale delay": {nil, busy(10, 0.5), busy(10, 0.8), 7, Fleet{Ready: 10}, 16},
		"upscale delay holds a short rise": {func(s *spec.ServiceSpec) { s.UpscaleDelay = spec.Duration(time.Minute) },
			busy(10, 0.5), busy(10, 0.8), 3, Fleet{Ready: 10}, 10},
		"upscale delay lets a lasting rise through": {func(s *spec.ServiceSpec) { s.UpscaleDelay = spec.Duration(time.Minute) },
			busy(10, 0.5), busy(10, 0.8), 14, Fleet{Ready: 10}, 16},
		"downscale delay holds a fall": {nil, busy(10, 0.5), busy(10, 0.2), 30, Fleet{Ready: 10}, 10},
		"a fall outlasting the delay is followed": {func(s *spec.ServiceSpec) { s.DownscaleDelay = spec.Duration(2 * time.Minute) },
			busy(10, 0.5), busy(10, 0.2), 80, Fleet{Ready: 10}, 4},
		"a fall within tolerance is ignored": {func(s *spec.ServiceSpec) { s.DownscaleDelay = spec.Duration(time.Minute); s.Tolerance = 0.2 },
			busy(10, 0.5), busy(10, 0.45), 60, Fleet{Ready: 10}, 10},
		"max_replicas": {func(s *spec.ServiceSpec) { s.MaxReplicas = 12 }, busy(10, 0.5), busy(10, 1), 1, Fleet{Ready: 10}, 12},
		"min_replicas": {func(s *spec.ServiceSpec) { s.MinReplicas = 3; s.DownscaleDelay = spec.Duration(time.Minute) },
			busy(4, 0.2), busy(4, 0.05), 60, Fleet{Ready: 4}, 3},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := autoscaler(t, tc.edit)
			at, _ := feed(a, monday, 90, tc.before, tc.fleet)
			_, d := feed(a, at.Add(every), tc.steps, tc.after, tc.fleet)
			if d.Replicas != tc.want {
				t.Errorf("replicas %d (%s); want %d", d.Replicas, d.Reason, tc.want)
			}
		})
	}
}

func TestMarginFromMisses(t *testing.T) {
	a := autoscaler(t, nil)
	at, d := feed(a, monday, 90, Metrics{QPS: 5, GPUUtilization: 0.5, Replicas: 8}, Fleet{Ready: 8})
	if d.Replicas != 8 {
		t.Fatalf("steady: %d replicas (%s); want 8", d.Replicas, d.Reason)
	}
	// Loads came out 0.5 sqrt-replicas above forecasts, 30 times over.
	a.Misses = nil
	for i := range 30 {
		a.Misses = append(a.Misses, Point{at.Add(-time.Duration(i) * time.Minute), 0.5})
	}
	if d := a.Decide(at, Fleet{Ready: 8}); d.Replicas != 10 { // 8 + 0.5*sqrt(8) = 9.41
		t.Errorf("with a learned margin: %d replicas (%s); want 10", d.Replicas, d.Reason)
	}
}

func TestScheduledWindows(t *testing.T) {
	windows := []spec.ScalingWindow{
		{Cron: "0 8 * * 1-5", Duration: spec.Duration(10 * time.Hour), MinReplicas: 8},
		{Cron: "30 12 * * *", Duration: spec.Duration(time.Hour), MinReplicas: 12},
		{Cron: "not a cron", Duration: spec.Duration(time.Hour), MinReplicas: 99},
	}
	cases := map[string]struct {
		at   time.Time
		lead time.Duration
		want int
	}{
		"before any window":        {monday.Add(7 * time.Hour), 5 * time.Minute, 0},
		"opening within the lead":  {monday.Add(7*time.Hour + 50*time.Minute), 15 * time.Minute, 8},
		"open":                     {monday.Add(9 * time.Hour), 0, 8},
		"two open, higher wins":    {monday.Add(12*time.Hour + 45*time.Minute), 0, 12},
		"closed at its end":        {monday.Add(18 * time.Hour), 0, 0},
		"weekday window, saturday": {monday.Add(5*24*time.Hour + 9*time.Hour), 0, 0},
		"daily window, saturday":   {monday.Add(5*24*time.Hour + 13*time.Hour), 0, 12},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ScheduledFloor(windows, tc.at, tc.at.Add(tc.lead)); got != tc.want {
				t.Errorf("floor %d; want %d", got, tc.want)
			}
		})
	}
}

func TestScheduledFloorScalesAhead(t *testing.T) {
	a := autoscaler(t, func(s *spec.ServiceSpec) {
		s.Schedules = []spec.ScalingWindow{{Cron: "0 8 * * *", Duration: spec.Duration(time.Hour), MinReplicas: 20}}
	})
	_, d := feed(a, monday.Add(7*time.Hour+56*time.Minute), 1, Metrics{QPS: 1, GPUUtilization: 0.5, Replicas: 2}, Fleet{Ready: 2})
	if d.Replicas != 20 || d.Reason != "scheduled window" {
		t.Errorf("4 min before an 08:00 window with a 5 min lead: %d (%s); want 20 for the window", d.Replicas, d.Reason)
	}
}

func TestLeadTime(t *testing.T) {
	cold := func(total time.Duration) Startup {
		return Startup{Provision: total / 2, Init: total / 4, Load: total / 4}
	}
	cases := map[string]struct {
		fixed   time.Duration
		samples []Startup
		want    time.Duration
	}{
		"nothing measured":    {0, nil, DefaultLeadTime},
		"fixed":               {3 * time.Minute, []Startup{cold(time.Hour)}, 3 * time.Minute},
		"one sample":          {0, []Startup{cold(4 * time.Minute)}, 4 * time.Minute},
		"warm starts ignored": {0, []Startup{cold(4 * time.Minute), {Load: time.Second, Warm: true}}, 4 * time.Minute},
		"90th percentile": {0, func() []Startup {
			var s []Startup
			for i := 1; i <= 11; i++ {
				s = append(s, cold(time.Duration(i)*time.Minute))
			}
			return s
		}(), 10 * time.Minute},
		"only the latest 20 count": {0, func() []Startup {
			s := []Startup{cold(time.Hour), cold(time.Hour)}
			for range 20 {
				s = append(s, cold(2*time.Minute))
			}
			return s
		}(), 2 * time.Minute},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l := LeadTime{Fixed: tc.fixed}
			for _, s := range tc.samples {
				l.Record(s)
			}
			if got := l.Estimate(); got != tc.want {
				t.Errorf("estimate %s; want %s", got, tc.want)
			}
		})
	}
}

func TestLearnedLeadTimeWidensTheHorizon(t *testing.T) {
	a := autoscaler(t, func(s *spec.ServiceSpec) { s.LeadTime = "auto" })
	for range 5 {
		a.Started(Startup{Provision: 6 * time.Minute, Init: 2 * time.Minute, Load: 2 * time.Minute})
	}
	_, d := feed(a, monday, 6, Metrics{QPS: 5, GPUUtilization: 0.5, Replicas: 8}, Fleet{Ready: 8})
	if want := "load 8.00 expected within 10m0s"; d.Reason != want {
		t.Errorf("reason %q; want %q", d.Reason, want)
	}
}

// TestSameInputsSameDecisions runs a day of varying load twice, the
// second time carrying the state through JSON every hour as
// continue-as-new would.
func TestSameInputsSameDecisions(t *testing.T) {
	run := func(carry bool) []Decision {
		var p Policy = autoscaler(t, func(s *spec.ServiceSpec) {
			s.LeadTime = "auto"
			s.Schedules = []spec.ScalingWindow{{Cron: "0 9 * * *", Duration: spec.Duration(8 * time.Hour), MinReplicas: 6}}
		})
		var out []Decision
		ready := 4
		for i := range 24 * 360 {
			at := monday.Add(time.Duration(i) * every)
			phase := 2 * math.Pi * float64(i) / 360 / 24
			util := 0.5 + 0.3*math.Sin(phase) + 0.1*math.Sin(float64(i)*0.7)
			p.Observe(Metrics{At: at, QPS: 5, GPUUtilization: min(1, max(0, util)), Replicas: ready, QueueLength: float64(i % 7)})
			if i%97 == 0 {
				p.Started(Startup{Provision: time.Duration(60+i%120) * time.Second, Init: time.Minute, Load: time.Minute})
			}
			d := p.Decide(at, Fleet{Ready: ready})
			out = append(out, d)
			ready = max(1, d.Replicas)
			if carry && i%360 == 0 {
				data, err := json.Marshal(p)
				if err != nil {
					t.Fatal(err)
				}
				var next Autoscaler
				if err := json.Unmarshal(data, &next); err != nil {
					t.Fatal(err)
				}
				p = &next
			}
		}
		return out
	}
	if diff := cmp.Diff(run(true), run(false)); diff != "" {
		t.Errorf("carried(-), straight(+):\n%s", diff)
	}
}

func TestReactiveBaseline(t *testing.T) {
	cases := map[string]struct {
		qps       float64
		want      int
		notBefore time.Duration // after the load changes
	}{
		"a rise waits out 300 s":  {20, 10, 300 * time.Second},
		"a fall waits out 1200 s": {4, 2, 1200 * time.Second},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := NewReactive(2, 1, 100)
			at, _ := feed(r, monday, 12, Metrics{QPS: 10}, Fleet{Ready: 5})
			changed := at.Add(every)
			for i := range 200 {
				now := changed.Add(time.Duration(i) * every)
				r.Observe(Metrics{At: now, QPS: tc.qps})
				d := r.Decide(now, Fleet{Ready: 5})
				if d.Replicas == 5 {
					continue
				}
				if d.Replicas != tc.want || now.Sub(changed) < tc.notBefore || now.Sub(changed) > tc.notBefore+time.Minute {
					t.Errorf("%d replicas %s after the change; want %d after %s", d.Replicas, now.Sub(changed), tc.want, tc.notBefore)
				}
				return
			}
			t.Errorf("never scaled to %d", tc.want)
		})
	}
}

func TestStatic(t *testing.T) {
	if d := (Static{Replicas: 7}).Decide(monday, Fleet{Ready: 3}); d.Replicas != 7 {
		t.Errorf("static: %d; want 7", d.Replicas)
	}
}

func TestDecisionsExplainThemselves(t *testing.T) {
	busy := func(replicas int, util float64) Metrics {
		return Metrics{QPS: 5, GPUUtilization: util, Replicas: replicas}
	}
	cases := map[string]struct {
		edit   func(*spec.ServiceSpec)
		before Metrics
		after  Metrics
		steps  int
		want   string
	}{
		"steady": {nil, busy(8, 0.5), busy(8, 0.5), 1,
			"8 replicas: a load of 8.0 replicas expected within 5 min (recent peak 8.0, margin 0.0)"},
		"a fall held by the tolerance": {func(s *spec.ServiceSpec) { s.Tolerance = 0.2 }, busy(10, 0.5), busy(10, 0.45), 60,
			"holding 10 replicas: a load of 9.0 replicas expected within 5 min is within the 20% tolerance"},
		"a fall held by the downscale delay": {nil, busy(10, 0.5), busy(10, 0.2), 50,
			"10 replicas: 5 wanted now, 10 within the downscale delay of 10 min"},
		"capped": {func(s *spec.ServiceSpec) { s.MaxReplicas = 12 }, busy(10, 0.5), busy(10, 1), 12,
			"12 replicas: capped at max_replicas (20 wanted)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := autoscaler(t, tc.edit)
			f := Fleet{Ready: tc.before.Replicas}
			at, _ := feed(a, monday, 90, tc.before, f)
			_, d := feed(a, at.Add(every), tc.steps, tc.after, f)
			if d.Explanation != tc.want {
				t.Errorf("got  %q\nwant %q", d.Explanation, tc.want)
			}
		})
	}
}

// A service whose metrics stopped goes to what its schedules and
// min_replicas say once the latest report is older than StaleAfter,
// rather than stay sized for a reading that no longer holds.
func TestStaleMetrics(t *testing.T) {
	window := []spec.ScalingWindow{{Cron: "0 8 * * *", Duration: spec.Duration(10 * time.Hour), MinReplicas: 3}}
	cases := map[string]struct {
		staleAfter time.Duration
		min        int
		schedules  []spec.ScalingWindow
		silence    time.Duration
		want       int
		reason     string
	}{
		"fresh":                  {staleAfter: 5 * time.Minute, min: 1, silence: time.Minute, want: 8, reason: "load"},
		"stale, to min_replicas": {staleAfter: 5 * time.Minute, min: 1, silence: 6 * time.Minute, want: 1, reason: "metrics stale; min_replicas"},
		"stale, to none":         {staleAfter: 5 * time.Minute, min: 0, silence: 6 * time.Minute, want: 0, reason: "metrics stale"},
		"stale, to the schedule": {staleAfter: 5 * time.Minute, min: 1, schedules: window, silence: 6 * time.Minute, want: 3, reason: "metrics stale; scheduled window"},
		"never stale (0)":        {staleAfter: 0, min: 1, silence: time.Hour, want: 8, reason: "load"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := autoscaler(t, func(s *spec.ServiceSpec) {
				s.MinReplicas, s.Schedules = tc.min, tc.schedules
				s.Target = spec.ScalingTarget{QPS: 10}
			})
			a.StaleAfter = tc.staleAfter
			start := monday.Add(9 * time.Hour)
			last, d := feed(a, start, 60, Metrics{QPS: 75, Replicas: 8}, Fleet{Ready: 8})
			if d.Replicas != 8 {
				t.Fatalf("with fresh metrics %d replicas (%s); want 8", d.Replicas, d.Reason)
			}
			d = a.Decide(last.Add(tc.silence), Fleet{Ready: 8})
			if d.Replicas != tc.want || !strings.HasPrefix(d.Reason, tc.reason) {
				t.Errorf("after %s without metrics: %d replicas (%s: %s); want %d (%s)", tc.silence, d.Replicas, d.Reason, d.Explanation, tc.want, tc.reason)
			}
		})
	}
}
