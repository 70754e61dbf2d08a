// Package devenv is what a development environment's workflow, its node
// agent and its clients share: the environment's states and status, and
// the pure judgements of its life (is it idle, when does it stop, what
// did its command's exit mean, which of its hours were idle). It knows
// nothing of Temporal: the DevEnvironment workflow calls it with
// workflow time, the agent with the clock.
package devenv

import (
	"net"
	"strconv"
)

// State is where an environment is in its life (status.state and the
// RefuelState search attribute).
type State string

const (
	// StatePending: waiting for capacity, or for its command to answer.
	StatePending State = "pending"
	// StateRunning: its command serves at the endpoint.
	StateRunning State = "running"
	// StateSuspended: stopped (asked to, idle past its timeout, over
	// budget or its command ended by itself); the workspace is saved, no
	// instance is held, and resume acquires again.
	StateSuspended State = "suspended"
	// StateMoving: leaving its instance (an interruption notice, or the
	// pool gave its capacity to higher-priority work) for another,
	// workspace and all.
	StateMoving State = "moving"
	// StateFailed: it cannot run (its command exits at once, its
	// workspace cannot be restored, too many failures).
	StateFailed State = "failed"
	// StateDeleted: deleted; with its workspace unless that was kept.
	StateDeleted State = "deleted"
)

// States lists every state, in the order of an environment's life.
var States = []State{StatePending, StateRunning, StateSuspended, StateMoving, StateFailed, StateDeleted}

// Ended reports whether an environment in state s has ended for good.
func (s State) Ended() bool { return s == StateFailed || s == StateDeleted }

// Endpoint is where a developer connects: host:port, with an IPv6 host
// in brackets.
func Endpoint(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// DeleteRequest is the payload of the delete signal.
type DeleteRequest struct {
	// KeepWorkspace leaves the workspace in the store: an environment
	// started again with the same id restores it.
	KeepWorkspace bool `json:"keep_workspace,omitempty"`
}

// MemoWho is the memo key under which `starter dev up` records who
// started an environment (user@host); the workflow reports it as
// status.who.
const MemoWho = "who"

// Environment variables of the command, beside the trainer contract's
// (see package agent).
const (
	// EnvPort is the port the command listens on.
	EnvPort = "REFUEL_PORT"
	// EnvWorkspace is the absolute path of the workspace, which is also
	// the command's working directory.
	EnvWorkspace = "REFUEL_WORKSPACE"
)
