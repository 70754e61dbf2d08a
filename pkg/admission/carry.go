package admission

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/pool"
	"refuel/pkg/spec"
)

// Carry is a State as the pool workflow hands it to its next generation
// when it continues as new. The whole State in JSON grows by a kilobyte
// or more a request (each request's resources, each allocation's list of
// offerings), so a few thousand would pass Temporal's 2 MB payload
// limit; a Carry names each shape of request, each offering and each
// list of offerings once, keeps requests and allocations field by field
// (the i-th entry of every list is the i-th request's), and times as
// nanoseconds before At. State → Carry → State gives back an equal
// state; the pools file travels beside it.
type Carry struct {
	At      time.Time `json:"at"`
	NextSeq int64     `json:"next_seq"`
	// Shapes are what requests share: kind, team, tier and resources.
	Shapes []CarriedShape `json:"shapes,omitempty"`
	// Offerings are every offering held or to try, once; OfferingLists
	// are lists of them by index, in order.
	Offerings     []capacity.Offering `json:"offerings,omitempty"`
	OfferingLists [][]int             `json:"offering_lists,omitempty"`
	// Places are the names of the machines and pools allocations hold.
	Places        []string           `json:"places,omitempty"`
	Waiting       CarriedRequests    `json:"waiting"`
	Running       CarriedAllocations `json:"running"`
	ReservedSince time.Time          `json:"reserved_since,omitzero"`
	ReserveAgain  time.Time          `json:"reserve_again,omitzero"`
	// Joined are the machines that joined the base group.
	Joined []JoinedNode `json:"joined,omitempty"`
}

// CarriedShape is what requests of one shape share.
type CarriedShape struct {
	Kind      Kind           `json:"kind"`
	Team      string         `json:"team,omitempty"`
	Tier      spec.Tier      `json:"tier"`
	Resources spec.Resources `json:"resources"`
}

// CarriedRequests are requests field by field. Times are nanoseconds
// before the carry's At, math.MinInt64 for a time never set.
type CarriedRequests struct {
	ID []string `json:"id"`
	// Owner is by position, for the requests whose owner is not their id.
	Owner    map[int]string `json:"owner,omitempty"`
	Shape    []int          `json:"shape"`
	Priority []int          `json:"priority"`
	Seq      []int64        `json:"seq"`
	Enqueued []int64        `json:"enqueued"`
	// Paused is by position, for the requests paused or paused before.
	Paused map[int]CarriedPause `json:"paused,omitempty"`
}

// CarriedPause is a request's pause: PausedAt as nanoseconds before the
// carry's At while paused, and the time paused before.
type CarriedPause struct {
	Paused bool          `json:"paused,omitempty"`
	At     int64         `json:"at,omitempty"`
	For    time.Duration `json:"for,omitempty"`
}

// CarriedAllocations are allocations field by field, their requests
// first. Burst, Bound and Yielding hold one character an allocation,
// '1' where it is so.
type CarriedAllocations struct {
	CarriedRequests
	Burst    string `json:"burst"`
	Bound    string `json:"bound"`
	Yielding string `json:"yielding"`
	// Place is the machine (base) or pool (burst) in Places, -1 for none.
	Place []int `json:"place"`
	// Offerings is the allocation's list in OfferingLists.
	Offerings []int `json:"offerings"`
	// Admitted is nanoseconds after the request was enqueued (its wait,
	// most often short), math.MinInt64 for a time never set.
	Admitted []int64 `json:"admitted"`
	// Nodes is by position, for gangs.
	Nodes map[int]CarriedNodes `json:"nodes,omitempty"`
}

// CarriedNodes are a gang's nodes field by field: place and offering
// list by index (-1 for none), and '1' for each node bound.
type CarriedNodes struct {
	Place     []int  `json:"place"`
	Offerings []int  `json:"offerings"`
	Bound     string `json:"bound"`
}

// unset is a time never set.
const unset = math.MinInt64

