package activities

import (
	"context"
	"errors"
	"slices"
	"testing"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

// describer is a provider that only describes: its instances' states by
// id; an id it lacks is not found.
type describer struct {
	states map[string]capacity.State
	err    error
}

func (d describer) Name() string { return "fake" }
func (d describer) Offerings(context.Context, spec.Resources) ([]capacity.Offering, error) {
	return nil, nil
}
func (d describer) Acquire(context.Context, capacity.Request) (capacity.Instance, error) {
	return capacity.Instance{}, errors.New("not here")
}
func (d describer) Release(context.Context, string) error { return nil }
func (d describer) List(context.Context, map[string]string) ([]capacity.Instance, error) {
	return nil, nil
}
func (d describer) Describe(_ context.Context, id string) (capacity.Instance, capacity.State, error) {
	if d.err != nil {
		return capacity.Instance{}, "", d.err
	}
	st, ok := d.states[id]
	if !ok {
		return capacity.Instance{}, "", &capacity.NotFoundError{ID: id}
	}
	return capacity.Instance{ID: id}, st, nil
}

func TestLostInstances(t *testing.T) {
	on := func(provider, id string) capacity.Instance {
		return capacity.Instance{ID: id, Offering: capacity.Offering{Provider: provider}}
	}
	states := map[string]capacity.State{"i-run": capacity.StateRunning, "i-pend": capacity.StatePending,
		"i-notice": capacity.StateInterrupted, "i-term": capacity.StateTerminated}
	a := &Capacity{Providers: []capacity.Provider{describer{states: states}}}
	got, err := a.LostInstances(context.Background(), []capacity.Instance{
		on("fake", "i-run"), on("fake", "i-pend"), on("fake", "i-notice"), on("fake", "i-term"), on("fake", "i-gone"), on("other", "i-elsewhere"),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []LostInstance{{"i-notice", capacity.StateInterrupted}, {"i-term", capacity.StateTerminated}, {"i-gone", capacity.StateTerminated}}
	if !slices.Equal(got, want) {
		t.Errorf("lost %v; want %v", got, want)
	}
	broken := &Capacity{Providers: []capacity.Provider{describer{err: errors.New("throttled")}}}
	if _, err := broken.LostInstances(context.Background(), []capacity.Instance{on("fake", "i-run")}); err == nil {
		t.Error("a describe error was swallowed; the caller must retry, not take the instance as alive")
	}
}
