package estimate

import (
	"math"
	"math/rand/v2"
	"time"

	"refuel/pkg/policy"
)

// Before a pool has shown stretches of a kind, it is assumed to stay in
// stock for about priorIn at a time and out of it for about priorOut,
// as refuel's policy assumes; a placement score moves that split.
const (
	priorIn  = 2 * time.Hour
	priorOut = time.Hour
)

// longest bounds a drawn stretch, so a pool seen never to change still
// ends a path.
const longest = 1000 * time.Hour

// stockModel is a pool's spot stock as a semi-Markov chain: in or out of
// stock, and the age of the stretch. rate[in][b] is the rate, per hour, at
// which a stretch of that kind whose age is in bucket b ends.
type stockModel struct {
	rate [2][policy.AgeBuckets]float64
}

// modelOf fits a pool's model to its stock log. Each age bucket's own
// rate (stretches that ended at that age over the time watched at it) is
// pulled towards the kind's rate over every age by weight bucket spans of
// evidence, so an age seldom watched follows the pool's overall rate and
// not the noise of a few stretches. A kind never watched takes the prior,
// moved by the placement score where one is given.
func modelOf(a policy.Availability, score int, weight float64) stockModel {
	var m stockModel
	pIn, pOut := priors(score)
	for in, st := range [2]policy.Stretches{a.Out, a.In} {
		prior := pOut
		if in == 1 {
			prior = pIn
		}
		ended, watched := 0, time.Duration(0)
		for b := range policy.AgeBuckets {
			ended += st.Ended[b]
			watched += st.Time[b]
		}
		// One stretch of the prior's length counts beside what was seen.
		overall := float64(ended+1) / (watched.Hours() + prior.Hours())
		for b := range policy.AgeBuckets {
			span := bucketSpan(b).Hours()
			m.rate[in][b] = (float64(st.Ended[b]) + weight*overall*span) / (st.Time[b].Hours() + weight*span)
		}
	}
	return m
}

// priors are the lengths of stretches in and out of stock assumed before
// a pool shows its own. A placement score (1 to 10) is taken as the share
// of the time in stock, kept within 5-95%, over a cycle as long as the
// two priors together.
func priors(score int) (in, out time.Duration) {
	if score <= 0 {
		return priorIn, priorOut
	}
	share := min(0.95, max(0.05, float64(score)/10))
	cycle := priorIn + priorOut
	in = time.Duration(share * float64(cycle))
	return in, cycle - in
}

// bucketSpan is the width of age bucket b; the last, open one counts as
// wide as its start, as the buckets double.
func bucketSpan(b int) time.Duration {
	if b == policy.AgeBuckets-1 {
		return policy.AgeBucketStart(b)
	}
	return policy.AgeBucketStart(b+1) - policy.AgeBucketStart(b)
}

// bucketOf is the age bucket of a stretch aged age.
func bucketOf(age time.Duration) int {
	b := 0
	for b < policy.AgeBuckets-1 && age >= policy.AgeBucketStart(b+1) {
		b++
	}
	return b
}

// rest draws how much longer a stretch of the kind in, already aged age,
// goes on: through each bucket at that bucket's rate, and past the start
// of the last, open one with a tail that thins as a power of the age
// (see tail).
func (m stockModel) rest(rng *rand.Rand, in int, age time.Duration) time.Duration {
	t := age.Hours()
	last := policy.AgeBuckets - 1
	for b := bucketOf(age); b < last; b++ {
		end := policy.AgeBucketStart(b + 1).Hours()
		if r := m.rate[in][b]; r > 0 {
			if x := t + rng.ExpFloat64()/r; x < end {
				return time.Duration((x - age.Hours()) * float64(time.Hour))
			}
		}
		t = end
	}
	// Survival from t on is (t/a)^k: a = t × U^(-1/k).
	a := t * math.Pow(1-rng.Float64(), -1/m.tail(in))
	return min(longest, time.Duration((a-age.Hours())*float64(time.Hour)))
}

// tail is the index k of the power a stretch that has reached the last
// age bucket lasts by: its chance of going on from age t to a is
// (t/a)^k. Stretches of spot stock that have lasted long tend to last
// longer still, which a constant rate past the last bucket's start would
// miss: the rates fall about as fast as the ages rise. k is set so that
// the stretches' mean time beyond the bucket's start A, A/(k-1), is the
// 1/r its fitted rate r gives.
func (m stockModel) tail(in int) float64 {
	a := policy.AgeBucketStart(policy.AgeBuckets - 1).Hours()
	return 1 + a*m.rate[in][policy.AgeBuckets-1]
}

// path draws ticks points of gap, 1 while spot is in stock and 0 while it
// is not, starting in or out of stock as a coin falls and ageing from
// there. cur, when set, is the stretch the pool is in at tick at: the
// one the memory knows to be open when the estimate was asked, which the
// window's start meets. It lasts as long as one that old is drawn to.
func (m stockModel) path(rng *rand.Rand, gap time.Duration, ticks, at int, cur *Stretch) []int {
	points := make([]int, ticks)
	limit := time.Duration(ticks) * gap
	free := limit
	if cur != nil {
		free = max(0, time.Duration(at)*gap-cur.For)
	}
	in, t := rng.IntN(2), time.Duration(0)
	step := func(d time.Duration, until time.Duration) {
		fill(points, gap, t, min(t+d, until), in)
		t += d
		in = 1 - in
	}
	for t < free {
		step(max(m.rest(rng, in, 0), time.Nanosecond), free)
	}
	if cur != nil {
		t, in = free, 0
		if cur.In {
			in = 1
		}
		step(time.Duration(at)*gap-free+m.rest(rng, in, cur.For), limit)
	}
	for t < limit {
		step(max(m.rest(rng, in, 0), time.Nanosecond), limit)
	}
	return points
}

// fill sets the points of the ticks that start within [from, to) to v.
func fill(points []int, gap, from, to time.Duration, v int) {
	first := int((from + gap - 1) / gap)
	for i := first; i < len(points) && time.Duration(i)*gap < to; i++ {
		points[i] = v
	}
}

// swayed is the model in a window whose market is not the memory's
// average. A market runs calm for days (long stretches in stock) and then
// flickers (stock running out again and again); the memory sums both
// into one rate per age, and that mean rate is above a typical day's,
// since a storm's many ends weigh more than a calm day's few. A window's
// rates of running out of stock are scaled by
// exp(dispersion × z - dispersion²/2), z a standard normal drawn half in
// common with every pool of the window (common) and half for the pool
// alone (own), so that zones sway together as well as apart: the mean
// rate stays the memory's and the typical window is calmer. How long
// stock stays away once it is gone keeps the memory's rates.
func (m stockModel) swayed(common, own float64) stockModel {
	f := math.Exp(dispersion*(common+own)/math.Sqrt2 - dispersion*dispersion/2)
	for b := range m.rate[1] {
		m.rate[1][b] *= f
	}
	return m
}
