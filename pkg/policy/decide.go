package policy

import (
	"fmt"
	"strings"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

// Name names a market policy for deadline runs.
type Name string

const (
	// OnDemandOnly holds on-demand throughout: the cost baseline.
	OnDemandOnly Name = "ondemand"
	// Greedy holds spot whenever it is in stock, waits while it is not, and
	// moves to on-demand for good only when waiting longer would miss the
	// deadline.
	Greedy Name = "greedy"
	// UniformProgress is the policy of "Can't Be Late" (Wu et al., NSDI
	// 2024): keep progress on the line from start to deadline, on-demand
	// with hysteresis when behind it, spot whenever in stock, and a safety
	// net of two restart overheads of slack.
	UniformProgress Name = "uniform-progress"
	// Refuel is ours: it spends the slack on the outages the zone's
	// history says are short, holds on-demand through the ones it says are
	// long, keeps a reserve for the preemptions still to come, and moves
	// to the zone whose stock lasts longest.
	Refuel Name = "refuel"
	// SkyNomad is the policy of SkyNomad (Li et al., arXiv 2601.06520,
	// 2026), a peer written from its paper: every option priced in one
	// monetary utility, the value of progress the deadline sets against
	// each zone's price, predicted spot lifetime and the move there.
	SkyNomad Name = "skynomad"
	// Optimal is the omniscient offline optimum. It needs the whole future
	// of the market, so only the replay simulator can compute it (see
	// replay.Optimal); Decide refuses it.
	Optimal Name = "optimal"
)

// Names lists every policy, in the order reports show them.
var Names = []Name{OnDemandOnly, Greedy, UniformProgress, SkyNomad, Refuel, Optimal}

// ParseName reads a policy name, case-insensitively.
func ParseName(s string) (Name, error) {
	n := Name(strings.ToLower(strings.TrimSpace(s)))
	for _, v := range Names {
		if v == n {
			return n, nil
		}
	}
	return "", &UnknownPolicyError{Name: s}
}

// Online reports whether a policy decides from the past alone and so can
// run in a workflow.
func (n Name) Online() bool { return n != Optimal }

// Peer reports whether a policy is another system's, replayed in the
// simulator to compare refuel with: runs do not name it (spec.MarketPolicies).
func (n Name) Peer() bool { return n == SkyNomad }

// UnknownPolicyError is returned for a policy name refuel does not have.
type UnknownPolicyError struct{ Name string }

func (e *UnknownPolicyError) Error() string {
	list := make([]string, len(Names))
	for i, n := range Names {
		list[i] = string(n)
	}
	return fmt.Sprintf("unknown policy %q; use one of %s", e.Name, strings.Join(list, ", "))
}

// OfflineError is returned by Decide for a policy that needs the future.
type OfflineError struct{ Name Name }

func (e *OfflineError) Error() string {
	return fmt.Sprintf("policy %s needs the whole future of the market and cannot decide online; replay it offline", e.Name)
}

// Decide returns what the run holds for its next step. It is a pure
// function of its arguments. critical runs hold on-demand (base capacity
// is granted before the policy is asked); flexible runs hold spot while
// it is in stock and nothing while it is not; deadline runs follow the
// named policy. A spot choice is always in a zone with SpotAvailable.
func Decide(tier spec.Tier, name Name, s State, m Market) (Choice, error) {
	return new(Decider).Decide(tier, name, s, m)
}

// Decide is the package's Decide, reusing what d remembers.
func (d *Decider) Decide(tier spec.Tier, name Name, s State, m Market) (Choice, error) {
	return d.decide(tier, name, s, m, Gang{})
}

// decide is Decide for gang g, rigid when g is the zero Gang.
func (d *Decider) decide(tier spec.Tier, name Name, s State, m Market, g Gang) (Choice, error) {
	switch tier {
	case spec.TierCritical:
		return m.onDemand(s), nil
	case spec.TierFlexible:
		if name == Refuel {
			return flexible(s, m, g, refuelSpotZone(s, m)), nil
		}
		return flexible(s, m, g, firstSpotZone(s, m)), nil
	case spec.TierDeadline:
	default:
		return None, fmt.Errorf("tier %q has no market policy; use one of critical, deadline, flexible", tier)
	}
	switch name {
	case OnDemandOnly:
		return m.onDemand(s), nil
	case Greedy:
		return greedy(s, m, g), nil
	case UniformProgress:
		return uniformProgress(s, m, g), nil
	case Refuel:
		return d.refuelGang(s, m, g), nil
	case SkyNomad:
		// The paper schedules the whole gang as one unit: an elastic
		// gang decides as a rigid one.
		return skyNomad(s, m), nil
	case Optimal:
		return None, &OfflineError{Name: name}
	}
	return None, &UnknownPolicyError{Name: string(name)}
}

// flexible holds spot in zone i, or nothing when i is -1; an elastic
// gang holds the nodes in stock elsewhere rather than nothing.
func flexible(s State, m Market, g Gang, i int) Choice {
	c, _ := g.spot(s, m, i)
	return c
}

// firstSpotZone is the zone the run is on spot in if still in stock, else
// the zone with stock where spot is cheapest for the work left, the move
// counted (the first such on ties; on a market not priced, the first),
// else -1.
func firstSpotZone(s State, m Market) int {
	if i := m.zone(s.Current.Zone); i >= 0 && s.Current.Market == capacity.Spot && m.Zones[i].SpotAvailable {
		return i
	}
	best := -1
	for i, z := range m.Zones {
		if z.SpotAvailable && (best < 0 || m.priced() && m.startPrice(z, false, s) < m.startPrice(m.Zones[best], false, s)) {
			best = i
		}
	}
	return best
}
