package agent

import (
	"context"
	"errors"
	"sync"
)

// ErrMachineGone is what Run returns when its Machine was killed: the
// instance is gone, and so is everything the run would have reported.
var ErrMachineGone = errors.New("agent: the instance is gone")

// Machine is the life of an instance whose agent runs inside another
// process, as a virtual instance's does in its cloud's: what the power of a
// real machine is to an agent process. Kill is the power going off: every
// Run on the machine kills its trainer at once, uploads and reports nothing
// more, and returns ErrMachineGone; Runs started after it return that at
// once. A nil *Machine is never killed. Safe for concurrent use.
type Machine struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	killed bool
	runs   sync.WaitGroup
}

// NewMachine returns a machine that runs until Kill.
func NewMachine() *Machine {
	ctx, cancel := context.WithCancel(context.Background())
	return &Machine{ctx: ctx, cancel: cancel}
}

// Kill ends every Run on the machine and returns once they have returned.
// It may be called more than once.
func (m *Machine) Kill() {
	m.mu.Lock()
	m.killed = true
	m.mu.Unlock()
	m.cancel()
	m.runs.Wait()
}

// enter counts a Run on the machine; false when it is gone already.
func (m *Machine) enter() bool {
	if m == nil {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.killed {
		return false
	}
	m.runs.Add(1)
	return true
}

func (m *Machine) leave() {
	if m != nil {
		m.runs.Done()
	}
}

// gone is closed once the machine is killed; nil (never ready) for a nil
// machine.
func (m *Machine) gone() <-chan struct{} {
	if m == nil {
		return nil
	}
	return m.ctx.Done()
}

// Lost reports whether the machine was killed.
func (m *Machine) Lost() bool {
	return m != nil && m.ctx.Err() != nil
}

// bound is ctx, also cancelled when the machine is killed.
func (m *Machine) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	if m == nil {
		return ctx, func() { cancel(nil) }
	}
	stop := context.AfterFunc(m.ctx, func() { cancel(ErrMachineGone) })
	return ctx, func() {
		stop()
		cancel(nil)
	}
}
