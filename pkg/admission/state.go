// Package admission decides who gets capacity: the priority queue of
// training runs and service replicas waiting for instances, with aging
// so low priority is never starved; placement on the dedicated base
// group first and overflow to the burst pools, all or nothing for a gang
// of several nodes; which lower-priority training to preempt for a
// demand that cannot be placed; and the order in which capacity is given
// back.
//
// It is the state of the long-running pool workflow, so everything here
// is deterministic: times are arguments, and every order is fully
// specified, never left to map iteration. The state survives JSON, and
// Carry is the compact form the pool hands to its next generation.
package admission

import (
	"fmt"
	"slices"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/pool"
	"refuel/pkg/spec"
)

// Kind is what asks for capacity.
type Kind string

const (
	// Training is a TrainingRun: it checkpoints, so it may be preempted.
	Training Kind = "training"
	// Service is an inference replica: never preempted here.
	Service Kind = "service"
	// Development is a DevEnvironment: it saves its workspace, so it may
	// be preempted too, and is moved, not killed. The pool does not move
	// it from burst to base of its own accord: that would interrupt a
	// developer to save money.
	Development Kind = "development"
)

// Kinds lists every kind.
var Kinds = []Kind{Training, Service, Development}

// Yields reports whether capacity held for the kind may be taken back
// for higher-priority work: the holder saves its state and is requeued.
func (k Kind) Yields() bool { return k == Training || k == Development }

// Request asks for one instance, or, when Resources.Nodes is above 1
// (under GangRules), for that many at once: a gang.
type Request struct {
	ID   string `json:"id"` // the run's id, or a replica's
	Kind Kind   `json:"kind"`
	// Owner is the workflow to tell when the request is admitted or must
	// yield: the run itself, or the service a replica belongs to.
	Owner    string `json:"owner,omitempty"`
	Team     string `json:"team,omitempty"`
	Priority int    `json:"priority"`
	// Tier says which burst markets may be used (spec.Placement.Tier
	// gives a service's).
	Tier spec.Tier `json:"tier"`
	// Resources are what each node needs; Nodes and SameZone make a gang.
	Resources spec.Resources `json:"resources"`
	// EnqueuedAt starts the wait that aging rewards.
	EnqueuedAt time.Time `json:"enqueued_at"`
	// Seq breaks ties between equal effective priorities: first come,
	// first served.
	Seq int64 `json:"seq"`
	// Paused requests keep their place but are not admitted. Time spent
	// paused does not count as waiting.
	Paused    bool          `json:"paused,omitempty"`
	PausedAt  time.Time     `json:"paused_at,omitzero"`
	PausedFor time.Duration `json:"paused_for,omitempty"`
}

// Layer is which capacity an allocation is on.
type Layer string

const (
	BaseLayer  Layer = "base"
	BurstLayer Layer = "burst"
)

// Allocation is capacity given to a request. For a gang the fields
// describe its first node (rank 0), and Nodes lists every node.
type Allocation struct {
	Request Request `json:"request"`
	Layer   Layer   `json:"layer"`
	// Node is the base machine, for BaseLayer.
	Node string `json:"node,omitempty"`
	// Pool is the burst pool counted against its cap: the pool of the
	// first offering until Bind says which one was acquired. A gang's
	// nodes are all in this one pool. The grant a base allocation's
	// holder receives names the base group here, for its ledger.
	Pool string `json:"pool,omitempty"`
	// Offerings are what the run may acquire, in order: the base
	// machine's, or the burst offerings to try one after another (for a
	// burst gang, what every node that is not bound yet tries).
	// Allocations may share these lists: never change one in place.
	Offerings []capacity.Offering `json:"offerings"`
	// Bound is set once the instance is acquired, Offerings[0] then
	// being the one.
	Bound      bool      `json:"bound,omitempty"`
	AdmittedAt time.Time `json:"admitted_at"`
	// Yielding is set once the allocation was chosen to be preempted:
	// it is checkpointing and about to be released.
	Yielding bool `json:"yielding,omitempty"`
	// GiveBackAt is when the pool takes a burst gang's grant back if the
	// gang has not acquired every node by then (its gang_timeout), as
	// the grant tells its holder; zero otherwise, and never carried.
	GiveBackAt time.Time `json:"give_back_at,omitzero"`
	// Nodes are a gang's nodes in rank order, Nodes[0] being the one the
	// fields above describe; nil for a request of one node, whose
	// allocation looks exactly as before gangs.
	Nodes []NodeGrant `json:"nodes,omitempty"`
}

// NodeGrant is what one node of a gang may acquire.
type NodeGrant struct {
	// Node is the base machine, for BaseLayer; a gang never has two
	// nodes on one machine.
	Node string `json:"node,omitempty"`
	// Offerings are the node's: on base its machine's; on burst nil
	// until the node is bound (it tries the allocation's Offerings, one
	// list for the whole gang keeping the grant small), then the one it
	// acquired.
	Offerings []capacity.Offering `json:"offerings,omitempty"`
	Bound     bool                `json:"bound,omitempty"`
}

