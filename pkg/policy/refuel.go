package policy

import (
	"math"
	"slices"
	"time"

	"refuel/pkg/capacity"
)

// maxPlanCells bounds an outlook's work and slack grid; past it the plan
// step grows, trading resolution for time.
const maxPlanCells = 250_000

// planKey is the outlook for zone z's model and prices, on a grid fixed
// for the whole run (total work and the slack it started with), so that
// decisions later in the run reuse it.
func planKey(s State, m Market, z Zone, model stockModel) outlookKey {
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
		k.odCost = float32(m.onDemandPrice(z) * step.Hours())
		k.spotCost = float32(z.SpotPrice * step.Hours())
	}
	return k
}

// refuel chooses, among holding nothing, spot in each zone in stock and
// on-demand, the action whose expected cost to finish is lowest under
// the fitted stock model (see outlook), then checks it with safe. With
// one zone, or nothing known of the stock across zones, each zone's own
// model prices it (costZones); with several, the model of a run roaming
// between them does (costRoaming), so that a preemption in one zone is
// not priced as if the run had to wait for that zone to come back.
// Spot is held while the slack can absorb the preemptions the zone's
// stretches promise; out of stock the run waits while the outage is
// young and the slack ample, and holds on-demand once the outage has
// aged into the kind that lasts; it returns to spot when the stretch
// looks long enough to repay the changeover; and it moves to the zone
// whose stock has lasted longest.
//
// What a decision costs: the first time a stock model is met its outlook
// is solved, a backward induction over at most maxPlanCells cells of work
// and slack; every later decision with that model reads it in
// microseconds. Models change only when a zone's count of stretches
// passes a milestone (see Availability.FitIn), so a run solves a few
// outlooks in all, one per zone or one for the roaming model. A solve for
// 48h of work with 22h of slack, the largest the bench meets, took about
// 60 ms on one idle core (BenchmarkRefuelDecide), up to a few times that
// on a loaded one, and less at tighter deadlines; a Decider keeps what it
// solved.
func (d *Decider) refuel(s State, m Market) Choice {
	defer d.forget()
	if s.Remaining <= 0 {
		return None
	}
	od := m.onDemand(s)
	if len(m.Zones) == 0 {
		return od
	}
	step := planKey(s, m, m.Zones[0], stockModel{}).step
	r := int((s.Remaining + step - 1) / step)
	slack := int(math.Floor(float64(s.TimeLeft-s.Remaining) / float64(step)))
	if slack < 0 {
		return od
	}
	options := []option{{c: None, cost: inf32}}
	for i, z := range m.Zones {
		if z.SpotAvailable {
			options = append(options, option{m.spot(i), inf32, z.stockAge()})
		}
	}
	for _, c := range m.onDemandChoices(s) {
		options = append(options, option{c: c, cost: inf32})
	}
	p := planPoint{r: r, slack: slack, step: step}
	if roams(m) {
		d.costRoaming(s, m, p, options)
	} else {
		d.costZones(s, m, p, options)
	}
	best := od
	bestCost, bestAge := inf32, time.Duration(0)
	for _, o := range options {
		if o.cost < bestCost || (o.cost == bestCost && (o.c == s.Current || (best != s.Current && o.age > bestAge))) {
			best, bestCost, bestAge = o.c, o.cost, o.age
		}
	}
	if !safe(s, m, best) {
		return od
	}
	return best
}

// option is one choice refuel weighs, with its expected cost to finish.
type option struct {
	c    Choice
	cost float32
	age  time.Duration // of the zone's stretch in stock, for ties between zones
}

// planPoint is where a run stands on the plan's grid: remaining work and
// slack in plan steps.
type planPoint struct {
	r, slack int
	step     time.Duration
}

// costRoaming costs every option with the outlook for the stock across
// the zones (see Roaming): while any zone is in stock spot can be had,
// and once the zone held runs out the run restarts in another without
// waiting if one is in stock. Every spot option costs the same but for
// the restart the current zone saves; ties go to the zone in stock the
// longest.
func (d *Decider) costRoaming(s State, m Market, p planPoint, options []option) {
	o := d.outlook(planKey(s, m, m.Zones[0], fitStock(m.Roaming.Availability)))
	k := o.key
	owed := min(k.overhead, int((s.OverheadLeft+p.step-1)/p.step))
	in, b := 0, 0
	for _, z := range m.Zones {
		if z.SpotAvailable {
			in = 1
		}
	}
	if m.Roaming.Last == (in == 1) {
		b = bucketOf(m.Roaming.Since)
	}
	for j := range options {
		c := options[j].c
		h, act := 0, actNone
		switch {
		case c.Market == capacity.Spot && c == s.Current:
			h = k.spotHeld(owed)
		case c.Market != capacity.Spot && s.Current.Market == capacity.OnDemand:
			h = k.odHeld(owed)
		}
		switch c.Market {
		case capacity.Spot:
			act = actSpot
		case capacity.OnDemand:
			act = actOnDemand
		}
		options[j].cost = o.q(p.r, p.slack, h, in, b, act)
	}
}

