// Package policy holds refuel's decisions as pure functions: which market a
// run holds for its next step, per tier and deadline, and how often it
// checkpoints. Nothing here reads a clock, draws a random number or ranges
// over a map, so a Temporal workflow may call it directly and the replay
// simulator reaches the same decisions from the same inputs.
package policy

import (
	"fmt"
	"time"

	"refuel/pkg/capacity"
)

// Choice is what a run holds during its next step: nothing, or one
// instance on a market in a zone.
type Choice struct {
	// Market is capacity.Spot or capacity.OnDemand; empty holds nothing
	// (paused, spending nothing). Base capacity is granted elsewhere.
	Market capacity.Market `json:"market,omitempty"`
	Zone   string          `json:"zone,omitempty"`
	// Nodes is, for an elastic gang on spot, how many of its nodes it
	// holds when fewer than all (see Gang); 0 holds the whole gang.
	Nodes int `json:"nodes,omitempty"`
}

// None holds no instance.
var None = Choice{}

// Holds reports whether the choice holds an instance.
func (c Choice) Holds() bool { return c.Market != "" }

func (c Choice) String() string {
	if !c.Holds() {
		return "none"
	}
	if c.Zone == "" {
		return string(c.Market)
	}
	if c.Nodes > 0 {
		return fmt.Sprintf("%s/%s×%d", c.Market, c.Zone, c.Nodes)
	}
	return fmt.Sprintf("%s/%s", c.Market, c.Zone)
}

// State is what a run knows of itself at a decision.
type State struct {
	// Elapsed is the time since the run started.
	Elapsed time.Duration
	// TimeLeft is the time until the deadline; negative once it passed.
	// Runs without a deadline leave it 0 and are not asked about one.
	TimeLeft time.Duration
	// Done is the work kept in checkpoints; Remaining is what is left.
	Done, Remaining time.Duration
	// RestartOverhead is what every start of an instance costs before
	// the work progresses: boot, setup, restoring the checkpoint.
	RestartOverhead time.Duration
	// OverheadLeft is the part of the current instance's restart
	// overhead not yet paid; 0 when it is running the work.
	OverheadLeft time.Duration
	// Current is what the run holds now. A spot instance that was just
	// preempted is not held any more: Current is None then.
	Current Choice
}

// slack is the time the run may still lose before only an immediate,
// uninterrupted run would meet the deadline.
func (s State) slack() time.Duration { return s.TimeLeft - s.Remaining }

// Market is what is known of the market at a decision.
type Market struct {
	// Step is the time until the next decision; the choice is held that
	// long unless a preemption comes first.
	Step time.Duration
	// OnDemandPrice is in USD per instance-hour; 0 if unknown.
	OnDemandPrice float64
	// Zones are the places the run may use, in order of preference:
	// ties between zones go to the earlier one.
	Zones []Zone
	// Roaming is what has been seen of spot stock across Zones, as a run
	// moving between them would have seen it (see Roaming), up to but not
	// including the step being decided. Its zero value means nothing is
	// known, and refuel then plans with each zone alone.
	Roaming Roaming
	// Move is what a start in another region than the checkpoint's
	// costs; its zero value, that moves cost nothing.
	Move Move
	// Regions are, where zones lie in several regions, what has been
	// seen of the stock across each region's zones, as Roaming is across
	// all of them. refuel no longer plans with them (see costRoaming);
	// they are kept because runs carry them in their recorded state.
	Regions []RegionStock
	// Rules is the version of refuel's rules the run decides by (see
	// Rules*); 0, the first, is what runs recorded before later ones
	// decide by, so that their histories replay.
	Rules int `json:"rules,omitempty"`
}

// Versions of refuel's rules (Market.Rules).
const (
	// RulesMoveByMoney prices what leaving held spot for a cheaper zone
	// spends of the slack as money, instead of refusing the move when the
	// slack is below a share of the work left (see cheaperToMove).
	RulesMoveByMoney = 1
	// RulesDearBySlack lowers the premium at which spot counts as dear
	// (dearMargin) as the slack grows past the work left, so that a run
	// with slack to spare waits for cheaper stock expected back soon.
	RulesDearBySlack = 2
	// RulesLastingStock waits for cheaper stock only where it is
	// expected to last (see lasts).
	RulesLastingStock = 3
	// RulesFirstRoams plans a first decision with nothing known of any
	// zone as a run roaming between them (see roams).
	RulesFirstRoams = 4
	// RulesSpareSlack prices the slack a wait for cheaper stock would
	// spend as the on-demand the restarts ahead then need, and takes dear
	// spot on sight where that costs more than its premium (dearFor).
	RulesSpareSlack = 5
	// RulesSpotElsewhere weighs spot in the other zones in stock, cheapest
	// per hour of work first, where spot in the cheapest loses to
	// on-demand or waiting (see spotElsewhere).
	RulesSpotElsewhere = 6
	// RulesLatest is what the simulator decides by.
	RulesLatest = RulesSpotElsewhere
)

