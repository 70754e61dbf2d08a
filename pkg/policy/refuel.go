package policy

import (
	"cmp"
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
		if !m.priced() {
			k.odCost = float32(m.OnDemandPrice * step.Hours())
			k.spotCost = float32(m.Zones[0].SpotPrice * step.Hours())
		}
	}
	return k
}

// refuel chooses, among holding nothing, spot in each zone in stock and
// on-demand, the action whose expected cost to finish is lowest under
// the fitted stock model (see outlook), then checks it with safe. With
// one zone, or nothing known of the stock across zones, each zone's own
// model prices it (costZones). With several, refuel holds spot wherever
// it is in stock, safe and worth its move, staying in its zone while
// that lasts (see roamingSpotZone, repaysMove); the model of a run
// roaming between the zones (costRoaming) weighs only waiting against
// on-demand while no zone has spot, and when to leave on-demand for
// spot. On the traces, letting the model also weigh zones against each
// other, each in its own region, left runs idle or on on-demand beside
// spot and moved them more often than a move repays.
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
func (d *Decider) refuel(s State, m Market) Choice { return d.refuelAmong(s, m, true) }

// refuelAmong is refuel's choice, holding nothing among the options only
// if mayWait: a run on a cloud whose stock shows only when one tries,
// asking where to try spot, has no stock to wait for.
func (d *Decider) refuelAmong(s State, m Market, mayWait bool) Choice {
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
	var options []option
	if mayWait {
		options = append(options, option{c: None, cost: inf32})
	}
	p := planPoint{r: r, slack: slack, step: step}
	if roams(m) {
		// Across zones spot in stock is taken when safe and worth its
		// move; the model weighs only waiting against on-demand, and a
		// return from on-demand to spot.
		i := roamingSpotZone(s, m)
		if i >= 0 {
			if s.Current.Market != capacity.OnDemand && safe(s, m, m.spot(i)) && m.repaysMove(s, m.Zones[i]) && m.dearFor(s, i) == 0 {
				return m.spot(i)
			}
			options = append(options, option{c: m.spot(i), cost: inf32})
		}
		options = append(options, option{c: od, cost: inf32})
		d.costRoaming(s, m, p, options)
		// Where spot there loses, spot in another zone may not (held
		// spot is weighed only against on-demand and waiting).
		held := s.Current.Market == capacity.Spot && m.zone(s.Current.Zone) == i
		if m.Rules >= RulesSpotElsewhere && i >= 0 && !held && bestOption(s, options, od).Market != capacity.Spot {
			if c, ok := d.spotElsewhere(s, m, p, i, mayWait); ok {
				return c
			}
		}
	} else {
		for i, z := range m.Zones {
			if z.SpotAvailable {
				options = append(options, option{m.spot(i), inf32, z.stockAge()})
			}
		}
		for _, c := range m.onDemandChoices(s) {
			options = append(options, option{c: c, cost: inf32})
		}
		d.costZones(s, m, p, options)
	}
	best := bestOption(s, options, od)
	if !safe(s, m, best) {
		return od
	}
	return best
}