// GPUs is what each node of the allocation holds on a base machine.
func (a Allocation) GPUs() int { return max(a.Request.Resources.GPUs, 1) }

// NodeCount is how many instances the allocation holds.
func (a Allocation) NodeCount() int { return max(1, len(a.Nodes)) }

// Acquired reports whether every node of the allocation is bound.
func (a Allocation) Acquired() bool {
	if len(a.Nodes) == 0 {
		return a.Bound
	}
	for _, n := range a.Nodes {
		if !n.Bound {
			return false
		}
	}
	return true
}

// machines are the base machines the allocation holds GPUs on.
func (a *Allocation) machines() []string {
	if a.Layer != BaseLayer {
		return nil
	}
	if len(a.Nodes) == 0 {
		return []string{a.Node}
	}
	out := make([]string, len(a.Nodes))
	for i, n := range a.Nodes {
		out[i] = n.Node
	}
	return out
}

// Rules are the admission rules a pool decides by.
type Rules int

const (
	// OneNodeRules are those a pool recorded before gangs replays by:
	// every request is one node, and the head of the queue reserves what
	// could take it for as long as it waits.
	OneNodeRules Rules = iota
	// GangRules admit a gang all or nothing, give a reservation back
	// after the pools file's reserve_timeout, and take a burst grant
	// back from a gang that has not acquired every node within its
	// gang_timeout.
	GangRules
	// UnfilledGangRules are GangRules, and a burst gang that has not
	// acquired every node moves at once onto base machines that are
	// free for all its nodes (Moves), rather than waiting out its
	// gang_timeout on a grant the market cannot fill.
	UnfilledGangRules
	// UnfilledRules are UnfilledGangRules for every run: one of one
	// node whose burst grant is not acquired yet (it waits for stock)
	// moves at once onto a base machine that came free too.
	UnfilledRules
)

// State is the pool workflow's admission state. Create it with New.
type State struct {
	Config pool.Config `json:"config"`
	Nodes  []pool.Node `json:"nodes"`
	// Joined are the machines that joined the base group, in the order
	// they joined; Nodes holds those not draining after the pools file's.
	Joined  []JoinedNode `json:"joined,omitempty"`
	Waiting []Request    `json:"waiting,omitempty"`
	Running []Allocation `json:"running,omitempty"`
	NextSeq int64        `json:"next_seq"`
	// ReservedSince is when the head of the queue began holding idle
	// capacity for itself (GangRules); zero while none is held.
	ReservedSince time.Time `json:"reserved_since,omitzero"`
	// ReserveAgain is when a reservation that ran out may be taken up
	// again; until then every request may use what it held.
	ReserveAgain time.Time `json:"reserve_again,omitzero"`
	// Rules are not carried: the pool workflow sets them from its
	// version, so a generation decides alike on every replay.
	Rules Rules `json:"-"`

	ix *index // what decisions look up; dropped by every change
}

// New returns an empty state for a normalised, validated config, deciding
// by GangRules.
func New(c pool.Config) *State {
	return &State{Config: c, Nodes: c.Base.Inventory(), Rules: GangRules}
}

// NotFoundError says no request or allocation has the id.
type NotFoundError struct{ ID string }

func (e *NotFoundError) Error() string { return fmt.Sprintf("%s is not queued or running", e.ID) }

// DuplicateError says a request with the id is already queued or running.
type DuplicateError struct{ ID string }

func (e *DuplicateError) Error() string { return fmt.Sprintf("%s is already queued or running", e.ID) }

// Enqueue adds a request to the queue at now.
func (s *State) Enqueue(r Request, now time.Time) error {
	if s.find(r.ID) != nil {
		return &DuplicateError{r.ID}
	}
	if err := ValidatePriority(r.Priority); err != nil {
		return err
	}
	if !slices.Contains(Kinds, r.Kind) {
		return &spec.FieldError{Field: "kind", Problem: fmt.Sprintf("%q is not a kind", r.Kind), Fix: "use training, service or development"}
	}
	// A blank tier would silently mean base capacity only.
	if !slices.Contains(spec.Tiers, r.Tier) {
		return &spec.FieldError{Field: "tier", Problem: fmt.Sprintf("%q is not a tier", r.Tier), Fix: "use critical, deadline or flexible; a service's is its placement's Tier()"}
	}
	if s.Rules >= GangRules {
		switch n := r.Resources.Nodes; {
		case n < 0 || n > spec.MaxNodes:
			return &spec.FieldError{Field: "resources.nodes", Problem: fmt.Sprintf("%d is outside 0..%d", n, spec.MaxNodes), Fix: fmt.Sprintf("ask for 1 to %d nodes", spec.MaxNodes)}
		case n > 1 && r.Kind == Service:
			return &spec.FieldError{Field: "resources.nodes", Problem: "a service replica is one node", Fix: "ask for one replica per node"}
		}
	}
	r.EnqueuedAt, r.Seq = now, s.NextSeq
	r.Paused, r.PausedAt, r.PausedFor = false, time.Time{}, 0
	s.NextSeq++
	s.Waiting = append(s.Waiting, r)
	s.changed()
	return nil
}