// RegionStock is the stock across the zones of one region.
type RegionStock struct {
	Region  string  `json:"region"`
	Roaming Roaming `json:"roaming"`
}

// Move is what moving a run's checkpoint to another region costs.
type Move struct {
	// Region is where the checkpoint is: the region of the last instance
	// that worked on the run; empty before there is a checkpoint.
	Region string
	// USD is the transfer's egress (for a gang, a node's share, as its
	// prices are one node's), Time what it adds to the restart overhead
	// of the start it precedes.
	USD  float64
	Time time.Duration
}

// moves reports whether a start in zone z would move the checkpoint.
func (m Market) moves(z Zone) bool {
	return m.Move.Region != "" && z.Region != m.Move.Region
}

// Zone is one place the run may hold an instance.
type Zone struct {
	Name string
	// SpotAvailable reports whether spot capacity can be had now: for a
	// run of several nodes, all of them at once, and a run holding spot
	// for a gang is preempted when any node is. A gang's zone is seen in
	// one node's prices.
	SpotAvailable bool
	// SpotPrice is in USD per instance-hour; 0 if unknown.
	SpotPrice float64
	// OnDemandPrice is this zone's, in USD per instance-hour; 0 means the
	// market's OnDemandPrice.
	OnDemandPrice float64
	// Region is the region the zone is in; zones of one region share
	// their checkpoints (see Move).
	Region string
	// History is what has been seen of this zone's spot stock.
	History Availability
	// Watched is History counting only the ticks the run saw the zone's
	// stock (held, tried or probed there): a run that learns stock by
	// trying carries a zone it did not look at on its last-seen stock in
	// History, and skips it here. Zero where no one keeps it apart (then
	// History stands for it).
	Watched Availability
}

// watched is Watched, or History where no one kept it apart.
func (z Zone) watched() Availability {
	if z.Watched.seen() {
		return z.Watched
	}
	return z.History
}

// priced reports whether the market's zones are placed in regions with
// prices of their own (Region or OnDemandPrice set): only then does
// refuel plan each zone at its own prices, and do the zone choices rank
// zones by price. Otherwise the zones are one market, planned at the
// first zone's spot price and taken in their order of preference, as
// before zones were priced, so that runs deciding on such markets decide
// as they always did.
func (m Market) priced() bool {
	for _, z := range m.Zones {
		if z.Region != "" || z.OnDemandPrice != 0 {
			return true
		}
	}
	return false
}

// onDemandPrice is the zone's on-demand price, or the market's.
func (m Market) onDemandPrice(z Zone) float64 {
	if z.OnDemandPrice > 0 {
		return z.OnDemandPrice
	}
	return m.OnDemandPrice
}

// zone returns the index of the named zone, or -1.
func (m Market) zone(name string) int {
	for i, z := range m.Zones {
		if z.Name == name {
			return i
		}
	}
	return -1
}

// onDemand is on-demand where a start is cheapest, the move counted (the
// first such zone on ties). A run on on-demand stays where it is: on-demand
// is in stock everywhere, so leaving saves nothing but costs a restart. A
// run on spot, or holding nothing, goes elsewhere only where that is
// strictly cheaper and the slack pays for the move's time too; else it
// stays in the zone it is in (or the first zone with no move).
func (m Market) onDemand(s State) Choice {
	if len(m.Zones) == 0 {
		return Choice{Market: capacity.OnDemand, Zone: s.Current.Zone}
	}
	cur := -1
	if s.Current.Holds() {
		cur = m.zone(s.Current.Zone)
		if s.Current.Market == capacity.OnDemand || cur < 0 {
			return Choice{Market: capacity.OnDemand, Zone: s.Current.Zone}
		}
	}
	best := cur
	for i, z := range m.Zones {
		if m.moves(z) && s.TimeLeft < s.Remaining+s.RestartOverhead+m.Move.Time {
			continue // the move would miss the deadline
		}
		if best < 0 || m.priced() && m.startPrice(z, true, s) < m.startPrice(m.Zones[best], true, s) {
			best = i
		}
	}
	if best < 0 {
		best = 0
	}
	return Choice{Market: capacity.OnDemand, Zone: m.Zones[best].Name}
}

// startPrice ranks a start in zone z on on-demand (od) or spot for the
// rest of the work: its hourly price over the work left, plus the move.
func (m Market) startPrice(z Zone, od bool, s State) float64 {
	price := z.SpotPrice
	if od {
		price = m.onDemandPrice(z)
	}
	c := price * s.Remaining.Hours()
	if m.moves(z) {
		c += m.Move.USD + price*m.Move.Time.Hours()
	}
	return c
}

// spot is spot in the zone at index i.
func (m Market) spot(i int) Choice {
	return Choice{Market: capacity.Spot, Zone: m.Zones[i].Name}
}
