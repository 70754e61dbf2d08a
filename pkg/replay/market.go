// Package replay is the trace-driven simulation model that docs/contracts.md
// fixes for `starter sim` and policy tests: time advances in ticks of the
// traces' gap; point i > 0 means spot can be had during tick i; at each tick
// boundary the run holds nothing, spot (only if in stock) or on-demand;
// spot held into a tick whose point is 0 is preempted at its start; every
// start of an instance costs the restart overhead; progress survives
// preemptions; cost is the time held on each market times its price, the
// last tick counted only until the work is done.
//
// A job of several nodes (Job.Nodes) is a gang: it holds that many
// instances at once in one zone and market, so spot is in stock for it only
// when the point holds them all (trace.GangInStock), a drop below that
// while it holds spot preempts the whole gang, and every node is billed.
// An elastic gang (Job.MinNodes) may hold spot on fewer of its nodes, at
// that share of its rate of work: see docs/simulation.md.
package replay

import (
	"time"

	"refuel/pkg/trace"
)

// Market is the spot stock of the zones a run may use, tick by tick. Each
// trace is one zone; all share one gap, and the market is as long as the
// shortest trace. It keeps the traces' counts: what is in stock depends on
// the nodes a run needs at once.
type Market struct {
	Gap     time.Duration
	Zones   []string
	ticks   int
	points  [][]int // [zone][tick]
	oneNode []bool  // per zone: a one-node trace, for every node alike
}

// NewMarket aligns traces into one market. A zone is named by its trace's
// zone, or by the whole trace name when two traces share a zone.
func NewMarket(traces []*trace.Trace) (*Market, error) {
	if len(traces) == 0 {
		return nil, &MarketError{Problem: "no trace given", Fix: "give at least one trace"}
	}
	m := &Market{Gap: traces[0].Gap, ticks: traces[0].Len()}
	zoneCount := map[string]int{}
	for _, t := range traces {
		zoneCount[t.Zone]++
	}
	seen := map[string]string{}
	for _, t := range traces {
		if t.Gap != m.Gap {
			return nil, &MarketError{
				Problem: "traces " + traces[0].File + " and " + t.File + " have different gaps (" + m.Gap.String() + ", " + t.Gap.String() + ")",
				Fix:     "replay together only traces sampled at the same interval",
			}
		}
		name := t.Zone
		if zoneCount[t.Zone] > 1 {
			name = t.Name
		}
		if prev, ok := seen[name]; ok {
			return nil, &MarketError{Problem: "traces " + prev + " and " + t.File + " are both zone " + name, Fix: "give each trace once"}
		}
		seen[name] = t.File
		m.Zones = append(m.Zones, name)
		m.ticks = min(m.ticks, t.Len())
		m.points = append(m.points, t.Points)
		m.oneNode = append(m.oneNode, t.OneNode())
	}
	return m, nil
}

// Ticks is the number of ticks every zone's trace covers.
func (m *Market) Ticks() int { return m.ticks }

// Available reports whether spot for a gang of nodes instances can be had
// in zone z during tick i; never past the end of the market, where nothing
// is known.
func (m *Market) Available(z, i, nodes int) bool {
	return i >= 0 && i < m.ticks && trace.GangInStock(m.points[z][i], nodes, m.oneNode[z])
}

// Count is how many of a gang of nodes spot has in stock in zone z during
// tick i, at most nodes: a one-node trace's point stands for every node
// alike. Past the end of the market it is 0.
func (m *Market) Count(z, i, nodes int) int {
	if i < 0 || i >= m.ticks {
		return 0
	}
	p := m.points[z][i]
	if m.oneNode[z] && p > 0 {
		return nodes
	}
	return max(0, min(p, nodes))
}

// ticksIn is the number of ticks needed to cover d.
func (m *Market) ticksIn(d time.Duration) int {
	return int((d + m.Gap - 1) / m.Gap)
}

// LastStart is the last start tick whose deadline still falls within the
// market, or an error when the market is shorter than the deadline.
func (m *Market) LastStart(deadline time.Duration) (int, error) {
	last := m.ticks - m.ticksIn(deadline)
	if last < 0 {
		return 0, &MarketError{
			Problem: "the traces cover " + m.span().String() + ", less than the deadline " + deadline.String(),
			Fix:     "use longer traces or a shorter deadline",
		}
	}
	return last, nil
}

// Starts spreads n start ticks evenly from 0 to LastStart.
func (m *Market) Starts(n int, deadline time.Duration) ([]int, error) {
	if n < 1 {
		return nil, &MarketError{Problem: "asked for no start", Fix: "ask for 1 or more starts"}
	}
	last, err := m.LastStart(deadline)
	if err != nil {
		return nil, err
	}
	if n == 1 {
		return []int{0}, nil
	}
	out := make([]int, n)
	for k := range out {
		out[k] = k * last / (n - 1)
	}
	return out, nil
}

func (m *Market) span() time.Duration { return time.Duration(m.ticks) * m.Gap }

// MarketError says why traces cannot be replayed as asked.
type MarketError struct {
	Problem string
	Fix     string
}

func (e *MarketError) Error() string { return e.Problem + "; " + e.Fix }
