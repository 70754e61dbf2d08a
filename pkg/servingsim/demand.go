package servingsim

import (
	"math/bits"
	"time"

	"refuel/pkg/traffic"
)

// Demand is the serving capacity a trace needs, in replicas, second by
// second: the work that arrived in the trailing Window divided by the
// window. A fleet at least that large keeps up with the last window's
// work, so no queue outlasts it.
type Demand struct {
	Start    time.Time
	Window   time.Duration
	Replicas []float64 // second i of the trace
	// peaks[k][i] is the largest of Replicas[i : i+2^k], so Peak answers
	// any range in constant time (a sparse table).
	peaks [][]float64
}

// NewDemand computes a trace's demand, with second 0 at start.
func NewDemand(tr *traffic.Trace, m Model, window time.Duration, start time.Time) *Demand {
	n := int((tr.Span + time.Second - 1) / time.Second)
	work := make([]float64, n)
	for _, r := range tr.Requests {
		if i := int(r.At / time.Second); i < n {
			work[i] += m.Work(r).Seconds()
		}
	}
	w := max(1, int(window/time.Second))
	d := &Demand{Start: start, Window: window, Replicas: make([]float64, n)}
	var sum float64
	for i := range work {
		sum += work[i]
		if i >= w {
			sum -= work[i-w]
		}
		d.Replicas[i] = max(0, sum) / float64(w)
	}
	d.peaks = [][]float64{d.Replicas}
	for k := 1; 1<<k <= n; k++ {
		prev, half := d.peaks[k-1], 1<<(k-1)
		row := make([]float64, n-(1<<k)+1)
		for i := range row {
			row[i] = max(prev[i], prev[i+half])
		}
		d.peaks = append(d.peaks, row)
	}
	return d
}

// index is the second t falls in, clamped to the trace.
func (d *Demand) index(t time.Time) int {
	return min(max(0, int(t.Sub(d.Start)/time.Second)), len(d.Replicas)-1)
}

// At is the demand at t.
func (d *Demand) At(t time.Time) float64 { return d.Replicas[d.index(t)] }

// Peak is the highest demand at any second in [from, to], within the trace.
func (d *Demand) Peak(from, to time.Time) float64 {
	i, j := d.index(from), d.index(to)
	if j < i {
		return 0
	}
	k := bits.Len(uint(j-i+1)) - 1
	return max(d.peaks[k][i], d.peaks[k][j-(1<<k)+1])
}

// Max is the highest demand of the whole trace.
func (d *Demand) Max() float64 {
	return d.Peak(d.Start, d.Start.Add(time.Duration(len(d.Replicas))*time.Second))
}
