// Package joined is the base group as the machines that joined it
// (`worker join`): a provider whose "instances" are places on those
// machines. Acquiring one launches nothing: the machine's process
// already serves its own task queue, and the instance is the run's turn
// on it. The capacity pool decides which run goes on which machine; the
// provider only says whether the machine is there.
package joined

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

// Machine is a joined machine as the directory knows it.
type Machine struct {
	Name      string
	TaskQueue string
	// Present is false once the machine was lost or left.
	Present bool
}

// NotJoinedError says no machine of the name has joined.
type NotJoinedError struct{ Name string }

func (e *NotJoinedError) Error() string {
	return fmt.Sprintf("no machine %q has joined the base group", e.Name)
}

// Directory finds joined machines by name. Machine returns a
// *NotJoinedError for a name that never joined.
type Directory interface {
	Machine(ctx context.Context, name string) (Machine, error)
}

// Cloud is the provider. Safe for concurrent use if its Directory is.
type Cloud struct {
	name string
	dir  Directory
	now  func() time.Time
}

var _ capacity.Provider = (*Cloud)(nil)

// New returns the provider named name (the base group's provider).
func New(name string, dir Directory) *Cloud {
	return &Cloud{name: name, dir: dir, now: time.Now}
}

// Name implements capacity.Provider.
func (c *Cloud) Name() string { return c.name }

// Offerings implements capacity.Provider: none of its own. A run is
// granted a joined machine's offering by the capacity pool.
func (c *Cloud) Offerings(context.Context, spec.Resources) ([]capacity.Offering, error) {
	return nil, nil
}

// Acquire implements capacity.Provider: the instance is the run's turn
// on the machine its request is tagged with, served on the machine's
// task queue. Its ID is derived from the request's idempotency token, so
// asked again it is the same instance.
func (c *Cloud) Acquire(ctx context.Context, req capacity.Request) (capacity.Instance, error) {
	if len(req.Offerings) == 0 {
		return capacity.Instance{}, capacity.NewError(capacity.SpecMismatch, capacity.Offering{Provider: c.name}, "", "the request named no offerings")
	}
	o := req.Offerings[0]
	name := req.Tags[capacity.TagNode]
	if name == "" {
		return capacity.Instance{}, capacity.NewError(capacity.SpecMismatch, o, "", "machines that joined the base group are granted by the capacity pool; the request names none")
	}
	m, err := c.dir.Machine(ctx, name)
	var nj *NotJoinedError
	switch {
	case errors.As(err, &nj):
		return capacity.Instance{}, capacity.NewError(capacity.NoCapacity, o, "NotJoined", "%v", err)
	case err != nil:
		return capacity.Instance{}, capacity.NewError(capacity.Unknown, o, "", "base machine %s: %v", name, err)
	case !m.Present:
		return capacity.Instance{}, capacity.NewError(capacity.NoCapacity, o, "MachineGone", "base machine %s is lost or left the pool", name)
	}
	sum := sha256.Sum256([]byte(req.IdempotencyToken()))
	tags := map[string]string{
		capacity.TagManagedBy: capacity.ManagedBy, capacity.TagRun: req.RunID, capacity.TagAttempt: fmt.Sprint(req.Attempt), capacity.TagJoined: "true",
	}
	for k, v := range req.Tags {
		tags[k] = v
	}
	return capacity.Instance{
		ID: name + idSeparator + hex.EncodeToString(sum[:6]), Offering: o, TaskQueue: m.TaskQueue, LaunchedAt: c.now(), Tags: tags,
	}, nil
}

// idSeparator parts an instance ID into its machine and the turn on it;
// machine names never hold it.
const idSeparator = "@"

// machineOf is the machine an instance ID names.
func machineOf(id string) (string, bool) {
	name, _, ok := strings.Cut(id, idSeparator)
	return name, ok && name != ""
}

// Release implements capacity.Provider: the machine stays; the run's
// turn on it ends.
func (c *Cloud) Release(context.Context, string) error { return nil }

// Describe implements capacity.Provider: running while the machine is
// in the pool, terminated once it was lost or left.
func (c *Cloud) Describe(ctx context.Context, id string) (capacity.Instance, capacity.State, error) {
	name, ok := machineOf(id)
	if !ok {
		return capacity.Instance{}, capacity.StateTerminated, &capacity.NotFoundError{ID: id}
	}
	m, err := c.dir.Machine(ctx, name)
	var nj *NotJoinedError
	switch {
	case errors.As(err, &nj):
		return capacity.Instance{}, capacity.StateTerminated, &capacity.NotFoundError{ID: id}
	case err != nil:
		return capacity.Instance{}, capacity.StatePending, err
	case !m.Present:
		return capacity.Instance{ID: id, TaskQueue: m.TaskQueue}, capacity.StateTerminated, nil
	}
	return capacity.Instance{ID: id, TaskQueue: m.TaskQueue}, capacity.StateRunning, nil
}

// List implements capacity.Provider: a joined machine holds nothing the
// janitor could give back.
func (c *Cloud) List(context.Context, map[string]string) ([]capacity.Instance, error) {
	return nil, nil
}
