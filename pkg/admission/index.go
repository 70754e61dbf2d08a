package admission

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

// index is what decisions look up, so that a schedule pass over
// thousands of requests stays near O(n log n): positions of machines and
// pools by name and each shape of request once with where it may go
// (until the pools file changes), and who holds what (built on first
// use after any change of the state; MarkYielding keeps it up to date).
type index struct {
	nodeAt map[string]int
	poolAt map[string]int
	poolOf map[offeringKey]int
	shapes map[string]*shape
	rules  Rules

	held *holdings
}

// holdings are who holds what, in config order.
type holdings struct {
	// Capacity as Victims and Moves count it, allocations being
	// preempted counted as free already: GPUs free per machine and
	// instances held per pool.
	freeY []int
	heldY []int
	// Positions in Running on each machine and in each pool, in the
	// order Victims takes them.
	onNode [][]int
	inPool [][]int

	memo victimsMemo
}

// offeringKey is capacity.Offering.Key without formatting a string.
type offeringKey struct {
	provider, instanceType, zone string
	market                       capacity.Market
}

func keyOf(o capacity.Offering) offeringKey {
	return offeringKey{o.Provider, o.InstanceType, o.Zone, o.Market}
}

// changed drops who holds what.
func (s *State) changed() {
	if s.ix != nil {
		s.ix.held = nil
	}
}

func (s *State) index() *index {
	if s.ix != nil && s.ix.rules == s.Rules {
		return s.ix
	}
	ix := &index{
		nodeAt: make(map[string]int, len(s.Nodes)),
		poolAt: make(map[string]int, len(s.Config.Burst)),
		poolOf: map[offeringKey]int{},
		shapes: map[string]*shape{},
		rules:  s.Rules,
	}
	for i, n := range s.Nodes {
		ix.nodeAt[n.Name] = i
	}
	for i, p := range s.Config.Burst {
		ix.poolAt[p.Name] = i
		for _, o := range p.Offerings {
			if _, ok := ix.poolOf[keyOf(o)]; !ok {
				ix.poolOf[keyOf(o)] = i
			}
		}
	}
	s.ix = ix
	return ix
}

func (s *State) holdings() *holdings {
	ix := s.index()
	if ix.held != nil {
		return ix.held
	}
	h := &holdings{
		freeY:  make([]int, len(s.Nodes)),
		heldY:  make([]int, len(s.Config.Burst)),
		onNode: make([][]int, len(s.Nodes)),
		inPool: make([][]int, len(s.Config.Burst)),
	}
	for i, n := range s.Nodes {
		h.freeY[i] = n.GPUs
	}
	for pos := range s.Running {
		a := &s.Running[pos]
		for _, m := range a.machines() {
			if i, ok := ix.nodeAt[m]; ok {
				h.onNode[i] = append(h.onNode[i], pos)
				if !a.Yielding {
					h.freeY[i] -= a.GPUs()
				}
			}
		}
		if p, ok := ix.poolAt[a.Pool]; ok && a.Layer == BurstLayer {
			h.inPool[p] = append(h.inPool[p], pos)
			if !a.Yielding {
				h.heldY[p] += a.NodeCount()
			}
		}
	}
	byVictimOrder := func(x, y int) int { return victimOrder(&s.Running[x], &s.Running[y]) }
	for _, l := range h.onNode {
		slices.SortFunc(l, byVictimOrder)
	}
	for _, l := range h.inPool {
		slices.SortFunc(l, byVictimOrder)
	}
	ix.held = h
	return h
}

// victimOrder is the order preemption takes allocations in: lowest
// priority first, then largest first (fewer runs disturbed), then the
// most recently admitted (least progress since admission at stake).
func victimOrder(a, b *Allocation) int {
	return cmp.Or(
		cmp.Compare(a.Request.Priority, b.Request.Priority),
		cmp.Compare(b.GPUs(), a.GPUs()),
		b.AdmittedAt.Compare(a.AdmittedAt),
		cmp.Compare(a.Request.ID, b.Request.ID),
	)
}

// shape is what placing a request depends on, shared by every request
// that asks for the same: its tier, its resources and its node count.
type shape struct {
	gpus     int  // per node, at least 1
	nodes    int  // under the state's rules
	oneZone  bool // a gang's nodes in one zone
	suits    []int
	zones    [][]int // suits split by zone for a one-zone gang; one group otherwise
	matched  [][]capacity.Offering
	tier     spec.Tier
	canPlace bool // some base zone or burst pool could hold it when empty
}

