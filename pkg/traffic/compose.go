package traffic

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Day is the length of a composed day.
const Day = 24 * time.Hour

// DayShape is a daily cycle: the request rate as a share of the day's
// peak, following a cosine from Trough at TroughAt up to 1 twelve hours
// later and back.
type DayShape struct {
	Trough   float64       // share of the peak rate at the quietest moment, in (0, 1]
	TroughAt time.Duration // time of day of the trough
}

// Factor is the share of the peak rate at time of day t.
func (s DayShape) Factor(t time.Duration) float64 {
	phase := 2 * math.Pi * float64(t-s.TroughAt) / float64(Day)
	return s.Trough + (1-s.Trough)*(1-math.Cos(phase))/2
}

// ComposeDay builds a day from a shorter trace (one real hour, say). The
// trace is laid end to end until the day is full; each copy is rotated by
// a random offset, so its bursts do not line up copy after copy, and each
// request is kept with probability shape.Factor of its time of day, so the
// rate follows the daily cycle while the trace's own minute-to-minute
// bursts remain; around the peak a copy is the whole trace, rotated. A
// trace with thin edges should be made Steady first. seed makes the day
// the same on every run.
func ComposeDay(t *Trace, shape DayShape, seed uint64) *Trace {
	rng := rand.New(rand.NewPCG(seed, 0x6461790a))
	out := &Trace{Name: fmt.Sprintf("day from %s", t.Name), Span: Day}
	for start := time.Duration(0); start < Day; start += t.Span {
		rot := time.Duration(rng.Int64N(int64(t.Span)))
		for _, r := range t.Requests {
			at := start + (r.At+rot)%t.Span
			keep := rng.Float64() < shape.Factor(at)
			if at < Day && keep {
				r.At = at
				out.Requests = append(out.Requests, r)
			}
		}
	}
	sortByArrival(out.Requests)
	return out
}

// Bursts is synthetic traffic for hold-out checks: Poisson arrivals at a
// rate following a daily cycle, with bursts on top that ramp up, hold and
// ramp down, at random times. Request sizes are drawn from a real trace.
type Bursts struct {
	Length   time.Duration
	PeakRate float64 // requests per second at the daily peak, bursts aside
	Shape    DayShape
	PerHour  float64 // mean number of bursts starting per hour
	// Factor bounds the rate multiplier at a burst's height, drawn uniformly.
	MinFactor, MaxFactor float64
	// Hold bounds how long a burst stays at its height, drawn uniformly.
	MinHold, MaxHold time.Duration
	Ramp             time.Duration // time to climb to the height, and to fall back
}

// Generate draws the traffic, with sizes taken from sizes' requests.
func (b Bursts) Generate(sizes *Trace, seed uint64) *Trace {
	rng := rand.New(rand.NewPCG(seed, 0x62757273740a))
	type burst struct {
		start, hold time.Duration
		factor      float64
	}
	var bursts []burst
	for t := time.Duration(0); ; {
		t += time.Duration(rng.ExpFloat64() / b.PerHour * float64(time.Hour))
		if t >= b.Length {
			break
		}
		hold := b.MinHold + time.Duration(rng.Float64()*float64(b.MaxHold-b.MinHold))
		bursts = append(bursts, burst{t, hold, b.MinFactor + rng.Float64()*(b.MaxFactor-b.MinFactor)})
	}
	rate := func(t time.Duration) float64 {
		m := 1.0
		for _, u := range bursts {
			m += (u.factor - 1) * envelope(t-u.start, b.Ramp, u.hold)
		}
		return b.PeakRate * b.Shape.Factor(t) * m
	}
	return Generate("synthetic bursts", b.Length, rate, sizes, seed)
}

// poisson draws a Poisson count with mean lambda by multiplying uniforms
// (Knuth); the per-second means here are small enough for it.
func poisson(rng *rand.Rand, lambda float64) int {
	limit, p, n := math.Exp(-lambda), rng.Float64(), 0
	for p > limit {
		p *= rng.Float64()
		n++
	}
	return n
}

// envelope is a burst's height, 0 to 1, at time d after it starts.
func envelope(d, ramp, hold time.Duration) float64 {
	switch {
	case d < 0 || d >= 2*ramp+hold:
		return 0
	case d < ramp:
		return float64(d) / float64(ramp)
	case d < ramp+hold:
		return 1
	}
	return float64(2*ramp+hold-d) / float64(ramp)
}
