package policy

import "time"

// ageBuckets splits the age of a stretch of stock (or of its absence) into
// doubling spans: under 10 minutes, 10-20, 20-40, ... and over 640
// minutes. Spot markets flicker: most stretches are short, and one that
// has lasted long tends to last longer still, so the chance that a
// stretch ends depends on its age and is kept per bucket.
const ageBuckets = 8

// ageBase is the span of the first bucket.
const ageBase = 10 * time.Minute

// bucketStart is the age at which bucket b begins.
func bucketStart(b int) time.Duration {
	if b == 0 {
		return 0
	}
	return ageBase << (b - 1)
}

// bucketOf is the bucket of an age.
func bucketOf(age time.Duration) int {
	b := 0
	for b < ageBuckets-1 && age >= bucketStart(b+1) {
		b++
	}
	return b
}

// Stretches summarises the completed stretches of one kind (in stock, or
// out of it): per age bucket, the time they spent at that age and how many
// ended there. Ends over time is the rate at which a stretch of that age
// ends.
type Stretches struct {
	Time  [ageBuckets]time.Duration `json:"time"`
	Ended [ageBuckets]int           `json:"ended"`
	Count int                       `json:"count"`
	Total time.Duration             `json:"total"`
}

// add records one completed stretch of length d.
func (st *Stretches) add(d time.Duration) {
	st.expose(d)
	st.Ended[bucketOf(d-1)]++
	st.Count++
	st.Total += d
}

// Plus is the two summaries combined, as if one watcher had seen the
// stretches of both: every field is a sum, so the order in which
// summaries are combined does not matter.
func (st Stretches) Plus(o Stretches) Stretches {
	for b := range ageBuckets {
		st.Time[b] += o.Time[b]
		st.Ended[b] += o.Ended[b]
	}
	st.Count += o.Count
	st.Total += o.Total
	return st
}

// expose records d of a stretch's first time at each age: time at risk
// of ending, whether or not it then ended.
func (st *Stretches) expose(d time.Duration) {
	for b := range ageBuckets {
		lo := bucketStart(b)
		if d <= lo {
			break
		}
		hi := d
		if b < ageBuckets-1 {
			hi = min(d, bucketStart(b+1))
		}
		st.Time[b] += hi - lo
	}
}

// Availability accumulates what has been seen of one zone's spot stock.
// It is plain data, so a workflow can keep it in its state and carry it
// across continue-as-new, and the same observations always give the same
// numbers. Only completed stretches count in In and Out; the current one
// is Last and Since.
type Availability struct {
	In  Stretches `json:"in"`  // stretches with spot in stock
	Out Stretches `json:"out"` // stretches without
	// FitIn and FitOut are In and Out as they were when the count of
	// stretches last reached a milestone (each a quarter above the one
	// before): refuel plans with them, so its model of the zone, and the
	// plan solved for it, change a few times per run rather than with
	// every stretch.
	FitIn   Stretches `json:"fit_in"`
	FitOut  Stretches `json:"fit_out"`
	NextFit int       `json:"next_fit"`
	// Last is the stock at the latest observation and Since how long it
	// has been so; Since is 0 before anything was observed.
	Last  bool          `json:"last"`
	Since time.Duration `json:"since"`
	// PlacementScore is the cloud's own view of the zone's spot stock,
	// where it gives one: EC2's spot placement score, from 1 (a request
	// is unlikely to succeed) to 10 (highly likely), read beside the
	// stretches. 0 means none was given. It sets the prior the stretches
	// seen outweigh (see fitStock).
	PlacementScore int `json:"placement_score,omitempty"`
}

// seen reports whether anything is known of the zone's stock: a stretch
// observed or tried, or the cloud's placement score.
func (a Availability) seen() bool {
	return a.Since > 0 || a.In.Time[0] > 0 || a.Out.Time[0] > 0 || a.PlacementScore > 0
}

// Observe records that spot was available (or not) for d.
func (a *Availability) Observe(available bool, d time.Duration) {
	if d <= 0 {
		return
	}
	if a.Since > 0 && available != a.Last {
		a.close()
	}
	a.Last = available
	a.Since += d
}

// Seen records a stretch of stock (in) or of its absence seen from its
// start for d, where only part of the market is watched: a spot instance
// held from launch until preempted (ended) or given back (not ended), or
// a run's tries finding no stock until one found some (ended) or it
// stopped trying. A stretch not seen to end still counts its time at risk,
// so fitted rates are not biased towards short stretches. The model is
// refitted at once (its callers plan afresh each time); the current
// stretch (Last, Since) is not touched.
func (a *Availability) Seen(in bool, d time.Duration, ended bool) {
	if d <= 0 {
		return
	}
	st := &a.Out
	if in {
		st = &a.In
	}
	if ended {
		st.add(d)
	} else {
		st.expose(d)
	}
	a.FitIn, a.FitOut = a.In, a.Out
}

// close ends the current stretch.
func (a *Availability) close() {
	if a.Last {
		a.In.add(a.Since)
	} else {
		a.Out.add(a.Since)
	}
	a.Since = 0
	if n := a.In.Count + a.Out.Count; n >= a.NextFit {
		a.FitIn, a.FitOut = a.In, a.Out
		a.NextFit = max(n+1, n*5/4)
	}
}
