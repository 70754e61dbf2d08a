package estimate

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"refuel/pkg/policy"
	"refuel/pkg/replay"
	"refuel/pkg/trace"
)

// The markets an estimate replays: each pool's trace and its memory, the
// windows cut from them, and the basis the report names.

// markets are the windows of the ask's market: each pool's stock, drawn
// from its memory or read from its built-in trace, at one tick.
type markets struct {
	plans   *policy.Plans
	roaming *policy.Availability // the stock across the pools, with several
	gap     time.Duration
	warm    int // ticks watched before the start
	pools   []source
	memory  []*policy.Availability // per pool, what the policy plans with beside what it watched
	scores  []int
	seed    uint64
	basis   string
}

// source is where one pool's stock comes from.
type source struct {
	name    string // the replay's zone: the offering without its market
	model   *stockModel
	current *Stretch
	trace   *trace.Trace
	// offsets are, per window, where it starts in the trace, spread over
	// it (windows run on past its end from its start).
	offsets []time.Duration
}

func newMarkets(a Ask) *markets {
	m := &markets{seed: a.Seed, plans: policy.NewPlans(planBytes)}
	var b basis
	for _, p := range a.Pools {
		s := source{name: strings.TrimSuffix(p.key(""), "/")}
		var mem *policy.Availability
		seen := memorySpan(p.Memory)
		switch {
		case !p.Spot:
		case seen >= a.MinMemory:
			model := modelOf(*p.Memory, p.PlacementScore, shrink)
			s.model, s.current, mem = &model, p.Current, p.Memory
			b.watched += seen
			b.add("market memory", p)
			m.gap = max(m.gap, a.Tick)
		default:
			s.trace, mem = p.Builtin, watchAll(p.Builtin)
			m.gap = max(m.gap, p.Builtin.Gap)
			why := "no history"
			if seen > 0 {
				why = fmt.Sprintf("%.0f hours of history", seen.Hours())
			}
			head := "built-in market " + p.BuiltinMarket + ", " + why
			if p.StandIn != "" {
				head = "built-in market " + p.BuiltinMarket + " (" + p.StandIn + " standing in), " + why
			}
			b.add(head, p)
		}
		if p.PlacementScore > 0 {
			b.scores = append(b.scores, fmt.Sprintf("%s %d", p.Zone, p.PlacementScore))
		}
		m.pools = append(m.pools, s)
		m.memory = append(m.memory, mem)
		m.scores = append(m.scores, p.PlacementScore)
	}
	if m.gap == 0 {
		m.gap = a.Tick // no pool sells spot
	}
	m.warm = m.ticks(warmup)
	var longest time.Duration
	for _, c := range a.cases() {
		longest = max(longest, c.horizon)
	}
	span := time.Duration(m.warm+m.ticks(longest)) * m.gap
	for i := range m.pools {
		if t := m.pools[i].trace; t != nil {
			m.pools[i].offsets = offsets(t.Span(), span, a.Windows)
		}
	}
	if len(m.pools) > 1 {
		m.roaming = m.roamingMemory()
	}
	m.basis = b.String(a.Windows)
	return m
}

// basis says what market an estimate replayed: the memory and for how
// long it watched, the built-in market and why, the placement scores.
type basis struct {
	watched time.Duration
	groups  []basisGroup
	scores  []string
}

// basisGroup is the pools read from one source, by instance type.
type basisGroup struct {
	head  string
	types []string
	zones map[string][]string
}

func (b *basis) add(head string, p Pool) {
	i := slices.IndexFunc(b.groups, func(g basisGroup) bool { return g.head == head })
	if i < 0 {
		b.groups = append(b.groups, basisGroup{head: head, zones: map[string][]string{}})
		i = len(b.groups) - 1
	}
	g := &b.groups[i]
	if g.zones[p.InstanceType] == nil {
		g.types = append(g.types, p.InstanceType)
	}
	g.zones[p.InstanceType] = append(g.zones[p.InstanceType], p.Zone)
}

// pools names a group's pools: "p3.2xlarge in us-west-2a, us-west-2b",
// the types together where they share their zones.
func (g basisGroup) pools() string {
	same := true
	for _, t := range g.types[1:] {
		same = same && slices.Equal(g.zones[t], g.zones[g.types[0]])
	}
	if same {
		return strings.Join(g.types, ", ") + " in " + strings.Join(g.zones[g.types[0]], ", ")
	}
	var parts []string
	for _, t := range g.types {
		parts = append(parts, t+" in "+strings.Join(g.zones[t], ", "))
	}
	return strings.Join(parts, "; ")
}

func (b basis) String(windows int) string {
	var parts []string
	for _, g := range b.groups {
		head := g.head
		if head == "market memory" {
			head = fmt.Sprintf("%.1f days of market memory", b.watched.Hours()/24)
			if b.watched < 48*time.Hour {
				head = fmt.Sprintf("%.0f hours of market memory", b.watched.Hours())
			}
		}
		parts = append(parts, head+" for "+g.pools())
	}
	if len(parts) == 0 {
		parts = append(parts, "no offering sells spot: on-demand only")
	}
	if len(b.scores) > 0 {
		parts = append(parts, "placement scores "+strings.Join(b.scores, ", "))
	}
	return strings.Join(parts, "; ") + fmt.Sprintf("; %d windows", windows)
}

