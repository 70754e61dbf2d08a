// Package admission decides who gets capacity: the priority queue of
// training runs and service replicas waiting for an instance, with aging
// so low priority is never starved; placement on the dedicated base
// group first and overflow to the burst pools; which lower-priority
// training to preempt for a demand that cannot be placed; and the order
// in which capacity is given back.
//
// It is the state of the long-running pool workflow, so everything here
// is deterministic: State has exported fields and survives JSON (and
// continue-as-new), times are arguments, and every order is fully
// specified, never left to map iteration.
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
)

// Request asks for one instance.
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
	Tier      spec.Tier      `json:"tier"`
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

// Allocation is capacity given to a request.
type Allocation struct {
	Request Request `json:"request"`
	Layer   Layer   `json:"layer"`
	// Node is the base machine, for BaseLayer.
	Node string `json:"node,omitempty"`
	// Pool is the burst pool counted against its cap: the pool of the
	// first offering until Bind says which one was acquired.
	Pool string `json:"pool,omitempty"`
	// Offerings are what the run may acquire, in order: the base
	// machine's, or the burst offerings to try one after another.
	Offerings []capacity.Offering `json:"offerings"`
	// Bound is set once the instance is acquired, Offerings[0] then
	// being the one.
	Bound      bool      `json:"bound,omitempty"`
	AdmittedAt time.Time `json:"admitted_at"`
	// Yielding is set once the allocation was chosen to be preempted:
	// it is checkpointing and about to be released.
	Yielding bool `json:"yielding,omitempty"`
}

// GPUs is what the allocation holds on a base machine.
func (a Allocation) GPUs() int { return max(a.Request.Resources.GPUs, 1) }

// State is the pool workflow's admission state. Create it with New.
type State struct {
	Config  pool.Config  `json:"config"`
	Nodes   []pool.Node  `json:"nodes"`
	Waiting []Request    `json:"waiting,omitempty"`
	Running []Allocation `json:"running,omitempty"`
	NextSeq int64        `json:"next_seq"`
}

// New returns an empty state for a normalised, validated config.
func New(c pool.Config) *State {
	return &State{Config: c, Nodes: c.Base.Inventory()}
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
	if r.Kind != Training && r.Kind != Service {
		return &spec.FieldError{Field: "kind", Problem: fmt.Sprintf("%q is not a kind", r.Kind), Fix: "use training or service"}
	}
	// A blank tier would silently mean base capacity only.
	if !slices.Contains(spec.Tiers, r.Tier) {
		return &spec.FieldError{Field: "tier", Problem: fmt.Sprintf("%q is not a tier", r.Tier), Fix: "use critical, deadline or flexible; a service's is its placement's Tier()"}
	}
	r.EnqueuedAt, r.Seq = now, s.NextSeq
	r.Paused, r.PausedAt, r.PausedFor = false, time.Time{}, 0
	s.NextSeq++
	s.Waiting = append(s.Waiting, r)
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
			s.Waiting = append(s.Waiting[:i], s.Waiting[i+1:]...)
			return nil
		}
	}
	return &NotFoundError{id}
}

// Bind records the offering a burst allocation's run acquired, so the
// pool it counts against is the right one.
func (s *State) Bind(id string, o capacity.Offering) error {
	a := s.running(id)
	if a == nil {
		return &NotFoundError{id}
	}
	a.Offerings, a.Bound = []capacity.Offering{o}, true
	if a.Layer == BurstLayer {
		a.Pool = s.poolOf(o)
	}
	return nil
}

// Release gives an allocation's capacity back and returns it.
func (s *State) Release(id string) (Allocation, error) {
	for i, a := range s.Running {
		if a.Request.ID == id {
			s.Running = append(s.Running[:i], s.Running[i+1:]...)
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

func (s *State) poolOf(o capacity.Offering) string {
	for _, p := range s.Config.Burst {
		for _, po := range p.Offerings {
			if po.Key() == o.Key() {
				return p.Name
			}
		}
	}
	return ""
}
