package autoscale

import "time"

// Extremes keeps what the highest (or lowest) value over a trailing
// window needs and no more: a point is dropped once a newer one is at
// least as high (as low), so its size is the number of distinct levels
// still in the window, however long the window.
type Extremes struct {
	// Points run oldest first, each lower (for the highest) than the
	// one before.
	Points []Point `json:"points,omitempty"`
}

// Put adds v at t, forgetting what is older than keep.
func (e *Extremes) Put(t time.Time, v float64, keep time.Duration, highest bool) {
	for n := len(e.Points); n > 0 && (highest && e.Points[n-1].Value <= v || !highest && e.Points[n-1].Value >= v); n-- {
		e.Points = e.Points[:n-1]
	}
	e.Points = dropBefore(append(e.Points, Point{t, v}), t.Add(-keep))
}

// Since is the extreme of the values put from from on; ok is false
// when none was.
func (e Extremes) Since(from time.Time) (float64, bool) {
	for _, p := range e.Points {
		if !p.At.Before(from) {
			return p.Value, true
		}
	}
	return 0, false
}