// Carry returns the state in its compact form, taken at at.
func (s *State) Carry(at time.Time) *Carry {
	c := &Carry{At: at, NextSeq: s.NextSeq, ReservedSince: s.ReservedSince, ReserveAgain: s.ReserveAgain, Joined: slices.Clone(s.Joined)}
	w := carryWriter{c: c, shapes: map[string]int{}, offerings: map[capacity.Offering]int{}, lists: map[string]int{}, places: map[string]int{}}
	for i, r := range s.Waiting {
		w.request(&c.Waiting, i, r)
	}
	var burst, bound, yielding strings.Builder
	ra := &c.Running
	for i, a := range s.Running {
		w.request(&ra.CarriedRequests, i, a.Request)
		burst.WriteByte(flag(a.Layer == BurstLayer))
		bound.WriteByte(flag(a.Bound))
		yielding.WriteByte(flag(a.Yielding))
		place := a.Node
		if a.Layer == BurstLayer {
			place = a.Pool
		}
		ra.Place = append(ra.Place, w.place(place))
		ra.Offerings = append(ra.Offerings, w.list(a.Offerings))
		ra.Admitted = append(ra.Admitted, waited(a.Request.EnqueuedAt, a.AdmittedAt))
		if len(a.Nodes) > 0 {
			var n CarriedNodes
			var nb strings.Builder
			for _, g := range a.Nodes {
				n.Place = append(n.Place, w.place(g.Node))
				n.Offerings = append(n.Offerings, w.list(g.Offerings))
				nb.WriteByte(flag(g.Bound))
			}
			n.Bound = nb.String()
			if ra.Nodes == nil {
				ra.Nodes = map[int]CarriedNodes{}
			}
			ra.Nodes[i] = n
		}
	}
	ra.Burst, ra.Bound, ra.Yielding = burst.String(), bound.String(), yielding.String()
	return c
}

type carryWriter struct {
	c         *Carry
	shapes    map[string]int
	offerings map[capacity.Offering]int
	lists     map[string]int
	places    map[string]int
}

func (w *carryWriter) request(rs *CarriedRequests, i int, r Request) {
	sh := CarriedShape{Kind: r.Kind, Team: r.Team, Tier: r.Tier, Resources: r.Resources}
	key := carriedShapeKey(sh)
	k, ok := w.shapes[key]
	if !ok {
		k = len(w.c.Shapes)
		w.shapes[key] = k
		w.c.Shapes = append(w.c.Shapes, sh)
	}
	rs.ID = append(rs.ID, r.ID)
	if r.Owner != r.ID {
		if rs.Owner == nil {
			rs.Owner = map[int]string{}
		}
		rs.Owner[i] = r.Owner
	}
	rs.Shape = append(rs.Shape, k)
	rs.Priority = append(rs.Priority, r.Priority)
	rs.Seq = append(rs.Seq, r.Seq)
	rs.Enqueued = append(rs.Enqueued, before(w.c.At, r.EnqueuedAt))
	if r.Paused || r.PausedFor != 0 {
		if rs.Paused == nil {
			rs.Paused = map[int]CarriedPause{}
		}
		p := CarriedPause{Paused: r.Paused, For: r.PausedFor}
		if r.Paused {
			p.At = before(w.c.At, r.PausedAt)
		}
		rs.Paused[i] = p
	}
}

// carriedShapeKey tells shapes apart exactly: every field, and nil
// from empty.
func carriedShapeKey(sh CarriedShape) string {
	res := sh.Resources
	b := []byte(string(sh.Kind) + "\x00" + sh.Team + "\x00" + string(sh.Tier))
	for _, n := range []int{res.GPUs, res.Nodes} {
		b = strconv.AppendInt(append(b, 0), int64(n), 10)
	}
	b = append(b, 0)
	if res.SameZone != nil {
		b = strconv.AppendBool(b, *res.SameZone)
	}
	for _, l := range [][]string{res.InstanceTypes, res.Zones, res.Providers} {
		b = strconv.AppendQuote(strconv.AppendBool(append(b, 0), l == nil), strings.Join(l, "\x00"))
		b = strconv.AppendInt(b, int64(len(l)), 10)
	}
	b = strconv.AppendFloat(append(b, 0), res.MaxPricePerHour, 'g', -1, 64)
	return string(b)
}

