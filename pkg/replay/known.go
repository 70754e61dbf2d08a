package replay

import (
	"time"

	"refuel/pkg/policy"
)

// KnownStatistics decides as D does, but every zone's fitted stretch
// statistics (policy.Availability's FitIn and FitOut) are those of the
// window being replayed rather than of its past: what a policy that
// plans with the market's statistics would do if it knew them exactly,
// though not the order in which the stretches come. Replayed beside the
// same policy planning from the past, it splits that policy's distance
// from the omniscient optimum into what better estimation could still
// win and what only knowing the future could. It replaces each zone's own
// statistics, not those of the stock across zones (policy.Roaming), so it
// bounds single-zone runs.
type KnownStatistics struct {
	D   Decider
	fit []policy.Availability
}

// NewKnownStatistics measures each zone's stretches of stock for a gang
// of nodes over span from tick start of m, and wraps d to plan with them.
func NewKnownStatistics(m *Market, start int, span time.Duration, nodes int, d Decider) *KnownStatistics {
	k := &KnownStatistics{D: d, fit: make([]policy.Availability, len(m.Zones))}
	end := min(m.ticks, start+m.ticksIn(span))
	for z := range m.Zones {
		a := &k.fit[z]
		for i := start; i < end; i++ {
			a.Observe(m.Available(z, i, nodes), m.Gap)
		}
		// One more tick of the other stock closes the window's last
		// stretch, so that it counts too.
		a.Observe(!a.Last, m.Gap)
	}
	return k
}

// Decide implements Decider.
func (k *KnownStatistics) Decide(t int, s policy.State, m policy.Market, g policy.Gang) (policy.Choice, error) {
	zones := append([]policy.Zone(nil), m.Zones...)
	for i := range zones {
		zones[i].History.FitIn, zones[i].History.FitOut = k.fit[i].In, k.fit[i].Out
	}
	m.Zones = zones
	return k.D.Decide(t, s, m, g)
}
