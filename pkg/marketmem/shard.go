package marketmem

import (
	"slices"
	"strconv"
	"time"

	"refuel/pkg/policy"
)

// RecentLimit is how many observations a shard keeps whole (see
// Shard.Recent) before folding the oldest into its summaries.
const RecentLimit = 128

// Shard is one writer's part of a deployment's memory. Only that writer
// writes it.
type Shard struct {
	Writer string `json:"writer"`
	// Updated is when the writer last wrote it, by its clock.
	Updated time.Time `json:"updated"`
	// Stock is, per spot offering key, the stock this writer saw.
	Stock map[string]StockPart `json:"stock,omitempty"`
	// Pools is, per pool key, what this writer's instances taught about
	// checkpointing.
	Pools map[string]policy.CheckpointLog `json:"pools,omitempty"`
	// Recent are the latest observations, oldest first, not yet folded
	// into Stock and Pools: kept whole so that one recorded by two
	// writers counts once.
	Recent []Observation `json:"recent,omitempty"`
	// Absorbed names the shards of writers gone that this one has folded
	// in; readers skip those until they are deleted.
	Absorbed []string `json:"absorbed,omitempty"`
	// Imported are the sha256 sums of the data-dir files of an older
	// refuel folded in (Migrate), so none is read twice.
	Imported []string `json:"imported,omitempty"`
}

// StockPart is what one writer saw of one offering's stock.
type StockPart struct {
	In  policy.Stretches `json:"in"`
	Out policy.Stretches `json:"out"`
	// LastFound is this writer's latest try that found stock after an
	// outage: it ends every outage begun before it, whoever saw it begin.
	LastFound time.Time `json:"last_found,omitzero"`
	// NoneSince is when this writer's tries began finding none, while no
	// other writer knew of an outage.
	NoneSince time.Time `json:"none_since,omitzero"`
}

// Observation is one lesson. ID names it, so the same lesson recorded
// twice counts once.
type Observation struct {
	ID  string `json:"id"`
	Key string `json:"key"` // the offering's or the pool's
	// Stretch is a stretch of stock, or of its absence, that was seen.
	Stretch *Stretch `json:"stretch,omitempty"`
	// Log is what one instance taught its pool.
	Log *policy.CheckpointLog `json:"log,omitempty"`
}

// Stretch is a stretch of stock (In) or of none seen for D, to its end
// or not (see policy.Availability.Seen).
type Stretch struct {
	In    bool          `json:"in"`
	D     time.Duration `json:"d"`
	Ended bool          `json:"ended"`
}

// Tried records a try of a spot offering at now, which found stock or did
// not, given view, the deployment's memory as last read. It reports
// whether the shard changed. The first try to find none while the
// deployment knows of no outage begins one; the first to find some ends
// it, however many writers' tries saw it.
func (s *Shard) Tried(view View, key string, found bool, now time.Time) bool {
	open := view.Stock[key].NoneSince
	p := s.Stock[key]
	switch {
	case !found && open.IsZero():
		p.NoneSince = now
	case found && !open.IsZero():
		s.observe(Observation{
			ID: "out/" + key + "/" + strconv.FormatInt(open.UnixNano(), 10), Key: key,
			Stretch: &Stretch{D: now.Sub(open), Ended: true},
		})
		p.LastFound, p.NoneSince = now, time.Time{}
	default:
		return false // a try like the last: nothing new
	}
	s.setStock(key, p)
	return true
}

// Held records a spot instance (id) of the offering key held for d,
// until it was preempted or given back.
func (s *Shard) Held(id, key string, d time.Duration, preempted bool) {
	s.observe(Observation{ID: "held/" + key + "/" + id, Key: key, Stretch: &Stretch{In: true, D: d, Ended: preempted}})
}

// Taught records what an instance (id) taught its pool.
func (s *Shard) Taught(id, pool string, l policy.CheckpointLog) {
	s.observe(Observation{ID: "pool/" + pool + "/" + id, Key: pool, Log: &l})
}

// observe keeps o whole, once, folding the oldest kept beyond
// RecentLimit.
func (s *Shard) observe(o Observation) {
	if slices.ContainsFunc(s.Recent, func(r Observation) bool { return r.ID == o.ID }) {
		return
	}
	s.Recent = append(s.Recent, o)
	if n := len(s.Recent) - RecentLimit; n > 0 {
		for _, r := range s.Recent[:n] {
			s.fold(r)
		}
		s.Recent = slices.Delete(s.Recent, 0, n)
	}
}

// fold adds o to the summaries.
func (s *Shard) fold(o Observation) {
	if o.Stretch != nil {
		p := s.Stock[o.Key]
		p.add(*o.Stretch)
		s.setStock(o.Key, p)
	}
	if o.Log != nil {
		if s.Pools == nil {
			s.Pools = map[string]policy.CheckpointLog{}
		}
		s.Pools[o.Key] = s.Pools[o.Key].Add(*o.Log)
	}
}

func (s *Shard) setStock(key string, p StockPart) {
	if s.Stock == nil {
		s.Stock = map[string]StockPart{}
	}
	s.Stock[key] = p
}

// Absorb folds in the whole of o, the shard of a writer gone, and notes
// it absorbed. An outage o saw begin stays open.
func (s *Shard) Absorb(o Shard) {
	for k, p := range o.Stock {
		q := s.Stock[k]
		q.In, q.Out = q.In.Plus(p.In), q.Out.Plus(p.Out)
		q.LastFound = later(q.LastFound, p.LastFound)
		if q.NoneSince.IsZero() || (!p.NoneSince.IsZero() && p.NoneSince.Before(q.NoneSince)) {
			q.NoneSince = p.NoneSince
		}
		s.setStock(k, q)
	}
	for k, l := range o.Pools {
		if s.Pools == nil {
			s.Pools = map[string]policy.CheckpointLog{}
		}
		s.Pools[k] = s.Pools[k].Add(l)
	}
	for _, r := range o.Recent {
		s.observe(r)
	}
	s.Imported = union(s.Imported, o.Imported)
	s.Absorbed = union(s.Absorbed, append(slices.Clone(o.Absorbed), o.Writer))
}

func (p *StockPart) add(st Stretch) {
	a := policy.Availability{In: p.In, Out: p.Out}
	a.Seen(st.In, st.D, st.Ended)
	p.In, p.Out = a.In, a.Out
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// union is a and the strings of b it lacks, sorted.
func union(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// renamed is what of s a writer may still write under a new name once a
// live writer has absorbed s: the outage marks (a later or an earlier
// time counted twice is the same time) and the recent observations
// (counted once by ID), none of the summaries the other now holds.
func (s Shard) renamed(writer string) Shard {
	out := Shard{Writer: writer, Recent: s.Recent, Imported: s.Imported}
	for k, p := range s.Stock {
		out.setStock(k, StockPart{LastFound: p.LastFound, NoneSince: p.NoneSince})
	}
	return out
}
