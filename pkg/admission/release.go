package admission

import (
	"cmp"
	"slices"

	"refuel/pkg/capacity"
)

// ReleaseOrder returns allocations in the order to give them back when
// scaling in: burst before base, which is kept to the last because it is
// already paid for. Within burst, the most expensive goes first, since
// scaling in is for not paying; at equal price spot goes before
// on-demand, since an instance that can vanish on two minutes' notice is
// worth less to keep than a stable one at the same price. Within equals,
// the most recently admitted goes first (it has the least warm state),
// then by id.
func ReleaseOrder(allocs []Allocation) []Allocation {
	out := slices.Clone(allocs)
	slices.SortStableFunc(out, func(a, b Allocation) int {
		return cmp.Or(
			boolCompare(a.Layer == BaseLayer, b.Layer == BaseLayer),
			cmp.Compare(price(b), price(a)),
			boolCompare(market(a) != capacity.Spot, market(b) != capacity.Spot),
			b.AdmittedAt.Compare(a.AdmittedAt),
			cmp.Compare(a.Request.ID, b.Request.ID),
		)
	})
	return out
}

// price and market are those of the offering held, or of the first
// choice while nothing is bound yet.
func price(a Allocation) float64 {
	if len(a.Offerings) == 0 {
		return 0
	}
	return a.Offerings[0].PricePerHour * float64(a.NodeCount())
}

func market(a Allocation) capacity.Market {
	if len(a.Offerings) == 0 {
		return ""
	}
	return a.Offerings[0].Market
}