func (s *State) shapeOf(r Request) *shape {
	ix := s.index()
	key := shapeKey(r, s.nodesOf(r))
	if sh, ok := ix.shapes[key]; ok {
		return sh
	}
	sh := &shape{gpus: max(r.Resources.GPUs, 1), nodes: s.nodesOf(r), oneZone: r.Resources.OneZone(), tier: r.Tier}
	zoneAt := map[string]int{}
	for i, n := range s.Nodes {
		if len(capacity.Match([]capacity.Offering{n.Offering(s.Config.Base.Provider)}, r.Resources)) == 0 {
			continue
		}
		sh.suits = append(sh.suits, i)
		z := 0
		if sh.oneZone && sh.nodes > 1 {
			var ok bool
			if z, ok = zoneAt[n.Zone]; !ok {
				z = len(sh.zones)
				zoneAt[n.Zone] = z
			}
		}
		if z == len(sh.zones) {
			sh.zones = append(sh.zones, nil)
		}
		sh.zones[z] = append(sh.zones[z], i)
	}
	for _, g := range sh.zones {
		sh.canPlace = sh.canPlace || len(g) >= sh.nodes
	}
	sh.matched = make([][]capacity.Offering, len(s.Config.Burst))
	for i, p := range s.Config.Burst {
		sh.matched[i] = capacity.Match(p.Offerings, r.Resources)
		sh.canPlace = sh.canPlace || (len(capacity.Order(sh.matched[i], r.Tier, "")) > 0 && (p.MaxInstances == 0 || p.MaxInstances >= sh.nodes))
	}
	ix.shapes[key] = sh
	return sh
}

// shapeKey says everything placement reads of a request.
func shapeKey(r Request, nodes int) string {
	res := r.Resources
	var b strings.Builder
	b.WriteString(string(r.Tier))
	for _, n := range []int{res.GPUs, nodes} {
		b.WriteByte(0)
		b.WriteString(strconv.Itoa(n))
	}
	b.WriteByte(0)
	b.WriteString(strconv.FormatBool(res.OneZone()))
	for _, l := range [][]string{res.InstanceTypes, res.Zones, res.Providers} {
		b.WriteByte(0)
		b.WriteString(strings.Join(l, "\x01"))
	}
	b.WriteByte(0)
	b.WriteString(strconv.FormatFloat(res.MaxPricePerHour, 'g', -1, 64))
	return b.String()
}

// available are the offerings of burst pool p the shape may use, in
// the pool's order, but for those out of stock; nil when its tier may
// use none.
func (sh *shape) available(p int, un unavailable) []capacity.Offering {
	if len(un) == 0 {
		return sh.matched[p]
	}
	var out []capacity.Offering
	for _, o := range sh.matched[p] {
		if !un[keyOf(o)] {
			out = append(out, o)
		}
	}
	return out
}

// fitsPool reports whether the shape has an offering in pool p its tier
// may use.
func (sh *shape) fitsPool(p int, un unavailable) bool {
	return len(capacity.Order(sh.available(p, un), sh.tier, "")) > 0
}

// unavailable is a set of offering keys just out of stock.
type unavailable map[offeringKey]bool

func newUnavailable(keys []string) unavailable {
	if len(keys) == 0 {
		return nil
	}
	un := unavailable{}
	for _, k := range keys {
		if f := strings.Split(k, "/"); len(f) == 4 {
			un[offeringKey{f[0], f[1], f[2], capacity.Market(f[3])}] = true
		}
	}
	return un
}

// victimsMemo remembers, per shape, the highest priority for which
// Victims found nothing to preempt: with the state unchanged, a demand
// of that shape and no higher priority finds nothing either, so a pass
// over a long queue computes each shape once. MarkYielding forgets it.
type victimsMemo struct {
	now         time.Time
	unavailable string
	none        map[*shape]noVictims
}

type noVictims struct {
	priority int
	ok       bool
}

func (m *victimsMemo) lookup(sh *shape, priority int, now time.Time, un []string) (ok, hit bool) {
	if m.none == nil || !m.now.Equal(now) || m.unavailable != strings.Join(un, " ") {
		m.now, m.unavailable, m.none = now, strings.Join(un, " "), map[*shape]noVictims{}
	}
	n, known := m.none[sh]
	if known && priority <= n.priority {
		return n.ok, true
	}
	return false, false
}

func (m *victimsMemo) store(sh *shape, priority int, ok bool) {
	if n, known := m.none[sh]; !known || priority > n.priority {
		m.none[sh] = noVictims{priority, ok}
	}
}
