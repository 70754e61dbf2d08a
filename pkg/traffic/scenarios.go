package traffic

import (
	"math/rand/v2"
	"time"
)

// Scenario is one traffic pattern of the autoscaling benchmark.
type Scenario struct {
	Name string
	// About says in a few words what the pattern is, for the table.
	About string
	// Build makes the traffic from a real trace (its rate, sizes and
	// bursts) and a seed: the same seed, the same traffic.
	Build func(real *Trace, seed uint64) *Trace
}

// Scenarios are the traffic patterns the autoscaling benchmark replays,
// in the order it prints them. "hour" and "day" are the real hour and the
// day composed from it; the rest is a family of shapes drawn with the
// bench's seed, so that each seed gives other instances of every one of
// them: the autoscaler was tuned on seed 1 only, and other seeds are its
// hold-outs. Rates are set relative to the real hour's mean rate, request
// sizes are drawn from it.
func Scenarios() []Scenario {
	return []Scenario{
		{"hour", "the real hour", func(h *Trace, _ uint64) *Trace { return h }},
		{"day", "24 h composed from the real hour", func(h *Trace, seed uint64) *Trace {
			return ComposeDay(h.Steady(), DayShape{Trough: 0.2, TroughAt: 4 * time.Hour}, seed)
		}},
		{"day-late-half", "24 h from the hour's second half", func(h *Trace, seed uint64) *Trace {
			steady := h.Steady()
			late := steady.Slice(steady.Span/2, steady.Span)
			return ComposeDay(late, DayShape{Trough: 0.3, TroughAt: 2 * time.Hour}, seed+1)
		}},
		{"bursts", "daily cycle, ramped bursts 1.3-2x", func(h *Trace, seed uint64) *Trace {
			return Bursts{
				Length: Day, PeakRate: meanRate(h),
				Shape:   DayShape{Trough: 0.25, TroughAt: 5 * time.Hour},
				PerHour: 0.5, MinFactor: 1.3, MaxFactor: 2,
				MinHold: 5 * time.Minute, MaxHold: 20 * time.Minute, Ramp: 3 * time.Minute,
			}.Generate(h, seed+2)
		}},
		{"diurnal", "daily cycle with day-to-day drift", func(h *Trace, seed uint64) *Trace {
			return Generate("diurnal", Day, diurnal(h, 1, seed), h, seed+3)
		}},
		{"diurnal-small", "the same at a tenth of the rate", func(h *Trace, seed uint64) *Trace {
			return Generate("diurnal-small", Day, diurnal(h, 0.1, seed), h, seed+4)
		}},
		{"flash-crowd", "daily cycle, a 4x crowd within 2 min", func(h *Trace, seed uint64) *Trace {
			rng := rand.New(rand.NewPCG(seed, 5))
			at := 9*time.Hour + time.Duration(rng.Int64N(int64(9*time.Hour)))
			rate := FlashCrowd(diurnal(h, 0.6, seed), at, 2*time.Minute, 30*time.Minute, 4)
			return Generate("flash-crowd", Day, rate, h, seed+5)
		}},
		{"heavy-tail", "daily cycle, Pareto bursts", func(h *Trace, seed uint64) *Trace {
			rate := HeavyTailBursts(diurnal(h, 0.6, seed), Day, 1, 1.5, 0.3, 3*time.Minute, seed+6)
			return Generate("heavy-tail", Day, rate, h, seed+6)
		}},
		{"slow-ramp", "a launch: 5% to 150% over the day", func(h *Trace, seed uint64) *Trace {
			r := meanRate(h)
			return Generate("slow-ramp", Day, Ramp(0.05*r, 1.5*r, Day), h, seed+7)
		}},
		{"on-off", "on 2-6 h, off 30 min-3 h", func(h *Trace, seed uint64) *Trace {
			rate := OnOff(diurnal(h, 1, seed), [2]time.Duration{2 * time.Hour, 6 * time.Hour},
				[2]time.Duration{30 * time.Minute, 3 * time.Hour}, 5*time.Minute, Day, seed+8)
			return Generate("on-off", Day, rate, h, seed+8)
		}},
		{"hour-x0.25", "the real hour at a quarter of its rate", func(h *Trace, seed uint64) *Trace {
			return Rescale(h, 0.25, seed+9)
		}},
		{"hour-x4", "the real hour at four times its rate", func(h *Trace, seed uint64) *Trace {
			return Rescale(h, 4, seed+10)
		}},
	}
}

// ScenarioNames are the scenarios' names, in order.
func ScenarioNames() []string {
	var names []string
	for _, s := range Scenarios() {
		names = append(names, s.Name)
	}
	return names
}

// meanRate is a trace's requests per second.
func meanRate(t *Trace) float64 { return float64(len(t.Requests)) / t.Span.Seconds() }

// diurnal is a daily cycle peaking at scale times the hour's mean rate,
// with a trough of 15-35% of the peak at a random time of night and a
// drift of about 15% over hours.
func diurnal(h *Trace, scale float64, seed uint64) Rate {
	rng := rand.New(rand.NewPCG(seed, 3))
	shape := DayShape{Trough: 0.15 + 0.2*rng.Float64(), TroughAt: time.Duration(rng.Int64N(int64(6 * time.Hour)))}
	return Wobble(Diurnal(scale*meanRate(h), shape), 0.15, 2*time.Hour, Day, seed+100)
}