// bestOption is the choice of least expected cost among options; on ties
// the one held, else the zone whose stretch in stock is oldest; with
// every cost infinite, fallback.
func bestOption(s State, options []option, fallback Choice) Choice {
	best, bestCost, bestAge := fallback, inf32, time.Duration(0)
	for _, o := range options {
		if o.cost < bestCost || (o.cost == bestCost && (o.c == s.Current || (best != s.Current && o.age > bestAge))) {
			best, bestCost, bestAge = o.c, o.cost, o.age
		}
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
// waiting if one is in stock. Every option is planned with that one
// model at one spot price, that of the zone spot would be taken in now
// (with none in stock, what the stock across the zones can be expected
// to cost), so that no option carries a price or a move that the others'
// futures leave out: planning each option within its own region, as
// refuel did, priced waiting beside the checkpoint at a cheap region's
// spot without the move that spot needs, and left runs idle or on
// on-demand while the far region had spot.
func (d *Decider) costRoaming(s State, m Market, p planPoint, options []option) {
	// Spot is planned at the price of the zone it would be taken in now,
	// or, with none in stock, at what the stock across the zones can be
	// expected to cost; every option is planned alike, so that none
	// carries a price or a move the others' futures leave out.
	price := roamingPrice(m.Zones)
	premium := float32(0)
	for _, o := range options {
		if i := m.zone(o.c.Zone); o.c.Market == capacity.Spot {
			if h := m.dearFor(s, i); h > 0 {
				// Dear spot is planned as the stock across the zones,
				// its premium paid until cheaper stock is back.
				premium = float32((m.Zones[i].SpotPrice - price) * h.Hours())
				continue
			}
			price = m.Zones[i].SpotPrice
		}
	}
	in, b := 0, 0
	if anyInStock(m) {
		in = 1
	}
	if m.Roaming.Last == (in == 1) {
		b = bucketOf(m.Roaming.Since)
	}
	for j := range options {
		c := options[j].c
		z := m.Zones[max(0, m.zone(c.Zone))]
		priced := Zone{SpotPrice: price, OnDemandPrice: m.onDemandPrice(z)}
		if !c.Holds() {
			priced.OnDemandPrice = m.OnDemandPrice
		}
		o := d.outlook(planKey(s, m, priced, fitStock(m.Roaming.Availability)))
		k := o.key
		owed := min(k.overhead, int((s.OverheadLeft+p.step-1)/p.step))
		h, act, cost := 0, actNone, float32(0)
		switch c.Market {
		case capacity.Spot:
			act, cost = actSpot, k.spotCost
			if c == s.Current {
				h = k.spotHeld(owed)
			}
		case capacity.OnDemand:
			act, cost = actOnDemand, k.odCost
			if c == s.Current {
				h = k.odHeld(owed)
			}
		}
		options[j].cost = m.withMove(c, s, p, cost, func(slack int) float32 { return o.q(p.r, slack, h, in, b, act) })
		if act == actSpot {
			options[j].cost += premium
		}
	}
}

// dearFor is, when spot in zone i costs more than the stock across the
// zones can be expected to (roamingPrice) by more than moveMargin, how
// long it would be held before spot in a cheaper zone is expected back:
// the shortest expected outage left of those zones whose stock lasts
// (see lasts), at most zone i's expected stock and the work left. 0 when
// it is not dear, when cheaper stock is not expected back within the
// share of the slack a move may spend (moveSlack), when the slack the
// wait spends would leave the restarts ahead short and the on-demand
// trained in their stead costs more than the premium saved (from
// RulesSpareSlack), or under rules before RulesMoveByMoney. Holding it
// that long pays its premium over the cheaper stock; waiting instead
// spends that much slack: the roaming outlook weighs the two
// (costRoaming).
func (m Market) dearFor(s State, i int) time.Duration {
	z := m.Zones[i]
	margin := m.dearMargin(s)
	if m.Rules < RulesMoveByMoney || !m.priced() {
		return 0
	}
	across := roamingPrice(m.Zones)
	if z.SpotPrice <= across*(1+margin) {
		return 0
	}
	back := s.TimeLeft
	for _, c := range m.Zones {
		if !c.SpotAvailable && c.SpotPrice < z.SpotPrice*(1-margin) && m.lasts(s, c) {
			back = min(back, expectedLeft(c, false))
		}
	}
	if back > (s.slack()-s.RestartOverhead)/moveSlack {
		return 0 // waiting that long would spend more slack than a move may
	}
	hold := max(min(back, expectedLeft(z, true), s.Remaining), time.Minute)
	if m.Rules >= RulesSpareSlack {
		// Slack that waiting spends is slack the restarts ahead would
		// have covered: what they then lack is trained on on-demand.
		short := min(back, m.restartsAhead(s, z)-(s.slack()-back))
		if short > 0 && short.Hours()*(m.onDemandPrice(z)-z.SpotPrice) > (z.SpotPrice-across)*hold.Hours() {
			return 0
		}
	}
	return hold
}

// lasts reports whether zone z's stock, once back, is expected to last
// long enough to be worth waiting for (from RulesLastingStock): a stretch
// in stock is expected, from its start, to last lastingStarts restart
// overheads or more. Stock that flickers back for a tick is no cheaper
// stock to wait for: a run that let go of dear spot for it pays a start
// there, loses it, and pays another to take the dear spot back.
func (m Market) lasts(s State, z Zone) bool {
	if m.Rules < RulesLastingStock {
		return true
	}
	return fitStock(z.History).expectedLeft(1, 0) >= lastingStarts*s.RestartOverhead
}

// restartsAhead is the slack the restarts of the work left are expected
// to spend holding spot in zone z (from RulesSpareSlack): one restart
// overhead and one move between regions for each stretch of its stock,
// each expected to last as its stretches have from their start.
func (m Market) restartsAhead(s State, z Zone) time.Duration {
	life := fitStock(z.History).expectedLeft(1, 0)
	if life <= 0 {
		return s.Remaining
	}
	return time.Duration(float64(s.Remaining) / float64(life) * float64(s.RestartOverhead+m.Move.Time))
}

// lastingStarts is how many restart overheads a zone's stretches in
// stock must last to count as stock worth waiting for: a start pays one,
// and a stretch of four spends at most a quarter of itself restarting.
// On SkyNomad's benchmark 3 to 8 decide alike.
const lastingStarts = 4

// withMove is q at the plan's slack, or, for a start of c in another
// region than the checkpoint's, the move's egress plus its transfer time
// held at price per step and spent from the slack.
func (m Market) withMove(c Choice, s State, p planPoint, price float32, q func(slack int) float32) float32 {
	if c == s.Current || !c.Holds() || m.OnDemandPrice == 0 || !m.moves(m.Zones[max(0, m.zone(c.Zone))]) {
		return q(p.slack)
	}
	steps := int((m.Move.Time + p.step - 1) / p.step)
	return float32(m.Move.USD) + float32(steps)*price + q(p.slack-steps)
}

// roamingPrice is the spot price a run roaming between the zones can
// expect to pay when none is in stock now: that of the cheapest zone in
// stock, each zone's chance of being in stock its share of the time seen
// in stock (a half before any is seen), taken as independent.
func roamingPrice(zones []Zone) float64 {
	order := make([]int, len(zones))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(zones[a].SpotPrice, zones[b].SpotPrice) })
	var sum, weight float64
	none := 1.0 // chance that no cheaper zone is in stock
	for _, i := range order {
		z := zones[i]
		share := inStockShare(z.History)
		sum += none * share * z.SpotPrice
		weight += none * share
		none *= 1 - share
	}
	if weight == 0 {
		return zones[order[0]].SpotPrice
	}
	return sum / weight
}

