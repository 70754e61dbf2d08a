package policy

import (
	"time"

	"refuel/pkg/capacity"
)

// WaitForSpot answers, for a deadline run holding nothing on a cloud
// whose spot stock shows only when one tries to launch, whether to keep
// waiting for spot after a try found none (true) or to take on-demand
// now. Every zone of m is taken as out of stock, as the try just showed,
// for as long as its History says (with none, since the try); the answer
// is refuel's: wait while the slack can afford the outage the zones'
// stretches promise, with the changeover still to pay.
func WaitForSpot(s State, m Market) bool { return new(Decider).WaitForSpot(s, m) }

// WaitForSpot is the package's WaitForSpot, with d's outlooks.
func (d *Decider) WaitForSpot(s State, m Market) bool {
	if s.Remaining <= 0 || len(m.Zones) == 0 {
		return false
	}
	s.Current, s.OverheadLeft = None, 0
	capSlack(&s)
	return !d.refuel(s, withStock(m, false)).Holds()
}

// SpotToTryFirst is, for a deadline run that WaitForSpot says should wait
// for spot, where to try first when it tries again: refuel's choice for
// the run holding nothing with every zone of m in stock, so that a zone
// in another region than the checkpoint's goes first only if its price
// repays the move. ok is false when that choice is not spot.
func (d *Decider) SpotToTryFirst(s State, m Market) (c Choice, ok bool) {
	if s.Remaining <= 0 || len(m.Zones) == 0 {
		return None, false
	}
	s.Current, s.OverheadLeft = None, 0
	capSlack(&s)
	c = d.refuelAmong(s, withStock(m, true), false)
	return c, c.Market == capacity.Spot
}

// withStock is m with every zone in stock or out of it, the zones copied.
func withStock(m Market, in bool) Market {
	zones := make([]Zone, len(m.Zones))
	for i, z := range m.Zones {
		z.SpotAvailable = in
		zones[i] = z
	}
	m.Zones = zones
	return m
}

// capSlack caps the slack a plan counts at twice the remaining work (and
// at least a day): a run with weeks to spare decides as one with a day
// would, and the plan stays small.
func capSlack(s *State) {
	if limit := max(2*s.Remaining, 24*time.Hour); s.TimeLeft-s.Remaining > limit {
		s.TimeLeft = s.Remaining + limit
	}
}

// BackToSpot answers, for a deadline run holding on-demand on a cloud
// whose spot stock shows only when one tries to launch (EC2, the local
// cloud: no market clock), whether to try spot again now, and in which
// zone. Every zone of m is taken as in stock, since a try is what tells,
// and the answer is refuel's for the run's own slack and what was seen
// of the zones (their History; with none, its priors). A try that finds
// no stock costs nothing but the try: the run keeps its on-demand
// instance until the spot one is up. The slack is capped as capSlack says.
func BackToSpot(s State, m Market) (Choice, bool) { return new(Decider).BackToSpot(s, m) }

// BackToSpot is the package's BackToSpot, with d's outlooks.
func (d *Decider) BackToSpot(s State, m Market) (Choice, bool) {
	if s.Current.Market != capacity.OnDemand || s.Remaining <= 0 || len(m.Zones) == 0 {
		return None, false
	}
	capSlack(&s)
	c := d.refuel(s, withStock(m, true))
	return c, c.Market == capacity.Spot
}

// TrySpot is BackToSpot as the worker's plans answer it: refuel's choice
// between staying on on-demand and spot in each zone, holding nothing
// left out, since a run that takes every zone as in stock has no stock
// to wait for. With ample slack, holding nothing costs the plan what
// spot now does (a step of slack is worth nothing then), and
// BackToSpot, which weighs it too, reads that tie as staying; runs that
// decide in workflow code (recorded before the plans decided) keep
// asking BackToSpot.
func (d *Decider) TrySpot(s State, m Market) (Choice, bool) {
	if s.Current.Market != capacity.OnDemand || s.Remaining <= 0 || len(m.Zones) == 0 {
		return None, false
	}
	capSlack(&s)
	c := d.refuelAmong(s, withStock(m, true), false)
	return c, c.Market == capacity.Spot
}