// ValidatePriority rejects a priority outside 0..100 with a field error,
// so the set-priority update can refuse it before anything is written.
func ValidatePriority(p int) error {
	if p < 0 || p > spec.MaxPriority {
		return &spec.FieldError{Field: "priority", Problem: fmt.Sprintf("%d is out of range", p), Fix: "use an integer from 0 (lowest) to 100 (highest)"}
	}
	return nil
}

// SetPriority changes a queued or running request's priority. For a
// queued one the admission order changes at once; for a running one it
// changes what may preempt it.
func (s *State) SetPriority(id string, p int) error {
	if err := ValidatePriority(p); err != nil {
		return err
	}
	r := s.find(id)
	if r == nil {
		return &NotFoundError{id}
	}
	r.Priority = p
	s.changed()
	return nil
}

// Pause holds a queued request: it keeps its place but is not admitted
// until Resume. Pausing a paused request does nothing.
func (s *State) Pause(id string, now time.Time) error {
	r := s.queued(id)
	if r == nil {
		return &NotFoundError{id}
	}
	if !r.Paused {
		r.Paused, r.PausedAt = true, now
	}
	return nil
}

// Resume lets a paused request be admitted again.
func (s *State) Resume(id string, now time.Time) error {
	r := s.queued(id)
	if r == nil {
		return &NotFoundError{id}
	}
	if r.Paused {
		r.PausedFor += now.Sub(r.PausedAt)
		r.Paused, r.PausedAt = false, time.Time{}
	}
	return nil
}

// Cancel removes a queued request.
func (s *State) Cancel(id string) error {
	for i, r := range s.Waiting {
		if r.ID == id {
			s.Waiting = slices.Delete(s.Waiting, i, i+1)
			s.changed()
			return nil
		}
	}
	return &NotFoundError{id}
}

// BindNode records the offering node rank of an allocation acquired (0
// for a one-node request), so the burst pool it counts against is the
// right one; a gang's nodes stay counted against the gang's pool.
func (s *State) BindNode(id string, rank int, o capacity.Offering) error {
	a := s.running(id)
	if a == nil {
		return &NotFoundError{id}
	}
	if rank < 0 || rank >= a.NodeCount() {
		return &spec.FieldError{Field: "rank", Problem: fmt.Sprintf("%d is not a node of %s, which has %d", rank, id, a.NodeCount()), Fix: fmt.Sprintf("bind ranks 0..%d", a.NodeCount()-1)}
	}
	if len(a.Nodes) > 0 {
		a.Nodes = slices.Clone(a.Nodes)
		a.Nodes[rank].Offerings, a.Nodes[rank].Bound = []capacity.Offering{o}, true
		if rank > 0 {
			return nil
		}
	}
	a.Offerings, a.Bound = []capacity.Offering{o}, true
	if a.Layer == BurstLayer && len(a.Nodes) == 0 {
		a.Pool = s.poolOf(o)
	}
	s.changed()
	return nil
}

// Release gives an allocation's capacity back and returns it.
func (s *State) Release(id string) (Allocation, error) {
	for i, a := range s.Running {
		if a.Request.ID == id {
			s.Running = slices.Delete(s.Running, i, i+1)
			s.changed()
			return a, nil
		}
	}
	return Allocation{}, &NotFoundError{id}
}

// Requeue releases a preempted allocation and queues its request again
// at now, so it waits its turn like any other request rather than
// jumping the queue with the age it had before it ran.
func (s *State) Requeue(id string, now time.Time) error {
	a, err := s.Release(id)
	if err != nil {
		return err
	}
	return s.Enqueue(a.Request, now)
}

func (s *State) find(id string) *Request {
	if r := s.queued(id); r != nil {
		return r
	}
	if a := s.running(id); a != nil {
		return &a.Request
	}
	return nil
}

func (s *State) queued(id string) *Request {
	for i := range s.Waiting {
		if s.Waiting[i].ID == id {
			return &s.Waiting[i]
		}
	}
	return nil
}

func (s *State) running(id string) *Allocation {
	for i := range s.Running {
		if s.Running[i].Request.ID == id {
			return &s.Running[i]
		}
	}
	return nil
}

// poolOf is the burst pool an offering is sold in, "" for none.
func (s *State) poolOf(o capacity.Offering) string {
	if p, ok := s.index().poolOf[keyOf(o)]; ok {
		return s.Config.Burst[p].Name
	}
	return ""
}

// nodesOf is how many nodes r asks for under the state's rules.
func (s *State) nodesOf(r Request) int {
	if s.Rules < GangRules {
		return 1
	}
	return r.Resources.NodeCount()
}

// Held returns the allocation of request id while it is held under the
// same request (sequence number seq): not released, nor requeued since.
func (s *State) Held(id string, seq int64) (Allocation, bool) {
	if a := s.running(id); a != nil && a.Request.Seq == seq {
		return *a, true
	}
	return Allocation{}, false
}
