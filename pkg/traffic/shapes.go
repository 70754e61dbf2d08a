package traffic

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Rate is a request rate over time, in requests per second, from the
// start of the traffic.
type Rate func(t time.Duration) float64

// Generate draws traffic over span: Poisson arrivals, second by second,
// at the rate rate gives for the middle of each second, each request's
// size drawn from sizes' requests. The same seed gives the same traffic.
func Generate(name string, span time.Duration, rate Rate, sizes *Trace, seed uint64) *Trace {
	rng := rand.New(rand.NewPCG(seed, 0x67656e0a))
	out := &Trace{Name: name, Span: span}
	for s := time.Duration(0); s < span; s += time.Second {
		n := poisson(rng, max(0, rate(s+time.Second/2)))
		at := make([]time.Duration, n)
		for i := range at {
			at[i] = s + time.Duration(rng.Int64N(int64(time.Second)))
		}
		slices.Sort(at)
		for _, t := range at {
			r := sizes.Requests[rng.IntN(len(sizes.Requests))]
			r.At = t
			out.Requests = append(out.Requests, r)
		}
	}
	return out
}

// Diurnal is a daily cycle peaking at peak requests per second.
func Diurnal(peak float64, shape DayShape) Rate {
	return func(t time.Duration) float64 { return peak * shape.Factor(t%Day) }
}

// Wobble multiplies a rate by slow random drift, as real services see
// from one day to the next: a log-normal factor with the given spread
// (the standard deviation of its logarithm) that moves smoothly, taking
// about every long to wander across its range.
func Wobble(base Rate, spread float64, every, span time.Duration, seed uint64) Rate {
	rng := rand.New(rand.NewPCG(seed, 0x776f62626c650a))
	n := int(span/every) + 2
	knots := make([]float64, n)
	for i := range knots {
		knots[i] = spread * rng.NormFloat64()
	}
	return func(t time.Duration) float64 {
		x := float64(t) / float64(every)
		i := min(int(x), n-2)
		f := x - float64(i)
		// Cosine interpolation: smooth, and never beyond its knots.
		w := (1 - math.Cos(math.Pi*f)) / 2
		return base(t) * math.Exp(knots[i]*(1-w)+knots[i+1]*w)
	}
}

// FlashCrowd adds a crowd to a rate: at at, the rate climbs within rise
// to height times what it was, then the crowd thins out, halving every
// halfLife: a launch, a link on a front page, an outage elsewhere.
func FlashCrowd(base Rate, at, rise, halfLife time.Duration, height float64) Rate {
	return func(t time.Duration) float64 {
		d := t - at
		var extra float64
		switch {
		case d < 0:
		case d < rise:
			extra = float64(d) / float64(rise)
		default:
			extra = math.Exp2(-float64(d-rise) / float64(halfLife))
		}
		return base(t) * (1 + (height-1)*extra)
	}
}

// HeavyTailBursts adds bursts to a rate, perHour of them on average at
// random times, whose heights (the rate multiplier less one) and lengths
// follow Pareto distributions of index alpha from minHeight and minHold
// up, each capped at ten times its minimum: most bursts are small and
// short, a few are large or long. A burst climbs within a minute and then
// fades, halving every hold.
func HeavyTailBursts(base Rate, span time.Duration, perHour, alpha, minHeight float64, minHold time.Duration, seed uint64) Rate {
	rng := rand.New(rand.NewPCG(seed, 0x7061726574690a))
	pareto := func(min float64) float64 { return min * math.Min(10, math.Pow(1-rng.Float64(), -1/alpha)) }
	type burst struct {
		start, hold time.Duration
		height      float64
	}
	var bursts []burst
	for t := time.Duration(0); ; {
		t += time.Duration(rng.ExpFloat64() / perHour * float64(time.Hour))
		if t >= span {
			break
		}
		bursts = append(bursts, burst{t, time.Duration(pareto(float64(minHold))), pareto(minHeight)})
	}
	const climb = time.Minute
	return func(t time.Duration) float64 {
		m := 1.0
		for _, b := range bursts {
			d := t - b.start
			switch {
			case d < 0 || d > climb+20*b.hold:
			case d < climb:
				m += b.height * float64(d) / float64(climb)
			default:
				m += b.height * math.Exp2(-float64(d-climb)/float64(b.hold))
			}
		}
		return base(t) * m
	}
}

// Ramp is a rate growing linearly from from to to over span, and
// staying at to after it: a service being launched and adopted.
func Ramp(from, to float64, span time.Duration) Rate {
	return func(t time.Duration) float64 {
		f := min(1, float64(t)/float64(span))
		return from + (to-from)*f
	}
}

// OnOff switches a rate on and off: on for a time drawn uniformly from
// on, then off (no requests at all) for a time drawn from off, and so on
// over span, starting on. Each switch takes ramp to complete, as clients
// connect or drain. Batch inference and business-hours tools look so.
func OnOff(level Rate, on, off [2]time.Duration, ramp, span time.Duration, seed uint64) Rate {
	rng := rand.New(rand.NewPCG(seed, 0x6f6e6f66660a))
	draw := func(r [2]time.Duration) time.Duration {
		return r[0] + time.Duration(rng.Float64()*float64(r[1]-r[0]))
	}
	var edges []time.Duration // alternately when an on and an off period begins
	for t := time.Duration(0); t < span; {
		edges = append(edges, t)
		t += draw(on)
		edges = append(edges, t)
		t += draw(off)
	}
	return func(t time.Duration) float64 {
		i, _ := slices.BinarySearch(edges, t+1)
		i-- // edges[i] <= t: the period t is in, and whether it is on
		since := t - edges[i]
		f := min(1, float64(since)/float64(ramp))
		if i%2 == 1 { // off: the ramp down
			f = 1 - f
		}
		return level(t) * f
	}
}

// Rescale is the trace at factor times its request rate with its own
// shape: each copy of the trace, rotated by a random offset so that its
// bursts do not line up with the others', contributes its requests, the
// last copy only a share of them, so that the rate is factor times the
// original's. Below 1 this is a thinned trace, above it a superposition.
func Rescale(t *Trace, factor float64, seed uint64) *Trace {
	rng := rand.New(rand.NewPCG(seed, 0x72657363616c650a))
	out := &Trace{Name: fmt.Sprintf("%s at %gx", t.Name, factor), Span: t.Span}
	for copyN := 0; float64(copyN) < factor; copyN++ {
		keep := min(1, factor-float64(copyN))
		rot := time.Duration(0)
		if copyN > 0 {
			rot = time.Duration(rng.Int64N(int64(t.Span)))
		}
		for _, r := range t.Requests {
			if keep < 1 && rng.Float64() >= keep {
				continue
			}
			r.At = (r.At + rot) % t.Span
			out.Requests = append(out.Requests, r)
		}
	}
	sortByArrival(out.Requests)
	return out
}
