package marketmem

import (
	"fmt"
	"slices"
	"time"

	"refuel/pkg/policy"
)

// View is a deployment's memory as all its writers' shards make it.
type View struct {
	// Stock is, per spot offering key, what was seen of its stock.
	Stock map[string]StockLog `json:"stock"`
	// Pools is, per pool key, its checkpoint log.
	Pools map[string]policy.CheckpointLog `json:"pools"`
	// Imported are the files of an older refuel already folded in.
	Imported []string `json:"imported,omitempty"`
}

// StockLog is one spot offering's log.
type StockLog struct {
	policy.Availability
	// NoneSince is when tries began finding no stock, while they still
	// do; zero otherwise.
	NoneSince time.Time `json:"none_since,omitzero"`
}

// Merge is the view the shards make together. It is a sum, the same in
// whatever order the shards come; a shard some other one absorbed is
// skipped, and an observation recorded by several writers counts once.
func Merge(shards []Shard) View {
	absorbed := map[string]bool{}
	for _, s := range shards {
		for _, a := range s.Absorbed {
			absorbed[a] = true
		}
	}
	var sum Shard
	lastFound := map[string]time.Time{}
	var opens []struct {
		key   string
		since time.Time
	}
	recent := map[string]Observation{}
	for _, s := range shards {
		if absorbed[s.Writer] {
			continue
		}
		for k, p := range s.Stock {
			q := sum.Stock[k]
			q.In, q.Out = q.In.Plus(p.In), q.Out.Plus(p.Out)
			sum.setStock(k, q)
			lastFound[k] = later(lastFound[k], p.LastFound)
			if !p.NoneSince.IsZero() {
				opens = append(opens, struct {
					key   string
					since time.Time
				}{k, p.NoneSince})
			}
		}
		for k, l := range s.Pools {
			sum.fold(Observation{Key: k, Log: &l})
		}
		for _, o := range s.Recent {
			if r, ok := recent[o.ID]; !ok || o.before(r) {
				recent[o.ID] = o
			}
		}
		sum.Imported = union(sum.Imported, s.Imported)
	}
	for _, o := range recent {
		sum.fold(o)
	}
	v := View{Stock: map[string]StockLog{}, Pools: sum.Pools, Imported: sum.Imported}
	if v.Pools == nil {
		v.Pools = map[string]policy.CheckpointLog{}
	}
	for k, p := range sum.Stock {
		a := policy.Availability{In: p.In, Out: p.Out, FitIn: p.In, FitOut: p.Out}
		v.Stock[k] = StockLog{Availability: a}
	}
	// An outage is open from the earliest try that found none after the
	// latest that found some, whichever writers tried.
	for _, o := range opens {
		if !o.since.After(lastFound[o.key]) {
			continue
		}
		l := v.Stock[o.key]
		if l.NoneSince.IsZero() || o.since.Before(l.NoneSince) {
			l.NoneSince = o.since
		}
		v.Stock[o.key] = l
	}
	return v
}

// before orders two records of one observation: the shorter stretch
// first (two writers ending one outage: the first to see it end saw its
// length), then by content, so every reader picks the same.
func (o Observation) before(r Observation) bool {
	if o.Stretch != nil && r.Stretch != nil && o.Stretch.D != r.Stretch.D {
		return o.Stretch.D < r.Stretch.D
	}
	return o.order() < r.order()
}

// order is the observation as text that orders the records of one.
func (o Observation) order() string {
	var st Stretch
	var l policy.CheckpointLog
	if o.Stretch != nil {
		st = *o.Stretch
	}
	if o.Log != nil {
		l = *o.Log
	}
	return fmt.Sprintf("%+v %+v", st, l)
}

// History is what was seen of each offering's stock, in order, as a
// policy.Zone's History at now: an offering whose tries find none is out
// of stock since the first of them.
func (v View) History(keys []string, now time.Time) []policy.Availability {
	out := make([]policy.Availability, len(keys))
	for i, k := range keys {
		s, ok := v.Stock[k]
		if !ok {
			continue
		}
		out[i] = s.Availability
		if !s.NoneSince.IsZero() {
			out[i].Last, out[i].Since = false, max(now.Sub(s.NoneSince), time.Nanosecond)
		}
	}
	return out
}

// imported reports whether the file with sha256 sum was folded in.
func (v View) imported(sum string) bool { return slices.Contains(v.Imported, sum) }