// inStockShare is the share of the time a zone was seen in stock, with
// an hour of each kind assumed before anything was seen.
func inStockShare(a Availability) float64 {
	in, out := a.In.Total.Hours()+1, a.Out.Total.Hours()+1
	if a.Last {
		in += a.Since.Hours()
	} else {
		out += a.Since.Hours()
	}
	return in / (in + out)
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
			h, price := 0, k.spotCost
			if act == actOnDemand {
				price = k.odCost
			}
			switch {
			case c == s.Current && act == actSpot:
				h = k.spotHeld(owed)
			case c == s.Current:
				h = k.odHeld(owed)
			}
			return m.withMove(c, s, p, price, func(slack int) float32 { return o.q(p.r, slack, h, in, b, act) })
		}
		for j := range options {
			switch c := options[j].c; {
			case !c.Holds():
				// Waiting for this zone's spot: reaching it later moves
				// the checkpoint as reaching it now would.
				wait := m.withMove(m.spot(m.zone(z.Name)), s, p, 0, func(slack int) float32 { return o.q(p.r, slack, 0, in, b, actNone) })
				options[j].cost = min(options[j].cost, wait)
			case c.Market == capacity.OnDemand && m.Zones[m.zone(c.Zone)].Region == z.Region:
				options[j].cost = min(options[j].cost, q(c, actOnDemand))
			case c.Zone == z.Name:
				options[j].cost = q(c, actSpot)
			}
		}
	}
}

// moveMargin is how much cheaper per hour of work spot elsewhere must be
// for refuel to leave the spot it holds.
const moveMargin = 0.2

// dearMargin is how much dearer than the stock across the zones spot
// must be for dearFor to weigh waiting for cheaper stock: moveMargin
// while the slack is at most half the work left, less as it grows past
// that, down to a quarter of it (from RulesDearBySlack): slack that
// waiting would spend is cheap when there is more of it than the work
// left, and dearFor still waits only as long as a move may spend.
func (m Market) dearMargin(s State) float64 {
	if m.Rules < RulesDearBySlack || s.Remaining <= 0 {
		return moveMargin
	}
	ratio := float64(s.slack()) / float64(s.Remaining)
	return moveMargin * max(0.25, min(1, 0.5/ratio))
}

// movesSeen is how many stretches of a zone's stock refuel must have seen
// end to leave held spot for it.
const movesSeen = 3

// moveSlack bounds the slack a move may leave: at least the work left
// over this, since a move spends slack a preemption later may need.
const moveSlack = 4