// costZones costs every option with each zone's own outlook, its prices
// and what reaching it costs: spot in a zone by that zone's outlook,
// on-demand in a region by the best of its zones', holding nothing by
// the best zone's. A start in another region than the checkpoint's adds
// the move: its egress, and its transfer time as slack spent on an
// instance already paid for.
func (d *Decider) costZones(s State, m Market, p planPoint, options []option) {
	for _, z := range m.Zones {
		o := d.outlook(planKey(s, m, z, fitStock(z.History)))
		k := o.key
		owed := min(k.overhead, int((s.OverheadLeft+p.step-1)/p.step))
		in, b := 0, 0
		if z.SpotAvailable {
			in = 1
		}
		if z.History.Last == z.SpotAvailable {
			b = bucketOf(z.History.Since)
		}
		// q is the cost of taking act, continuing the current instance
		// if it is c, or else starting c in this zone's stead.
		q := func(c Choice, act int) float32 {
			if c == s.Current {
				h := k.spotHeld(owed)
				if act == actOnDemand {
					h = k.odHeld(owed)
				}
				return o.q(p.r, p.slack, h, in, b, act)
			}
			if !m.moves(z) || m.OnDemandPrice == 0 {
				return o.q(p.r, p.slack, 0, in, b, act)
			}
			steps := int((m.Move.Time + p.step - 1) / p.step)
			price := k.spotCost
			if act == actOnDemand {
				price = k.odCost
			}
			return float32(m.Move.USD) + float32(steps)*price + o.q(p.r, p.slack-steps, 0, in, b, act)
		}
		for j := range options {
			switch c := options[j].c; {
			case !c.Holds():
				options[j].cost = min(options[j].cost, o.q(p.r, p.slack, 0, in, b, actNone))
			case c.Market == capacity.OnDemand && m.Zones[m.zone(c.Zone)].Region == z.Region:
				options[j].cost = min(options[j].cost, q(c, actOnDemand))
			case c.Zone == z.Name:
				options[j].cost = q(c, actSpot)
			}
		}
	}
}

// roams reports whether refuel plans with the stock across the zones
// rather than with each zone's own: when there are several and what a
// run roaming between them would have seen is known. On the traces the
// roaming model alone priced better than the cheaper of it and the
// zones' own, which undervalue waiting for any zone's stock.
func roams(m Market) bool {
	return len(m.Zones) > 1 && m.Roaming.Since > 0 && alike(m)
}

// alike reports whether every zone of m charges the same in the same
// region, so that the stock across them is one market.
func alike(m Market) bool {
	for _, z := range m.Zones {
		a := m.Zones[0]
		if z.SpotPrice != a.SpotPrice || m.onDemandPrice(z) != m.onDemandPrice(a) || z.Region != a.Region {
			return false
		}
	}
	return true
}

// onDemandChoices are the on-demand choices refuel weighs: one per
// region, in the zone the run holds an instance in there, or else where
// on-demand is cheapest (the first such zone on ties).
func (m Market) onDemandChoices(s State) []Choice {
	var out []Choice
	for _, z := range m.Zones {
		j := slices.IndexFunc(out, func(c Choice) bool { return m.Zones[m.zone(c.Zone)].Region == z.Region })
		if j < 0 {
			out = append(out, Choice{Market: capacity.OnDemand, Zone: z.Name})
			continue
		}
		chosen := m.Zones[m.zone(out[j].Zone)]
		switch {
		case s.Current.Holds() && s.Current.Zone == chosen.Name:
		case s.Current.Holds() && s.Current.Zone == z.Name, m.onDemandPrice(z) < m.onDemandPrice(chosen):
			out[j].Zone = z.Name
		}
	}
	return out
}

// refuelSpotZone is, for a flexible run, the zone the run is on spot in
// if still in stock, else the zone in stock whose stretch is least likely
// to end soon (the oldest: see longestInStock), or -1.
func refuelSpotZone(s State, m Market) int {
	if i := m.zone(s.Current.Zone); i >= 0 && s.Current.Market == capacity.Spot && m.Zones[i].SpotAvailable {
		return i
	}
	return longestInStock(m.Zones)
}
