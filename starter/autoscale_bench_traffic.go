package main

import (
	"math/rand/v2"
	"time"

	"refuel/pkg/traffic"
)

// autoscaleScenario is one traffic pattern of the autoscaling bench.
type autoscaleScenario struct {
	name string
	// about says in a few words what the pattern is, for the table.
	about string
	build func(hour *traffic.Trace, seed uint64) *traffic.Trace
}

// autoscaleScenarios are the traffic patterns the bench replays, in the
// order it prints them. "hour" and "day" are the real hour and the day
// composed from it; the rest is a family of shapes drawn with the bench's
// seed, so that --seed gives other instances of every one of them: the
// autoscaler was tuned on seed 1 only, and other seeds are its
// hold-outs. Rates are set relative to the real hour's mean rate, request
// sizes are drawn from it.
var autoscaleScenarios = []autoscaleScenario{
	{"hour", "the real hour", func(h *traffic.Trace, _ uint64) *traffic.Trace { return h }},
	{"day", "24 h composed from the real hour", func(h *traffic.Trace, seed uint64) *traffic.Trace {
		return traffic.ComposeDay(h.Steady(), traffic.DayShape{Trough: 0.2, TroughAt: 4 * time.Hour}, seed)
	}},
	{"day-late-half", "24 h from the hour's second half", func(h *traffic.Trace, seed uint64) *traffic.Trace {
		steady := h.Steady()
		late := steady.Slice(steady.Span/2, steady.Span)
		return traffic.ComposeDay(late, traffic.DayShape{Trough: 0.3, TroughAt: 2 * time.Hour}, seed+1)
	}},
	{"bursts", "daily cycle, ramped bursts 1.3-2x", func(h *traffic.Trace, seed uint64) *traffic.Trace {
		return traffic.Bursts{
			Length: traffic.Day, PeakRate: meanRate(h),
			Shape:   traffic.DayShape{Trough: 0.25, TroughAt: 5 * time.Hour},
			PerHour: 0.5, MinFactor: 1.3, MaxFactor: 2,
			MinHold: 5 * time.Minute, MaxHold: 20 * time.Minute, Ramp: 3 * time.Minute,
		}.Generate(h, seed+2)
	}},
	{"diurnal", "daily cycle with day-to-day drift", func(h *traffic.Trace, seed uint64) *traffic.Trace {
		return traffic.Generate("diurnal", traffic.Day, diurnal(h, 1, seed), h, seed+3)
	}},
	{"diurnal-small", "the same at a tenth of the rate", func(h *traffic.Trace, seed uint64) *traffic.Trace {
		return traffic.Generate("diurnal-small", traffic.Day, diurnal(h, 0.1, seed), h, seed+4)
	}},
	{"flash-crowd", "daily cycle, a 4x crowd within 2 min", func(h *traffic.Trace, seed uint64) *traffic.Trace {
		rng := rand.New(rand.NewPCG(seed, 5))
		at := 9*time.Hour + time.Duration(rng.Int64N(int64(9*time.Hour)))
		rate := traffic.FlashCrowd(diurnal(h, 0.6, seed), at, 2*time.Minute, 30*time.Minute, 4)
		return traffic.Generate("flash-crowd", traffic.Day, rate, h, seed+5)
	}},
	{"heavy-tail", "daily cycle, Pareto bursts", func(h *traffic.Trace, seed uint64) *traffic.Trace {
		rate := traffic.HeavyTailBursts(diurnal(h, 0.6, seed), traffic.Day, 1, 1.5, 0.3, 3*time.Minute, seed+6)
		return traffic.Generate("heavy-tail", traffic.Day, rate, h, seed+6)
	}},
	{"slow-ramp", "a launch: 5% to 150% over the day", func(h *traffic.Trace, seed uint64) *traffic.Trace {
		r := meanRate(h)
		return traffic.Generate("slow-ramp", traffic.Day, traffic.Ramp(0.05*r, 1.5*r, traffic.Day), h, seed+7)
	}},
	{"on-off", "on 2-6 h, off 30 min-3 h", func(h *traffic.Trace, seed uint64) *traffic.Trace {
		rate := traffic.OnOff(diurnal(h, 1, seed), [2]time.Duration{2 * time.Hour, 6 * time.Hour},
			[2]time.Duration{30 * time.Minute, 3 * time.Hour}, 5*time.Minute, traffic.Day, seed+8)
		return traffic.Generate("on-off", traffic.Day, rate, h, seed+8)
	}},
	{"hour-x0.25", "the real hour at a quarter of its rate", func(h *traffic.Trace, seed uint64) *traffic.Trace {
		return traffic.Rescale(h, 0.25, seed+9)
	}},
	{"hour-x4", "the real hour at four times its rate", func(h *traffic.Trace, seed uint64) *traffic.Trace {
		return traffic.Rescale(h, 4, seed+10)
	}},
}

// meanRate is a trace's requests per second.
func meanRate(t *traffic.Trace) float64 { return float64(len(t.Requests)) / t.Span.Seconds() }

// diurnal is a daily cycle peaking at scale times the hour's mean rate,
// with a trough of 15-35% of the peak at a random time of night and a
// drift of about 15% over hours.
func diurnal(h *traffic.Trace, scale float64, seed uint64) traffic.Rate {
	rng := rand.New(rand.NewPCG(seed, 3))
	shape := traffic.DayShape{Trough: 0.15 + 0.2*rng.Float64(), TroughAt: time.Duration(rng.Int64N(int64(6 * time.Hour)))}
	return traffic.Wobble(traffic.Diurnal(scale*meanRate(h), shape), 0.15, 2*time.Hour, traffic.Day, seed+100)
}
