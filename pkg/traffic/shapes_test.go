package traffic

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func constant(r float64) Rate { return func(time.Duration) float64 { return r } }

func TestRates(t *testing.T) {
	cases := map[string]struct {
		rate Rate
		at   map[time.Duration]float64
	}{
		"diurnal peaks twelve hours after its trough": {Diurnal(10, DayShape{Trough: 0.2, TroughAt: 4 * time.Hour}),
			map[time.Duration]float64{4 * time.Hour: 2, 16 * time.Hour: 10, 40 * time.Hour: 10}},
		"a flash crowd climbs, then halves every half-life": {FlashCrowd(constant(2), time.Hour, 2*time.Minute, 30*time.Minute, 4),
			map[time.Duration]float64{59 * time.Minute: 2, 61 * time.Minute: 5, 62 * time.Minute: 8, 92 * time.Minute: 5}},
		"a ramp grows linearly and then holds": {Ramp(1, 9, 8*time.Hour),
			map[time.Duration]float64{0: 1, 2 * time.Hour: 3, 8 * time.Hour: 9, 20 * time.Hour: 9}},
		"on and off, switching within the ramp": {OnOff(constant(6), [2]time.Duration{time.Hour, time.Hour}, [2]time.Duration{30 * time.Minute, 30 * time.Minute}, 10*time.Minute, 3*time.Hour, 1),
			map[time.Duration]float64{0: 0, 5 * time.Minute: 3, 30 * time.Minute: 6, 65 * time.Minute: 3, 80 * time.Minute: 0, 95 * time.Minute: 3, 2 * time.Hour: 6}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for at, want := range tc.at {
				if got := tc.rate(at); math.Abs(got-want) > 1e-9 {
					t.Errorf("rate at %s: %g; want %g", at, got, want)
				}
			}
		})
	}
}

func TestWobbleDriftsAroundItsBase(t *testing.T) {
	r := Wobble(constant(10), 0.15, 2*time.Hour, Day, 4)
	var sum, lo, hi float64 = 0, math.Inf(1), math.Inf(-1)
	for m := time.Duration(0); m < Day; m += time.Minute {
		v := r(m)
		sum += v
		lo, hi = min(lo, v), max(hi, v)
		if d := math.Abs(r(m+time.Second) - v); d > 0.01 {
			t.Fatalf("rate jumps by %g within a second at %s; want a smooth drift", d, m)
		}
	}
	if mean := sum / (24 * 60); mean < 8 || mean > 12.5 || hi-lo < 1 {
		t.Errorf("mean %.2f, range %.2f-%.2f; want a drift of some 15%% around 10", mean, lo, hi)
	}
}

func TestHeavyTailBurstsAreMostlySmall(t *testing.T) {
	r := HeavyTailBursts(constant(1), Day, 2, 1.5, 0.3, 3*time.Minute, 9)
	var above, far int
	for m := time.Duration(0); m < Day; m += time.Minute {
		switch v := r(m); {
		case v < 1:
			t.Fatalf("rate %g below its base at %s", v, m)
		case v > 1.1:
			above++
			if v > 2 {
				far++
			}
		}
	}
	if above == 0 || far >= above/2 {
		t.Errorf("%d minutes of bursts, %d of them above twice the base; want bursts, most of them small", above, far)
	}
}

func TestGenerateFollowsItsRate(t *testing.T) {
	sizes := uniform(10, time.Second)
	tr := Generate("ramp", 2*time.Hour, Ramp(1, 3, 2*time.Hour), sizes, 5)
	if diff := cmp.Diff(Generate("ramp", 2*time.Hour, Ramp(1, 3, 2*time.Hour), sizes, 5), tr); diff != "" {
		t.Errorf("same seed, different traffic:\n%s", diff)
	}
	var first, last int
	for i, r := range tr.Requests {
		if i > 0 && r.At < tr.Requests[i-1].At {
			t.Fatalf("request %d out of order", i)
		}
		switch {
		case r.At < 10*time.Minute:
			first++
		case r.At >= 110*time.Minute:
			last++
		}
	}
	// About 1.08 and 2.92 requests a second in the first and last 10 minutes.
	if math.Abs(float64(first)-650) > 100 || math.Abs(float64(last)-1750) > 150 {
		t.Errorf("%d requests in the first 10 minutes and %d in the last; want about 650 and 1750", first, last)
	}
}

func TestRescale(t *testing.T) {
	hour := uniform(3600, time.Second)
	for _, factor := range []float64{0.25, 1, 2.5} {
		got := Rescale(hour, factor, 3)
		if want := 3600 * factor; math.Abs(float64(len(got.Requests))-want) > 0.05*want {
			t.Errorf("at %gx: %d requests; want about %.0f", factor, len(got.Requests), want)
		}
		if got.Span != hour.Span {
			t.Errorf("at %gx: span %s; want the trace's %s", factor, got.Span, hour.Span)
		}
	}
}