// list is the index of the offering list, -1 for nil.
func (w *carryWriter) list(offs []capacity.Offering) int {
	if offs == nil {
		return -1
	}
	ks := make([]int, len(offs))
	var key []byte
	for i, o := range offs {
		k, ok := w.offerings[o]
		if !ok {
			k = len(w.c.Offerings)
			w.offerings[o] = k
			w.c.Offerings = append(w.c.Offerings, o)
		}
		ks[i] = k
		key = append(strconv.AppendInt(key, int64(k), 10), ',')
	}
	l, ok := w.lists[string(key)]
	if !ok {
		l = len(w.c.OfferingLists)
		w.lists[string(key)] = l
		w.c.OfferingLists = append(w.c.OfferingLists, ks)
	}
	return l
}

func (w *carryWriter) place(name string) int {
	if name == "" {
		return -1
	}
	p, ok := w.places[name]
	if !ok {
		p = len(w.c.Places)
		w.places[name] = p
		w.c.Places = append(w.c.Places, name)
	}
	return p
}

func flag(b bool) byte {
	if b {
		return '1'
	}
	return '0'
}

func before(at, t time.Time) int64 {
	if t.IsZero() {
		return unset
	}
	return int64(at.Sub(t))
}

func after(at time.Time, ns int64) time.Time {
	if ns == unset {
		return time.Time{}
	}
	return at.Add(-time.Duration(ns))
}

// waited is from enqueued to admitted in nanoseconds; an unset time on
// either side is carried as unset, and the other side as it is.
func waited(enqueued, admitted time.Time) int64 {
	if admitted.IsZero() {
		return unset
	}
	if enqueued.IsZero() {
		return int64(admitted.Sub(time.Unix(0, 0)))
	}
	return int64(admitted.Sub(enqueued))
}

func admitted(enqueued time.Time, ns int64) time.Time {
	switch {
	case ns == unset:
		return time.Time{}
	case enqueued.IsZero():
		return time.Unix(0, 0).Add(time.Duration(ns))
	}
	return enqueued.Add(time.Duration(ns))
}

// CarryError says a carry does not hold together.
type CarryError struct {
	Field   string
	Problem string
}

func (e *CarryError) Error() string {
	return fmt.Sprintf("carried pool state: %s %s", e.Field, e.Problem)
}

// State rebuilds the state the carry was taken of, for the pools file in
// force, deciding by GangRules until told otherwise.
func (c *Carry) State(cfg pool.Config) (*State, error) {
	s := New(cfg)
	s.NextSeq, s.ReservedSince, s.ReserveAgain = c.NextSeq, c.ReservedSince, c.ReserveAgain
	s.Joined = slices.Clone(c.Joined)
	s.Nodes = s.inventory()
	r := carryReader{c: c}
	s.Waiting = r.requests("waiting", &c.Waiting)
	ra := &c.Running
	reqs := r.requests("running", &ra.CarriedRequests)
	n := len(reqs)
	r.length("running.burst", len(ra.Burst), n)
	r.length("running.bound", len(ra.Bound), n)
	r.length("running.yielding", len(ra.Yielding), n)
	r.length("running.place", len(ra.Place), n)
	r.length("running.offerings", len(ra.Offerings), n)
	r.length("running.admitted", len(ra.Admitted), n)
	if r.err != nil {
		return nil, r.err
	}
	for i, req := range reqs {
		a := Allocation{Request: req, Layer: BaseLayer, Bound: ra.Bound[i] == '1', Yielding: ra.Yielding[i] == '1',
			Offerings: r.list("running.offerings", ra.Offerings[i]), AdmittedAt: admitted(req.EnqueuedAt, ra.Admitted[i])}
		place := r.place("running.place", ra.Place[i])
		if ra.Burst[i] == '1' {
			a.Layer, a.Pool = BurstLayer, place
		} else {
			a.Node = place
		}
		if g, ok := ra.Nodes[i]; ok {
			r.length("running.nodes.offerings", len(g.Offerings), len(g.Place))
			r.length("running.nodes.bound", len(g.Bound), len(g.Place))
			if r.err != nil {
				return nil, r.err
			}
			for k := range g.Place {
				a.Nodes = append(a.Nodes, NodeGrant{Node: r.place("running.nodes.place", g.Place[k]),
					Offerings: r.list("running.nodes.offerings", g.Offerings[k]), Bound: g.Bound[k] == '1'})
			}
		}
		s.Running = append(s.Running, a)
	}
	return s, r.err
}

