package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"refuel/pkg/capacity"
)

// Names of the activities that stop and start a warm-pool instance.
const (
	StopInstanceName  = "StopInstance"
	StartInstanceName = "StartInstance"
)

// StopResult says whether an instance was stopped: it then costs
// PricePerHour, its volume's price. Reason says why one was not (its
// provider cannot stop instances, or not this one): it stays running.
type StopResult struct {
	Stopped      bool    `json:"stopped"`
	PricePerHour float64 `json:"price_per_hour,omitempty"`
	Reason       string  `json:"reason,omitempty"`
}

// StopInstance stops an instance, keeping its volume, where its provider
// can (capacity.Stopper); where it cannot, it answers why and leaves the
// instance running, which is no error.
func (a *Capacity) StopInstance(ctx context.Context, inst capacity.Instance) (StopResult, error) {
	p := a.provider(inst.Offering.Provider)
	if p == nil {
		return StopResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("no provider named %q on this worker", inst.Offering.Provider), "UnknownProvider", nil)
	}
	s, ok := p.(capacity.Stopper)
	if !ok {
		return StopResult{Reason: "provider " + p.Name() + " cannot stop instances"}, nil
	}
	stop := heartbeatWhile(ctx)
	err := s.Stop(ctx, inst.ID)
	stop()
	var ns *capacity.NotStoppableError
	switch {
	case errors.As(err, &ns):
		return StopResult{Reason: ns.Reason}, nil
	case capacity.IsNotFound(err):
		return StopResult{}, temporal.NewNonRetryableApplicationError(err.Error(), string(capacity.InstanceLost), err)
	case err != nil:
		return StopResult{}, err
	}
	return StopResult{Stopped: true, PricePerHour: s.StoppedPricePerHour(inst.Offering)}, nil
}

// StartInstance starts a stopped instance and returns it once its agent
// serves again, after its provider's start time. One that is gone is a
// non-retryable error of class instance-lost.
func (a *Capacity) StartInstance(ctx context.Context, inst capacity.Instance) (capacity.Instance, error) {
	p := a.provider(inst.Offering.Provider)
	s, ok := p.(capacity.Stopper)
	if !ok {
		return capacity.Instance{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("no provider named %q that starts instances on this worker", inst.Offering.Provider), "UnknownProvider", nil)
	}
	stop := heartbeatWhile(ctx)
	out, err := s.Start(ctx, inst.ID)
	stop()
	if capacity.IsNotFound(err) {
		return capacity.Instance{}, temporal.NewNonRetryableApplicationError(err.Error(), string(capacity.InstanceLost), err)
	}
	return out, err
}
