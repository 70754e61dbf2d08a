package policy

import (
	"cmp"
	"slices"
	"time"

	"refuel/pkg/capacity"
)

// Which zone refuel's policy turns to: the spot zone it holds or would
// move to, whether a move repays itself, and the on-demand it falls back on.

// roams reports whether refuel plans with the stock across the zones
// rather than with each zone's own: when there are several and what a
// run roaming between them would have seen is known. On the traces the
// roaming model alone priced better than the cheaper of it and the
// zones' own, which undervalue waiting for any zone's stock. A first
// decision with nothing known of any zone (a market with no past) roams
// too: each zone's own model, all at the prior, prices spot's likely end
// as on-demand in that zone's region, and so took spot where on-demand
// is cheapest rather than the cheapest spot, and then paid a restart to
// move once the roaming model was met a step later (from
// RulesFirstRoams).
func roams(m Market) bool {
	if len(m.Zones) < 2 {
		return false
	}
	if m.Roaming.Since > 0 {
		return true
	}
	return m.Rules >= RulesFirstRoams && !slices.ContainsFunc(m.Zones, func(z Zone) bool { return z.History.seen() })
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
		case s.Current.Holds() && s.Current.Zone == z.Name, m.priced() && m.onDemandPrice(z) < m.onDemandPrice(chosen):
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

// roamingSpotZone is where a run across zones takes spot: the zone it
// holds spot in while in stock; else the zone in stock whose spot is
// expected to cost least per hour of work (spotRate), the restart each
// start pays counted; -1 when none is in stock. Taking the cheapest zone
// (or the one in stock longest) whatever its stock was expected to last
// hopped runs between flickering zones: each hop paid a restart from the
// slack, and on the nine zones of aws-02-15-2023 at 52 h runs spent their
// slack in the first 20 h and held on-demand for the last 30.
func roamingSpotZone(s State, m Market) int {
	if i := m.zone(s.Current.Zone); i >= 0 && s.Current.Market == capacity.Spot && m.Zones[i].SpotAvailable {
		// Held spot is left only for spot elsewhere cheaper per hour of
		// work than it, the start and the move counted: a move to a
		// cheaper region's stock that lasts (SkyNomad's proactive
		// migration). Zones alike in price never repay a start.
		if j := m.cheaperToMove(s, i); j >= 0 {
			return j
		}
		return i
	}
	best, bestRate := -1, 0.0
	for i, z := range m.Zones {
		if r := m.spotRate(s, z); z.SpotAvailable && (best < 0 || r < bestRate) {
			best, bestRate = i, r
		}
	}
	return best
}

// spotElsewhere is, for a run whose spot in zone first (roamingSpotZone's
// choice) loses to on-demand or to waiting, spot in another zone in stock
// that wins against both, the zones tried cheapest per hour of work
// first (spotRate), each weighed as first was (costRoaming) and checked
// with safe. ok is false where none wins. The cheapest zone can lose
// where the others would not: its stock expected to end soon, or a move
// of the checkpoint to another region to pay. A run that knew zones only
// by trying them held on-demand for 35 h beside spot in the region it
// was in, because a far zone's cheaper, short-lived stock was the one
// weighed (the nine zones of aws-02-15-2023 at 52 h, from the traces'
// first tick: $120.54 against $52.88 with this rule).
func (d *Decider) spotElsewhere(s State, m Market, p planPoint, first int, mayWait bool) (Choice, bool) {
	type rated struct {
		zone int
		rate float64
	}
	var order []rated // each zone's rate reckoned once: it predicts a lifetime
	for j, z := range m.Zones {
		if j != first && z.SpotAvailable {
			order = append(order, rated{j, m.spotRate(s, z)})
		}
	}
	slices.SortStableFunc(order, func(a, b rated) int { return cmp.Compare(a.rate, b.rate) })
	od := m.onDemand(s)
	for _, r := range order {
		j := r.zone
		var options []option
		if mayWait {
			options = append(options, option{c: None, cost: inf32})
		}
		options = append(options, option{c: m.spot(j), cost: inf32}, option{c: od, cost: inf32})
		d.costRoaming(s, m, p, options)
		if c := bestOption(s, options, od); c.Market == capacity.Spot && safe(s, m, c) {
			return c, true
		}
	}
	return None, false
}

// cheaperToMove is the zone in stock whose spot, started now, is expected
// to cost less per hour of work than the spot held in zone i by a margin
// (moveMargin): its price over its predicted lifetime (movedLifetime),
// with the start and the move paid within it. Only a zone that has shown
// stretches of its own qualifies (movesSeen), and only while the slack
// left after the start's overhead stays above the work left over
// moveSlack: on the nine zones of aws-02-15-2023 at 52 h, runs that moved
// whenever spot elsewhere was cheaper spent their slack on moves and
// finished on on-demand. -1 when none qualifies, or the zones are not
// priced apart.
func (m Market) cheaperToMove(s State, i int) int {
	if !m.priced() {
		return -1
	}
	best, bestRate := -1, m.Zones[i].SpotPrice*(1-moveMargin)
	for j, z := range m.Zones {
		if j == i || !z.SpotAvailable || z.History.In.Count < movesSeen {
			continue
		}
		ovh, usd := s.RestartOverhead, 0.0
		if m.moves(z) {
			ovh, usd = ovh+m.Move.Time, m.Move.USD
		}
		l := movedLifetime(s, z, ovh)
		if l <= ovh {
			continue
		}
		if m.Rules >= RulesMoveByMoney {
			if s.slack()-ovh < ovh {
				continue
			}
			usd += ovh.Hours() * max(0, m.cheapestOnDemand()-z.SpotPrice)
		} else if s.slack()-ovh < s.Remaining/moveSlack {
			continue
		}
		if rate := (z.SpotPrice*l.Hours() + usd) / (l - ovh).Hours(); rate < bestRate {
			best, bestRate = j, rate
		}
	}
	return best
}

// movedLifetime is the lifetime refuel predicts for spot started in z to
// leave the spot it holds, at most the work left and the start's overhead
// ovh: the lesser of its model's (expectedLeft, from its priors up) and
// the stretches seen alone (the Nelson-Aalen estimate SkyNomad amortises
// a move over), so that neither an optimistic prior nor a short history
// alone moves a run.
func movedLifetime(s State, z Zone, ovh time.Duration) time.Duration {
	return min(skyNomadLifetime(z.History, z.SpotAvailable, s.TimeLeft), expectedLeft(z, true), s.Remaining+ovh)
}

// spotRate is what a spot start in z is expected to cost per hour of
// work: its price for as long as its stock is expected to last (or the
// work left needs) over the work done once the restart overhead (and a
// move's transfer) is paid, and a move of the checkpoint spread over the
// work left, as the checkpoint stays in z's region for the starts after.
func (m Market) spotRate(s State, z Zone) float64 {
	price := z.SpotPrice
	if !m.priced() || price <= 0 {
		price = 1
	}
	ovh, usd := s.RestartOverhead, 0.0
	if m.moves(z) {
		ovh, usd = ovh+m.Move.Time, m.Move.USD
	}
	held := min(expectedLeft(z, true), s.Remaining+ovh)
	work := max(held-ovh, time.Minute)
	return price*held.Hours()/work.Hours() + usd/max(s.Remaining, time.Minute).Hours()
}

// repaysMove reports whether a spot start in z is worth its move of the
// checkpoint, if it moves it: whether spot there saves more than the
// move costs over on-demand for as long as its stock is expected to
// last (at most the work left).
func (m Market) repaysMove(s State, z Zone) bool {
	if !m.moves(z) || s.Current.Zone == z.Name {
		return true
	}
	held := min(s.Remaining, expectedLeft(z, true))
	move := m.Move.USD + z.SpotPrice*m.Move.Time.Hours()
	return move < (m.onDemandPrice(z)-z.SpotPrice)*held.Hours()
}

// cheapestOnDemand is the lowest on-demand price of any zone.
func (m Market) cheapestOnDemand() float64 {
	p := m.OnDemandPrice
	for _, z := range m.Zones {
		if z.OnDemandPrice > 0 {
			p = min(p, z.OnDemandPrice)
		}
	}
	return p
}
