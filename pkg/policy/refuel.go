package policy

import (
	"math"
	"time"

	"refuel/pkg/capacity"
)

// maxPlanCells bounds an outlook's work and slack grid; past it the plan
// step grows, trading resolution for time.
const maxPlanCells = 250_000

// planKey is the outlook for one zone's model, on a grid fixed for the
// whole run (total work and the slack it started with), so that decisions
// later in the run reuse it.
func planKey(s State, m Market, model stockModel) outlookKey {
	total := s.Done + s.Remaining
	slack := max(0, s.Elapsed+s.TimeLeft-total)
	step := max(s.RestartOverhead/2, time.Minute)
	if need := time.Duration(math.Sqrt(float64(total) * float64(slack) / maxPlanCells)); need > step {
		step = need
	}
	k := outlookKey{
		model:    model,
		step:     step,
		overhead: int((s.RestartOverhead + step - 1) / step),
		works:    int((total + step - 1) / step),
		slacks:   int(slack / step),
		spotCost: 0.3, odCost: 1,
	}
	if m.OnDemandPrice > 0 {
		k.odCost = float32(m.OnDemandPrice * step.Hours())
		k.spotCost = float32(m.Zones[0].SpotPrice * step.Hours())
	}
	return k
}

// refuel chooses, among holding nothing, spot in each zone in stock and
// on-demand, the action whose expected cost to finish is lowest under
// each zone's fitted stock model (see outlook), then checks it with safe.
// Spot is held while the slack can absorb the preemptions the zone's
// stretches promise; out of stock the run waits while the outage is
// young and the slack ample, and holds on-demand once the outage has
// aged into the kind that lasts; it returns to spot when the stretch
// looks long enough to repay the changeover; and it moves to the zone
// whose stock is likely to last longest.
func (d *Decider) refuel(s State, m Market) Choice {
	if s.Remaining <= 0 {
		return None
	}
	od := m.onDemand(s)
	if len(m.Zones) == 0 {
		return od
	}
	step := planKey(s, m, stockModel{}).step
	r := int((s.Remaining + step - 1) / step)
	slack := int(math.Floor(float64(s.TimeLeft-s.Remaining) / float64(step)))
	if slack < 0 {
		return od
	}
	type option struct {
		c    Choice
		cost float32
	}
	options := []option{{None, inf32}}
	for i, z := range m.Zones {
		if z.SpotAvailable {
			options = append(options, option{m.spot(i), inf32})
		}
	}
	options = append(options, option{od, inf32})
	for i, z := range m.Zones {
		o := d.outlook(planKey(s, m, fitStock(z.History)))
		k := o.key
		owed := min(k.overhead, int((s.OverheadLeft+step-1)/step))
		h := 0
		switch {
		case s.Current.Market == capacity.OnDemand:
			h = k.odHeld(owed)
		case s.Current == m.spot(i):
			h = k.spotHeld(owed)
		}
		in, b := 0, 0
		if z.SpotAvailable {
			in = 1
		}
		if z.History.Last == z.SpotAvailable {
			b = bucketOf(z.History.Since)
		}
		for j := range options {
			switch c := options[j].c; {
			case !c.Holds():
				options[j].cost = min(options[j].cost, o.q(r, slack, h, in, b, actNone))
			case c.Market == capacity.OnDemand:
				options[j].cost = min(options[j].cost, o.q(r, slack, h, in, b, actOnDemand))
			case c.Zone == z.Name:
				options[j].cost = o.q(r, slack, h, in, b, actSpot)
			}
		}
	}
	best := od
	bestCost := inf32
	for _, o := range options {
		if o.cost < bestCost || (o.cost == bestCost && o.c == s.Current) {
			best, bestCost = o.c, o.cost
		}
	}
	if !safe(s, m, best) {
		return od
	}
	return best
}

// refuelSpotZone is, for a flexible run, the zone the run is on spot in
// if still in stock, else the zone in stock whose stretch is least likely
// to end soon, or -1.
func refuelSpotZone(s State, m Market) int {
	if i := m.zone(s.Current.Zone); i >= 0 && s.Current.Market == capacity.Spot && m.Zones[i].SpotAvailable {
		return i
	}
	best, bestRate := -1, 0
	for i, z := range m.Zones {
		if !z.SpotAvailable {
			continue
		}
		b := 0
		if z.History.Last {
			b = bucketOf(z.History.Since)
		}
		if rate := fitStock(z.History).end[1][b]; best < 0 || rate < bestRate {
			best, bestRate = i, rate
		}
	}
	return best
}
