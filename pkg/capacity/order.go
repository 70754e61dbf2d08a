package capacity

import (
	"slices"

	"refuel/pkg/spec"
)

// Match returns the offerings that satisfy the resources: enough GPUs, an
// allowed provider, instance type and zone, and a price within the cap.
func Match(offerings []Offering, r spec.Resources) []Offering {
	var out []Offering
	for _, o := range offerings {
		switch {
		case o.GPUs < r.GPUs:
		case len(r.Providers) > 0 && !slices.Contains(r.Providers, o.Provider):
		case len(r.InstanceTypes) > 0 && !slices.Contains(r.InstanceTypes, o.InstanceType):
		case len(r.Zones) > 0 && !slices.Contains(r.Zones, o.Zone):
		case r.MaxPricePerHour > 0 && o.PricePerHour > r.MaxPricePerHour:
		default:
			out = append(out, o)
		}
	}
	return out
}

// Order puts offerings in the order a run should try them: only markets
// the tier allows, spot before on-demand, cheaper first within a market,
// and offerings in avoidZone (the zone that just preempted the run) last
// within their market. The sort is stable so equal offerings keep the
// provider's order, which keeps workflow decisions deterministic.
func Order(offerings []Offering, tier spec.Tier, avoidZone string) []Offering {
	var out []Offering
	for _, o := range offerings {
		if marketAllowed(o.Market, tier) {
			out = append(out, o)
		}
	}
	slices.SortStableFunc(out, func(a, b Offering) int {
		if d := marketRank(a.Market) - marketRank(b.Market); d != 0 {
			return d
		}
		if avoidZone != "" && (a.Zone == avoidZone) != (b.Zone == avoidZone) {
			if a.Zone == avoidZone {
				return 1
			}
			return -1
		}
		switch {
		case a.PricePerHour < b.PricePerHour:
			return -1
		case a.PricePerHour > b.PricePerHour:
			return 1
		}
		return 0
	})
	return out
}

// OnlyMarket keeps the offerings sold on market m, in order.
func OnlyMarket(offerings []Offering, m Market) []Offering {
	var out []Offering
	for _, o := range offerings {
		if o.Market == m {
			out = append(out, o)
		}
	}
	return out
}

func marketAllowed(m Market, tier spec.Tier) bool {
	switch m {
	case Spot:
		return tier.AllowsSpot()
	case OnDemand:
		return tier.AllowsOnDemand()
	}
	return true // base capacity suits every tier
}

// marketRank orders markets: owned base capacity first (already paid
// for), then spot, then on-demand.
func marketRank(m Market) int {
	switch m {
	case Base:
		return 0
	case Spot:
		return 1
	}
	return 2
}

// Within keeps the offerings of own that are also in granted (matched by
// Key), in own's order; when the two do not meet, granted is what there
// is.
func Within(own, granted []Offering) []Offering {
	var both []Offering
	for _, o := range own {
		if slices.ContainsFunc(granted, func(g Offering) bool { return g.Key() == o.Key() }) {
			both = append(both, o)
		}
	}
	if len(both) == 0 {
		return granted
	}
	return both
}

// First puts o first and keeps the rest of offerings in their order.
func First(offerings []Offering, o Offering) []Offering {
	out := []Offering{o}
	for _, x := range offerings {
		if x != o {
			out = append(out, x)
		}
	}
	return out
}
