package replay

import (
	"fmt"

	"refuel/pkg/policy"
)

// KnownStatistics decides as D does, but the stretch statistics it plans
// with are those of the window being replayed rather than of its past:
// every zone's (policy.Availability's In, Out and their fits) and, across
// zones, those of the stock a run roaming them would have seen
// (policy.Roaming). It is what a policy that plans with the market's
// statistics would do if it knew them exactly, though not the order in
// which the stretches come. Replayed beside the same policy planning from
// the past, it tells how much of that policy's distance from the
// omniscient optimum better estimation could win. It is no bound: rules
// tuned on estimates from the past can do worse with the window's own.
type KnownStatistics struct {
	D     Decider
	zones []policy.Availability
	roam  policy.Availability
}

// NewKnownStatistics measures the stock of job's window from tick start
// of m, as a run of job watching every zone would have seen it, and wraps
// d to plan with it.
func NewKnownStatistics(m *Market, job Job, start int, d Decider) (*KnownStatistics, error) {
	if start < 0 || start >= m.ticks {
		return nil, &MarketError{Problem: fmt.Sprintf("start tick %d is outside the traces' %d ticks", start, m.ticks), Fix: "start within the traces"}
	}
	job.LearnsByTrying = false // the window is known whole
	meter, err := NewMeter(job, m.Zones, m.Gap)
	if err != nil {
		return nil, err
	}
	end := min(m.ticks, start+m.ticksIn(job.Deadline))
	var last []int
	for i := start; i < end; i++ {
		last = m.CountsAt(i, job.nodes())
		if err := meter.WitnessCounts(last); err != nil {
			return nil, err
		}
	}
	// One more tick of the other stock in every zone closes the window's
	// last stretches, the roaming run's too, so that they count.
	closing := make([]int, len(last))
	for z, n := range last {
		if n < job.nodes() {
			closing[z] = job.nodes()
		}
	}
	if err := meter.WitnessCounts(closing); err != nil {
		return nil, err
	}
	return &KnownStatistics{D: d, zones: meter.history, roam: meter.view.Roaming.Availability}, nil
}

// Decide implements Decider.
func (k *KnownStatistics) Decide(t int, s policy.State, m policy.Market, g policy.Gang) (policy.Choice, error) {
	zones := append([]policy.Zone(nil), m.Zones...)
	for i := range zones {
		known(&zones[i].History, k.zones[i])
		if zones[i].Watched != (policy.Availability{}) {
			known(&zones[i].Watched, k.zones[i])
		}
	}
	m.Zones = zones
	known(&m.Roaming.Availability, k.roam)
	return k.D.Decide(t, s, m, g)
}

// Probe implements Prober: D probes as it would.
func (k *KnownStatistics) Probe(t int, s policy.State, held policy.Choice, m policy.Market, learns bool, try func(zone int) bool) {
	if p, ok := k.D.(Prober); ok {
		p.Probe(t, s, held, m, learns, try)
	}
}

// known gives a the stretches of w, keeping a's current stretch (Last,
// Since) and the cloud's placement score.
func known(a *policy.Availability, w policy.Availability) {
	a.In, a.Out, a.FitIn, a.FitOut = w.In, w.Out, w.In, w.Out
}
