package capacity

import "context"

// StateStopped is an instance stopped with its volume kept: no compute is
// paid, only its volume, and it can be started again.
const StateStopped State = "stopped"

// Stopper is a Provider that can stop an on-demand instance, keeping its
// volume (and the model on it), and start it again: what a warm-pool
// entry is where the provider has it. Providers without it keep a warm
// entry running at full price. Implementations must be safe for
// concurrent use.
type Stopper interface {
	// Stop stops a running on-demand instance: its agent ends, its volume
	// stays. Stopping a stopped one does nothing. A spot instance cannot
	// be stopped (a *NotStoppableError); an unknown or terminated one is a
	// *NotFoundError.
	Stop(ctx context.Context, id string) error
	// Start starts a stopped instance and returns it once its agent
	// serves its task queue again; it takes the provider's start time.
	// Starting a running one returns it as it is.
	Start(ctx context.Context, id string) (Instance, error)
	// ListStopped lists the stopped instances whose tags include every
	// given tag (nil lists all that refuel manages), which List leaves out.
	ListStopped(ctx context.Context, tags map[string]string) ([]Instance, error)
	// StoppedPricePerHour is what a stopped instance of the offering costs
	// an hour: its volume.
	StoppedPricePerHour(o Offering) float64
}

// NotStoppableError says an instance cannot be stopped, and why: spot
// instances are reclaimed, not stopped, on every provider refuel has.
type NotStoppableError struct {
	ID     string
	Reason string
}

func (e *NotStoppableError) Error() string {
	return "instance " + e.ID + " cannot be stopped: " + e.Reason
}
