package autoscale

import (
	"math"
	"slices"
	"time"
)

// Step is the grid the forecasting policy keeps its samples on: one
// value per step, whatever the cadence of the reports. Reports closer
// together update the step's value; a gap repeats the last value.
const Step = 10 * time.Second

// Series is a value sampled once per Step, the newest last, keeping at
// most a given number of samples.
type Series struct {
	// Last is the time of the newest sample; zero when there is none.
	Last   time.Time `json:"last,omitzero"`
	Values []float64 `json:"values,omitempty"`
}

// steps is how many whole steps after the newest sample t falls, rounded
// to the nearest: 0 is the newest sample's own step.
func (s Series) steps(t time.Time) int {
	return int(math.Round(float64(t.Sub(s.Last)) / float64(Step)))
}

// Put records v at t and keeps the newest keep samples. A t within the
// newest sample's step replaces it; a later one starts a new step,
// repeating the last value over any steps missed. A t before the newest
// step is ignored. It reports how many new steps began.
func (s *Series) Put(t time.Time, v float64, keep int) int {
	v = round3(v)
	if len(s.Values) == 0 {
		s.Last, s.Values = t, []float64{v}
		return 1
	}
	n := s.steps(t)
	switch {
	case n < 0:
		return 0
	case n == 0:
		s.Values[len(s.Values)-1] = v
		return 0
	}
	last := s.Values[len(s.Values)-1]
	for range min(n-1, keep) {
		s.Values = append(s.Values, last)
	}
	s.Values = append(s.Values, v)
	s.Last = s.Last.Add(time.Duration(n) * Step)
	if len(s.Values) > keep {
		s.Values = slices.Delete(s.Values, 0, len(s.Values)-keep)
	}
	return n
}

// Newest is the newest sample, 0 when there is none.
func (s Series) Newest() float64 {
	if len(s.Values) == 0 {
		return 0
	}
	return s.Values[len(s.Values)-1]
}

// Tail is the newest n samples (fewer if fewer are kept).
func (s Series) Tail(n int) []float64 {
	return s.Values[max(0, len(s.Values)-n):]
}

// round3 keeps three decimals: loads are in replicas, and a thousandth of
// a replica is below anything a decision can tell apart, while the state
// a workflow carries stays short.
func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// stepsIn is how many whole steps d spans, at least 1.
func stepsIn(d time.Duration) int { return max(1, int((d+Step/2)/Step)) }
