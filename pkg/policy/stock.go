package policy

import (
	"math"
	"time"
)

// Until a zone has shown its own stretches, refuel assumes spot stays in
// stock for about priorIn at a time and out of it for about priorOut; each
// age bucket's own observations outweigh the guess once they cover more
// time than the bucket spans.
const (
	priorIn  = 2 * time.Hour
	priorOut = time.Hour
)

// hazardStep is the resolution of fitted hazards: rates are rounded to
// powers of 1.1, so that a few more minutes of history do not change the
// model and a solved outlook can be reused.
const hazardStep = 1.1

// stockModel is how a zone's stock evolves, as refuel plans it: a
// semi-Markov chain whose state is in or out of stock and the age bucket
// of the current stretch. end[in][b] is the rate (per hour, as a power of
// hazardStep) at which a stretch of age bucket b ends.
type stockModel struct {
	end [2][ageBuckets]int
}

// fitStock estimates the model from what was seen of a zone.
func fitStock(a Availability) stockModel {
	var m stockModel
	pIn, pOut := priors(a.PlacementScore)
	for in, st := range [2]Stretches{a.FitOut, a.FitIn} {
		prior := pOut
		if in == 1 {
			prior = pIn
		}
		for b := range ageBuckets {
			span := bucketSpan(b)
			rate := (float64(st.Ended[b]) + span.Hours()/prior.Hours()) / (st.Time[b].Hours() + span.Hours())
			m.end[in][b] = int(math.Round(math.Log(rate) / math.Log(hazardStep)))
		}
	}
	return m
}

// priors are the stretches in and out of stock assumed before a zone
// shows its own. With a placement score, the chance it gives a request
// of succeeding (score/10, kept within 5-95%) is taken as the share of
// the time in stock, over a cycle as long as priorIn and priorOut
// together; a score of about 7 gives the priors themselves.
func priors(score int) (in, out time.Duration) {
	if score <= 0 {
		return priorIn, priorOut
	}
	share := min(0.95, max(0.05, float64(score)/10))
	cycle := priorIn + priorOut
	in = time.Duration(share * float64(cycle))
	return in, cycle - in
}

// bucketSpan is the width of bucket b; the last, open bucket counts as
// wide as the one before it doubled.
func bucketSpan(b int) time.Duration {
	if b == 0 {
		return ageBase
	}
	return bucketStart(b)
}

// endChance is the chance that a stretch in bucket b ends within step.
func (m stockModel) endChance(in, b int, step time.Duration) float64 {
	rate := math.Pow(hazardStep, float64(m.end[in][b]))
	return 1 - math.Exp(-rate*step.Hours())
}

// ageChance is the chance that a stretch in bucket b that goes on for
// step moves to the next bucket.
func ageChance(b int, step time.Duration) float64 {
	if b == ageBuckets-1 {
		return 0
	}
	return min(1, step.Hours()/bucketSpan(b).Hours())
}