type carryReader struct {
	c   *Carry
	err error
}

func (r *carryReader) fail(field, problem string) {
	if r.err == nil {
		r.err = &CarryError{field, problem}
	}
}

func (r *carryReader) length(field string, got, want int) {
	if got != want {
		r.fail(field, fmt.Sprintf("has %d entries for %d", got, want))
	}
}

func (r *carryReader) requests(field string, rs *CarriedRequests) []Request {
	n := len(rs.ID)
	r.length(field+".shape", len(rs.Shape), n)
	r.length(field+".priority", len(rs.Priority), n)
	r.length(field+".seq", len(rs.Seq), n)
	r.length(field+".enqueued", len(rs.Enqueued), n)
	if r.err != nil {
		return nil
	}
	out := make([]Request, 0, n)
	for i, id := range rs.ID {
		if rs.Shape[i] < 0 || rs.Shape[i] >= len(r.c.Shapes) {
			r.fail(field+".shape", fmt.Sprintf("%d is not a shape", rs.Shape[i]))
			return nil
		}
		sh := r.c.Shapes[rs.Shape[i]]
		q := Request{ID: id, Owner: id, Kind: sh.Kind, Team: sh.Team, Tier: sh.Tier, Resources: sh.Resources,
			Priority: rs.Priority[i], Seq: rs.Seq[i], EnqueuedAt: after(r.c.At, rs.Enqueued[i])}
		if o, ok := rs.Owner[i]; ok {
			q.Owner = o
		}
		if p, ok := rs.Paused[i]; ok {
			q.Paused, q.PausedFor = p.Paused, p.For
			if p.Paused {
				q.PausedAt = after(r.c.At, p.At)
			}
		}
		// Lists of the carry are shared by every request of a shape:
		// each request gets its own.
		q.Resources.InstanceTypes = slices.Clone(q.Resources.InstanceTypes)
		q.Resources.Zones = slices.Clone(q.Resources.Zones)
		q.Resources.Providers = slices.Clone(q.Resources.Providers)
		out = append(out, q)
	}
	return out
}

func (r *carryReader) list(field string, l int) []capacity.Offering {
	if l == -1 {
		return nil
	}
	if l < 0 || l >= len(r.c.OfferingLists) {
		r.fail(field, fmt.Sprintf("%d is not an offering list", l))
		return nil
	}
	out := make([]capacity.Offering, 0, len(r.c.OfferingLists[l]))
	for _, k := range r.c.OfferingLists[l] {
		if k < 0 || k >= len(r.c.Offerings) {
			r.fail("offering_lists", fmt.Sprintf("names offering %d of %d", k, len(r.c.Offerings)))
			return nil
		}
		out = append(out, r.c.Offerings[k])
	}
	return out
}

func (r *carryReader) place(field string, p int) string {
	if p == -1 {
		return ""
	}
	if p < 0 || p >= len(r.c.Places) {
		r.fail(field, fmt.Sprintf("%d is not a place", p))
		return ""
	}
	return r.c.Places[p]
}
