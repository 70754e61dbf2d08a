package autoscale

import (
	"math"
	"strings"
	"testing"
	"time"

	"refuel/pkg/spec"
)

// erlangC is the chance an arrival waits, by the textbook sums over k of
// a^k/k!: another road to what erlangSlots computes by recursion.
func erlangC(c int, a float64) float64 {
	var sum, term float64 = 0, 1
	for k := range c {
		if k > 0 {
			term *= a / float64(k)
		}
		sum += term
	}
	top := term * a / float64(c) * float64(c) / (float64(c) - a)
	return top / (sum + top)
}

func TestErlangSlotsIsTheFewestThatKeepTheWaitWithinTheMiss(t *testing.T) {
	late := func(c int, a, hold, wait float64) float64 {
		return erlangC(c, a) * math.Exp(-(float64(c)-a)*wait/hold)
	}
	cases := []struct{ offered, hold, wait, miss float64 }{
		{10, 1, 0, 0.2},    // no wait allowed: Erlang C alone
		{3.7, 13, 5, 0.01}, // one replica of 8 slots, half busy
		{44, 13, 5, 0.01},
		{44, 13, 5, 0.3},
		{120, 2, 0.5, 0.001},
	}
	for _, tc := range cases {
		c := erlangSlots(tc.offered, tc.hold, tc.wait, tc.miss)
		if got := late(c, tc.offered, tc.hold, tc.wait); got > tc.miss+1e-12 {
			t.Errorf("%+v: %d slots leave %.4f late, above the miss", tc, c, got)
		}
		if prev := c - 1; float64(prev) > tc.offered && late(prev, tc.offered, tc.hold, tc.wait) <= tc.miss {
			t.Errorf("%+v: %d slots, but %d already keep the wait within the miss", tc, c, prev)
		}
	}
	if got := erlangSlots(0, 13, 5, 0.01); got != 0 {
		t.Errorf("no load: %d slots", got)
	}
}

// servingSpec is a model server of 8 slots answering within 5 s.
func servingSpec() spec.ServiceSpec {
	return service(func(s *spec.ServiceSpec) {
		s.Command = []string{"model-server"}
		s.MaxConcurrency = 8
		s.SLO = &spec.SLO{Latency: spec.Duration(5 * time.Second)}
	})
}

// held is reports every 10 s over ten minutes in which requests arrive at
// qps and each holds its slot for hold seconds.
func held(qps, hold float64) []Metrics {
	var out []Metrics
	for i := range 60 {
		out = append(out, Metrics{At: monday.Add(time.Duration(i) * every), QPS: qps, Serving: qps * hold})
	}
	return out
}

func TestTheFloorGrowsFasterThanTheLoadAtASmallScale(t *testing.T) {
	s := Staffing{Tolerance: 0.01}
	sp := servingSpec()
	few := held(0.3, 13) // 3.9 busy slots: half a replica of work
	many := held(25, 13) // 325 busy slots: 40.6 replicas of work
	if got := s.Floor(1, 1, few, sp); got <= 1 {
		t.Errorf("half a replica of work: a floor of %.2f replicas; one replica of 8 slots leaves more than 1%% late", got)
	}
	if got := s.Floor(1, 1, many, sp); got < 40.6 || got > 44 {
		t.Errorf("40.6 replicas of work: a floor of %.2f replicas; want a few percent above the work", got)
	}
	// The load is in the target's units: only its growth carries over.
	if a, b := s.Floor(5, 5, few, sp), s.Floor(1, 1, few, sp); a != b {
		t.Errorf("the same requests at a load of 5 and of 1: floors %.2f and %.2f", a, b)
	}
	if a, b := s.Floor(2, 1, few, sp), s.Floor(1, 1, held(0.6, 13), sp); a != b {
		t.Errorf("a forecast twice the load now: floor %.2f; want %.2f, the floor of twice the requests", a, b)
	}
	if got := (Staffing{}).Floor(1, 1, few, sp); got != 0 {
		t.Errorf("a service that never missed the SLO has a floor of %.2f", got)
	}
	if got := s.Floor(1, 1, few, service(nil)); got != 0 {
		t.Errorf("a capacity-only service has a floor of %.2f", got)
	}
	if got := s.Floor(1, 1, nil, sp); got != 0 {
		t.Errorf("before any request was served: a floor of %.2f", got)
	}
}

