package capacity

import (
	"context"

	"refuel/pkg/spec"
)

// Provider is a cloud refuel rents instances from. Implementations must be
// safe for concurrent use.
type Provider interface {
	// Name is the provider's name as written in JobSpec resources.providers.
	Name() string

	// Offerings lists what could be acquired for the resources: every
	// instance type, zone and market that satisfies them, priced. It does
	// not say whether stock is there now; Acquire finds that out.
	Offerings(ctx context.Context, r spec.Resources) ([]Offering, error)

	// Acquire launches one instance on the first offering of req it can
	// fill and returns it once its node agent was started. It is
	// idempotent in (RunID, Attempt): asked again, it returns the same
	// instance. When no offering can be filled it returns an *Error per
	// offering joined with errors.Join; ClassOf picks the class to act on.
	Acquire(ctx context.Context, req Request) (Instance, error)

	// Release terminates an instance. Releasing one that is already gone
	// returns a *NotFoundError; callers that only want it gone treat that
	// as success.
	Release(ctx context.Context, id string) error

	// Describe returns an instance's current state, or *NotFoundError.
	Describe(ctx context.Context, id string) (Instance, State, error)

	// List returns the running instances whose tags include every given
	// tag (nil lists all that refuel manages).
	List(ctx context.Context, tags map[string]string) ([]Instance, error)
}

// Reclaimer is a provider whose cloud says which of its instances it took
// back (a spot instance reclaimed, a preemptible VM preempted) once they
// are gone: the control plane tells their runs (instance-taken), so a run
// whose notice left no time for its agent to report recovers at once
// instead of at its heartbeat timeout.
type Reclaimer interface {
	// Reclaimed lists the instances carrying every given tag that the
	// cloud took back and that have ended. An instance is listed for as
	// long as the cloud keeps it visible; callers tell each one once.
	Reclaimed(ctx context.Context, tags map[string]string) ([]Instance, error)
}
