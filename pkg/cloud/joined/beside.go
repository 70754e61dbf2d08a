package joined

import (
	"context"
	"slices"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

// Beside is the base group's provider when the pools file lists or
// counts machines too: a request for one of those goes to Listed (the
// machines the control plane starts), any other to the joined ones.
type Beside struct {
	*Cloud
	Listed capacity.Provider
	// Names are the machines of the pools file.
	Names []string
}

var _ capacity.Provider = (*Beside)(nil)

// Offerings implements capacity.Provider: the listed machines'.
func (b *Beside) Offerings(ctx context.Context, r spec.Resources) ([]capacity.Offering, error) {
	return b.Listed.Offerings(ctx, r)
}

// Acquire implements capacity.Provider.
func (b *Beside) Acquire(ctx context.Context, req capacity.Request) (capacity.Instance, error) {
	if slices.Contains(b.Names, req.Tags[capacity.TagNode]) {
		return b.Listed.Acquire(ctx, req)
	}
	return b.Cloud.Acquire(ctx, req)
}

// Release implements capacity.Provider.
func (b *Beside) Release(ctx context.Context, id string) error {
	if _, ok := machineOf(id); ok {
		return b.Cloud.Release(ctx, id)
	}
	return b.Listed.Release(ctx, id)
}

// Describe implements capacity.Provider.
func (b *Beside) Describe(ctx context.Context, id string) (capacity.Instance, capacity.State, error) {
	if _, ok := machineOf(id); ok {
		return b.Cloud.Describe(ctx, id)
	}
	return b.Listed.Describe(ctx, id)
}

// List implements capacity.Provider: the listed machines' instances.
func (b *Beside) List(ctx context.Context, tags map[string]string) ([]capacity.Instance, error) {
	return b.Listed.List(ctx, tags)
}