func TestToleranceTightensWhileRequestsAreLateAndEasesWhenNot(t *testing.T) {
	var s Staffing
	at := monday
	report := func(requests, missed float64, d time.Duration) {
		for end := at.Add(d); at.Before(end); at = at.Add(every) {
			s.Observe(Metrics{At: at, Requests: requests, Missed: missed})
		}
	}
	report(10, 0, time.Hour)
	if s.Tolerance != maxTolerance || s.Slack != maxSlack || s.Allowance() != maxSlack*(1-SLO) {
		t.Fatalf("an hour in time: tolerance %g, slack %g; want no floor and the candidates' allowance eased to %g", s.Tolerance, s.Slack, float64(maxSlack))
	}
	report(10, 0.3, time.Hour) // 3% late
	if s.Slack != 1 || s.Tolerance > 0.5 {
		t.Errorf("an hour of 3%% late: slack %g, tolerance %g; want the allowance back at the SLO's and the floor's tolerance below half", s.Slack, s.Tolerance)
	}
	report(10, 0.3, 2*time.Hour)
	if s.Tolerance > 0.01 {
		t.Errorf("three hours of 3%% late: tolerance %g, want it tightened below the SLO's 1%%", s.Tolerance)
	}
	tight := s.Tolerance
	// The share missed fades with SLOHalfLife before the tolerance eases.
	report(10, 0, 2*time.Hour)
	if s.Tolerance <= tight {
		t.Errorf("two hours in time after it: tolerance %g, want it easing from %g", s.Tolerance, tight)
	}
	report(10, 0, 4*time.Hour)
	if s.Tolerance != maxTolerance {
		t.Errorf("six hours in time after it: tolerance %g, want it eased back to no floor", s.Tolerance)
	}
	// Another balancer's report, a little older than the latest counted:
	// its requests count, and time does not go back.
	before := s
	s.Observe(Metrics{At: s.At.Add(-time.Second), Requests: 10, Missed: 5})
	if s.Requests != before.Requests+10 || s.Missed != before.Missed+5 || s.At != before.At || s.Tolerance != before.Tolerance {
		t.Errorf("an older report made the staffing %+v from %+v; want its 10 requests and 5 missed counted, no fading or steering", s, before)
	}
}

func TestForecastScalerStaffsForLatencyOnlyWhereItsOwnerAsks(t *testing.T) {
	run := func(staffs bool) Decision {
		f, err := NewForecastScaler(servingSpec())
		if err != nil {
			t.Fatal(err)
		}
		f.Spec.Target = spec.ScalingTarget{QPS: 1}
		f.StaffsForLatency = staffs
		var d Decision
		have := 1
		// Half a replica of work, each request holding a slot 13 s, and
		// 3% of requests late on one replica.
		for i := range int(3 * time.Hour / every) {
			at := monday.Add(time.Duration(i) * every)
			f.Observe(Metrics{At: at, QPS: 0.5, Serving: 0.5 * 13, Replicas: have, Requests: 5, Missed: 0.15})
			d = f.Decide(at, Fleet{Ready: have})
			have = d.Replicas
		}
		return d
	}
	if d := run(false); d.Replicas != 1 {
		t.Errorf("sized to its forecast alone: %d replicas (%s), want 1", d.Replicas, d.Explanation)
	}
	d := run(true)
	if d.Replicas < 2 || !strings.Contains(d.Explanation, "within slo.latency") {
		t.Errorf("staffed for the SLO with 3%% of requests late: %d replicas (%s), want at least 2, said so", d.Replicas, d.Explanation)
	}
}
