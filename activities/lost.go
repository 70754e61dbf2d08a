package activities

import (
	"context"

	"refuel/pkg/capacity"
)

// LostInstances returns those of the instances their cloud has taken
// back or is about to: terminated, gone, served an interruption notice,
// or stopped (by someone else: a holder asks only about instances it
// keeps running). A holder that runs no activity on its instances (a service's
// replicas) learns of a reclaimed spot instance this way. An instance of
// a provider this worker does not have is not reported: nothing here can
// tell.
func (a *Capacity) LostInstances(ctx context.Context, insts []capacity.Instance) ([]LostInstance, error) {
	var out []LostInstance
	for _, inst := range insts {
		p := a.provider(inst.Offering.Provider)
		if p == nil {
			continue
		}
		_, state, err := p.Describe(ctx, inst.ID)
		switch {
		case capacity.IsNotFound(err):
			out = append(out, LostInstance{ID: inst.ID, State: capacity.StateTerminated})
		case err != nil:
			return nil, err
		case state == capacity.StateInterrupted || state == capacity.StateTerminated || state == capacity.StateStopped:
			out = append(out, LostInstance{ID: inst.ID, State: state})
		}
	}
	return out, nil
}
