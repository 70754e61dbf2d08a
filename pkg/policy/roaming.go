package policy

import (
	"slices"
	"time"
)

// Roaming accumulates what a run that may use several zones would have
// seen of spot stock had it roamed: held spot in one zone while that zone
// stayed in stock and, when it ran out, moved at once to the zone in
// stock whose stretch had lasted longest (see longestInStock). Its
// stretches in stock are the spans between preemptions; a move to another
// zone shows as a stretch out of stock of no length (a preemption, and a
// restart without waiting); its stretches out of stock are the times no
// zone had stock at all. With one zone it is that zone's Availability.
// It is plain data, like Availability: a workflow keeps it in its state
// and calls Observe with the zones it decided with, after each step.
type Roaming struct {
	Availability
	// Zone is the zone the roaming run holds spot in; empty while none
	// is in stock.
	Zone string `json:"zone,omitempty"`
}

// moveGap is the length of the stretch out of stock a move between zones
// shows as.
const moveGap = time.Nanosecond

// Observe records one step of d in which each zone of zones was in stock
// or not (SpotAvailable); each zone's History is what was seen of it
// before the step, and gives the age of its stretch.
func (r *Roaming) Observe(zones []Zone, d time.Duration) { r.ObserveMoves(zones, d, 0) }

// ObserveMoves is Observe where moving to a zone of another region than
// the one held takes move (the transfer of the checkpoint): the roaming
// run moves to another region only when its own has no stock, and such a
// move shows as a stretch out of stock that long, so that the slack moves
// cost is in the stock's statistics.
func (r *Roaming) ObserveMoves(zones []Zone, d, move time.Duration) {
	if d <= 0 {
		return
	}
	held := ""
	for _, z := range zones {
		if z.Name == r.Zone {
			held = z.Region
			if z.SpotAvailable {
				r.Availability.Observe(true, d)
				return
			}
		}
	}
	best := longestInStock(zones)
	if home := inRegion(zones, held); r.Zone != "" {
		if near := longestInStock(home); near >= 0 {
			best = slices.IndexFunc(zones, func(z Zone) bool { return z.Name == home[near].Name })
		}
	}
	if best < 0 {
		r.Zone = ""
		r.Availability.Observe(false, d)
		return
	}
	if r.Zone != "" {
		gap := moveGap
		if zones[best].Region != held && move > 0 {
			gap = move
		}
		r.Availability.Observe(false, gap)
	}
	r.Zone = zones[best].Name
	r.Availability.Observe(true, d)
}

// inRegion are the zones of region r.
func inRegion(zones []Zone, r string) []Zone {
	var out []Zone
	for _, z := range zones {
		if z.Region == r {
			out = append(out, z)
		}
	}
	return out
}

// stockAge is how long the zone had been in stock before the step being
// decided; 0 when it is out of stock now or was not before.
func (z Zone) stockAge() time.Duration {
	if !z.SpotAvailable || !z.History.Last {
		return 0
	}
	return z.History.Since
}

// longestInStock is the index of the zone in stock whose stretch has
// lasted longest, the earlier on ties, or -1 when none is in stock. Spot
// stock that has lasted tends to go on lasting (see ageBuckets), and the
// age goes on telling zones apart where the fitted models, whose last
// age bucket is open, no longer do.
func longestInStock(zones []Zone) int {
	best := -1
	for i, z := range zones {
		if z.SpotAvailable && (best < 0 || z.stockAge() > zones[best].stockAge()) {
			best = i
		}
	}
	return best
}
