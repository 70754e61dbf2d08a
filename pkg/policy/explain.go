package policy

import (
	"fmt"
	"math"
	"strings"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

// Explain says in one line a person reads why Decide chose c for a run of
// the tier under the named policy, from the same state and market, such as
// "on-demand: 3.1 h slack left, spot in us-west-2b expected back in 4 h".
// It is pure and deterministic like Decide, so a workflow may call it
// beside Decide and keep the line in its status.
func Explain(tier spec.Tier, name Name, s State, m Market, c Choice) string {
	switch {
	case s.Remaining <= 0:
		return "nothing: the work is done"
	case tier == spec.TierCritical:
		return "on-demand: critical runs use stable capacity only"
	case tier == spec.TierFlexible && !c.Holds():
		return "paused: no spot in stock" + backIn(m, ", ")
	case tier == spec.TierFlexible:
		return spotLine(m, c, "flexible runs use spot only")
	}
	slack := fmt.Sprintf("%s slack left", hours(s.slack()))
	switch {
	case c.Market == capacity.Spot && name == Refuel && movedFrom(s, m, c):
		i := m.zone(c.Zone)
		ovh := s.RestartOverhead
		if m.moves(m.Zones[i]) {
			ovh += m.Move.Time
		}
		return fmt.Sprintf("spot in %s: %s, cheaper per hour of work than spot held in %s, its lifetime predicted at %s%s",
			c.Zone, slack, s.Current.Zone, hours(movedLifetime(s, m.Zones[i], ovh)), basis(m.Zones[i]))
	case c.Market == capacity.Spot:
		return spotLine(m, c, slack)
	case !c.Holds():
		return "waiting for spot: " + slack + backIn(m, ", ")
	case name == OnDemandOnly:
		return "on-demand: policy ondemand"
	case s.slack() < s.RestartOverhead+m.Step || !anyInStock(m) && !safe(s, m, None):
		return "on-demand: " + slack + ", too little to risk spot" + backIn(m, "; ")
	case !anyInStock(m):
		return "on-demand: " + slack + backIn(m, ", ")
	case name == Greedy:
		return "on-demand: " + slack + ", greedy keeps on-demand once it took it"
	case name == SkyNomad:
		return "on-demand: " + slack + ", progress worth more than spot's lifetimes here return"
	case name == UniformProgress:
		return "on-demand: " + slack + ", behind the pace the deadline sets"
	case s.Current.Market == capacity.OnDemand:
		return "on-demand: " + slack + ", a move to " + longLived(m) + " would not repay its start"
	}
	return "on-demand: " + slack + ", " + longLived(m) + ", too soon gone to repay a start"
}

// ExplainWaitForSpot says why WaitForSpot answered wait for s and m.
func ExplainWaitForSpot(s State, m Market, wait bool) string {
	s.Current, s.OverheadLeft = None, 0
	out := withStock(m, false)
	slack := fmt.Sprintf("%s slack left", hours(s.slack()))
	switch {
	case s.Remaining <= 0:
		return "nothing to wait for: the work is done"
	case len(m.Zones) == 0:
		return "on-demand: no spot offering to wait for"
	case wait:
		return "waiting for spot: " + slack + backIn(out, ", ")
	}
	return "on-demand: " + slack + ", too little to wait for spot" + backIn(out, "; ")
}

// ExplainBackToSpot says why BackToSpot answered c and ok for s and m.
func ExplainBackToSpot(s State, m Market, c Choice, ok bool) string {
	in := withStock(m, true)
	slack := fmt.Sprintf("%s slack left", hours(s.slack()))
	switch {
	case s.Current.Market != capacity.OnDemand:
		return "not on on-demand: nothing to move back"
	case s.Remaining <= 0:
		return "staying: the work is done"
	case len(m.Zones) == 0:
		return "staying on on-demand: no spot offering"
	case ok:
		return "trying spot in " + c.Zone + ": " + slack + lasts(in, in.zone(c.Zone), ", ")
	case s.slack() < 2*s.RestartOverhead:
		return "staying on on-demand: " + slack + ", too little for a changeover and a preemption"
	}
	return "staying on on-demand: " + slack + ", a move to " + longLived(in) + " would not repay its changeover"
}

// movedFrom reports whether c leaves spot still in stock for spot in
// another zone (see cheaperToMove).
func movedFrom(s State, m Market, c Choice) bool {
	i := m.zone(s.Current.Zone)
	return s.Current.Market == capacity.Spot && c.Zone != s.Current.Zone && i >= 0 && m.Zones[i].SpotAvailable
}

// spotLine is the line for holding spot in c's zone.
func spotLine(m Market, c Choice, why string) string {
	return "spot in " + c.Zone + ": " + why + lasts(m, m.zone(c.Zone), ", ")
}

// lasts says how long zone i's stock is expected to last, or nothing
// for an unknown zone.
func lasts(m Market, i int, sep string) string {
	if i < 0 {
		return ""
	}
	z := m.Zones[i]
	return sep + "its stock expected to last " + hours(expectedLeft(z, true)) + basis(z)
}

// basis names what a zone's expectation was drawn from: the stretches of
// its stock runs saw, and the cloud's placement score where it gave one.
func basis(z Zone) string {
	a := z.History
	n := a.In.Count + a.Out.Count
	seen := n > 0 || a.Since > 0
	score := a.PlacementScore
	switch {
	case seen && score > 0:
		return fmt.Sprintf(" (%d stretches seen over %s, EC2 placement score %d/10)", n, hours(a.In.Total+a.Out.Total+a.Since), score)
	case seen:
		return fmt.Sprintf(" (%d stretches seen over %s)", n, hours(a.In.Total+a.Out.Total+a.Since))
	case score > 0:
		return fmt.Sprintf(" (EC2 placement score %d/10; nothing seen of it yet)", score)
	}
	return " (refuel's prior: nothing seen of it yet)"
}

// longLived names the zone in stock whose stock is expected to last
// longest, and for how long: "spot in us-west-2b (expected to last 40 min)".
func longLived(m Market) string {
	best, left := -1, time.Duration(0)
	for i, z := range m.Zones {
		if d := expectedLeft(z, true); z.SpotAvailable && (best < 0 || d > left) {
			best, left = i, d
		}
	}
	if best < 0 {
		return "spot"
	}
	return fmt.Sprintf("spot in %s (expected to last %s%s)", m.Zones[best].Name, hours(left), strings.TrimSuffix(strings.Replace(basis(m.Zones[best]), " (", "; ", 1), ")"))
}

// backIn says when spot is expected back in the zone where it is
// expected soonest, after sep; nothing when no zone is out of stock.
func backIn(m Market, sep string) string {
	best, left := -1, time.Duration(0)
	for i, z := range m.Zones {
		if d := expectedLeft(z, false); !z.SpotAvailable && (best < 0 || d < left) {
			best, left = i, d
		}
	}
	if best < 0 {
		return ""
	}
	return fmt.Sprintf("%sspot in %s expected back in %s%s", sep, m.Zones[best].Name, hours(left), basis(m.Zones[best]))
}

func anyInStock(m Market) bool {
	for _, z := range m.Zones {
		if z.SpotAvailable {
			return true
		}
	}
	return false
}

// expectedLeft is how much longer the zone's current stretch in stock
// (in) or out of it is expected to last, by its fitted model and the
// stretch's age.
func expectedLeft(z Zone, in bool) time.Duration {
	age := time.Duration(0)
	if z.History.Last == in {
		age = z.History.Since
	}
	k := 0
	if in {
		k = 1
	}
	return fitStock(z.History).expectedLeft(k, age)
}

// expectedLeft is the mean remaining length of a stretch of kind in aged
// age: the integral of its survival from age on, hazards being constant
// within each age bucket.
func (m stockModel) expectedLeft(in int, age time.Duration) time.Duration {
	var left, survive float64 = 0, 1
	for b := bucketOf(age); b < ageBuckets; b++ {
		rate := math.Pow(hazardStep, float64(m.end[in][b])) // per hour
		if b == ageBuckets-1 {
			left += survive / rate
			break
		}
		span := (bucketStart(b+1) - max(age, bucketStart(b))).Hours()
		left += survive * (1 - math.Exp(-rate*span)) / rate
		survive *= math.Exp(-rate * span)
	}
	return time.Duration(left * float64(time.Hour))
}

// hours writes a duration as a person reads it: "40 min", "3.1 h".
func hours(d time.Duration) string {
	switch {
	case d < 0:
		return "no"
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(math.Round(d.Minutes())))
	case d < 10*time.Hour:
		return fmt.Sprintf("%.1f h", d.Hours())
	}
	return fmt.Sprintf("%.0f h", d.Hours())
}