// watchAll is what watching the whole of a built-in trace shows of its
// stock: the memory of a deployment that has watched that market, which
// the replayed policy plans with as it would with the deployment's own.
func watchAll(t *trace.Trace) *policy.Availability {
	var a policy.Availability
	for i := range t.Len() {
		a.Observe(t.Available(i), t.Gap)
	}
	a.Observe(!a.Last, t.Gap) // closes the last stretch
	return &policy.Availability{In: a.In, Out: a.Out}
}

// roamingMemory is what a run roaming between the pools (see
// policy.Roaming) sees over a long stretch of their market: at least
// roamingSpan, and every built-in trace whole. Like each pool's own
// memory, the replayed policy plans with it whatever the window.
func (m *markets) roamingMemory() *policy.Availability {
	span := roamingSpan
	for _, s := range m.pools {
		if s.trace != nil {
			span = max(span, s.trace.Span())
		}
	}
	n := m.ticks(span)
	points := make([][]int, len(m.pools))
	for i, s := range m.pools {
		points[i] = m.points(s, i, -1, 0, n)
	}
	var r policy.Roaming
	zones := make([]policy.Zone, len(m.pools))
	for i := range zones {
		zones[i].Name = m.pools[i].name
	}
	for k := range n {
		for i := range zones {
			zones[i].SpotAvailable = points[i][k] > 0
		}
		r.Observe(zones, m.gap)
		for i := range zones {
			zones[i].History.Observe(zones[i].SpotAvailable, m.gap)
		}
	}
	r.Availability.Observe(!r.Last, m.gap) // closes the last stretch
	return &policy.Availability{In: r.In, Out: r.Out}
}

// memorySpan is how long a stock log watched its pool, in and out of
// stock.
func memorySpan(a *policy.Availability) time.Duration {
	if a == nil {
		return 0
	}
	var d time.Duration
	for b := range policy.AgeBuckets {
		d += a.In.Time[b] + a.Out.Time[b]
	}
	return d
}

// offsets spreads n windows of span over a trace of length total: evenly
// from its start to the last start that fits, or, in a trace shorter than
// a window, evenly over the whole of it.
func offsets(total, span time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	room := total - span
	if room <= 0 {
		room = total
	}
	for k := range out {
		if n > 1 {
			out[k] = time.Duration(float64(room) * float64(k) / float64(n-1))
		}
	}
	if total-span <= 0 {
		for k := range out {
			out[k] = time.Duration(float64(total) * float64(k) / float64(n))
		}
	}
	return out
}

// points are n ticks of pool i's stock for window w (-1: the stretch
// the stock across the pools is measured on), from offset in its trace:
// drawn from its memory with a seed of the window and the pool, so every
// case of a window meets the same market, or read from its trace.
func (m *markets) points(s source, i, w int, offset time.Duration, n int) []int {
	switch {
	case s.model != nil:
		rng := rand.New(rand.NewPCG(m.seed, uint64(w+1)<<20|uint64(i)))
		if w < 0 {
			return s.model.path(rng, m.gap, n, 0, nil)
		}
		model := s.model.swayed(m.sway(w), rng.NormFloat64())
		return model.path(rng, m.gap, n, m.warm, s.current)
	case s.trace != nil:
		out := make([]int, n)
		for k := range out {
			at := offset + time.Duration(k)*m.gap
			out[k] = s.trace.Points[int(at/s.trace.Gap)%s.trace.Len()]
		}
		return out
	}
	return make([]int, n)
}

// sway is window w's draw of what sways every pool's market alike (see
// stockModel.swayed).
func (m *markets) sway(w int) float64 {
	return rand.New(rand.NewPCG(m.seed, uint64(w+1)<<20|1<<19)).NormFloat64()
}

// offset is where window w starts in the pool's trace.
func (s source) offset(w int) time.Duration {
	if s.offsets == nil {
		return 0
	}
	return s.offsets[w]
}

// ticks is the number of ticks that cover d.
func (m *markets) ticks(d time.Duration) int { return int((d + m.gap - 1) / m.gap) }

// window is window w's market: the warm-up and then horizon ticks. The
// memory's paths are drawn afresh per window and pool, from a seed of
// both, so every case of a window meets the same market.
func (m *markets) window(w, horizon int) (*replay.Market, error) {
	n := m.warm + horizon
	traces := make([]*trace.Trace, len(m.pools))
	for i, s := range m.pools {
		traces[i] = &trace.Trace{Name: s.name, Zone: s.name, File: s.name, Gap: m.gap, Points: m.points(s, i, w, s.offset(w), n)}
	}
	return replay.NewMarket(traces)
}
