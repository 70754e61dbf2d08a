package devenv

import (
	"fmt"
	"strings"
	"time"
)

// GPUBusyShare is the GPU utilisation at or above which a GPU counts as
// in use: a notebook that holds a model in memory and waits shows 0%.
const GPUBusyShare = 0.1

// Sample is what the node agent sees of an environment's use at one
// moment.
type Sample struct {
	// Connections is how many established TCP connections the endpoint's
	// port has.
	Connections int `json:"connections"`
	// GPUUtilization is the busiest GPU's utilisation, 0 to 1, when
	// GPUKnown (nvidia-smi answered).
	GPUUtilization float64 `json:"gpu_utilization,omitempty"`
	GPUKnown       bool    `json:"gpu_known,omitempty"`
}

// Active reports whether the sample shows the environment in use: a
// connection to its endpoint, or a busy GPU. A GPU that could not be
// asked is no activity.
func (s Sample) Active() bool {
	return s.Connections > 0 || (s.GPUKnown && s.GPUUtilization >= GPUBusyShare)
}

// Activity is what is known of an environment's use: when the idle clock
// may start at the earliest (its command started), when the agent last
// saw it in use and whether it still does, and when the developer last
// touched it.
type Activity struct {
	Since      time.Time `json:"since"`
	LastActive time.Time `json:"last_active,omitzero"`
	// InUse is the agent's word that the environment is in use now: it
	// saw use within QuietAfter. No idle clock runs meanwhile; once the
	// agent says it went quiet, LastActive is when it last saw use.
	InUse     bool      `json:"in_use,omitempty"`
	LastTouch time.Time `json:"last_touch,omitzero"`
}

// Last is the latest of Since, LastActive and LastTouch: the idle clock
// runs from it.
func (a Activity) Last() time.Time {
	last := a.Since
	for _, t := range []time.Time{a.LastActive, a.LastTouch} {
		if t.After(last) {
			last = t
		}
	}
	return last
}

// IdleFor is how long the environment has gone unused at now: 0 while in
// use, and never negative (an agent's clock may run ahead of the
// workflow's).
func (a Activity) IdleFor(now time.Time) time.Duration {
	if a.InUse {
		return 0
	}
	return max(0, now.Sub(a.Last()))
}

// StopAt is when the environment stops for want of use if nothing
// happens meanwhile; ok is false for timeout 0 (never) and while it is
// in use.
func (a Activity) StopAt(timeout time.Duration) (at time.Time, ok bool) {
	if timeout <= 0 || a.InUse {
		return time.Time{}, false
	}
	return a.Last().Add(timeout), true
}

// Idle reports whether the environment has gone timeout without use at
// now; never for timeout 0.
func (a Activity) Idle(now time.Time, timeout time.Duration) bool {
	at, ok := a.StopAt(timeout)
	return ok && !now.Before(at)
}

// QuietAfter is how long after the last use the agent says an
// environment went quiet: a minute, so that use in bursts (a browser
// that connects now and then) is one stretch of use, but never more
// than a quarter of the idle timeout, which it delays.
func QuietAfter(idleTimeout time.Duration) time.Duration {
	if idleTimeout <= 0 {
		return time.Minute
	}
	return min(time.Minute, idleTimeout/4)
}

// IdleGrace is how long an environment may go unused before its held
// time counts as idle: a pause between two commands is work.
const IdleGrace = 5 * time.Minute

// SplitHeld splits an instance's time held from from to to into active
// and idle time, given the environment's activity over it: the part
// more than IdleGrace after the last use is idle, and none while it is
// in use. What the split says of time before the last use is active, as
// no sample says otherwise.
func SplitHeld(from, to time.Time, a Activity) (active, idle time.Duration) {
	if !to.After(from) {
		return 0, 0
	}
	if a.InUse {
		return to.Sub(from), 0
	}
	idleFrom := a.Last().Add(IdleGrace)
	switch {
	case !idleFrom.After(from):
		return 0, to.Sub(from)
	case !idleFrom.Before(to):
		return to.Sub(from), 0
	}
	return idleFrom.Sub(from), to.Sub(idleFrom)
}

// QuickExit is how soon after it starts a command may exit and still
// count as failing to start rather than ending by itself.
const QuickExit = 30 * time.Second

// CommandExit is how an environment's command ended by itself: not
// stopped, not preempted.
type CommandExit struct {
	Code int
	// Ran is how long it ran.
	Ran time.Duration
	// Served reports whether its endpoint ever answered.
	Served bool
	// Output is its last lines.
	Output string
}

// Verdict is what the exit means for the environment: a command that
// exits within QuickExit, or before its endpoint ever answered, failed
// to start, and the environment fails with its last lines (no retry
// starts it); one that served a while and ended (a developer shut
// JupyterLab down) suspends the environment, which resume starts again.
func (e CommandExit) Verdict() (State, string) {
	ran := e.Ran.Round(time.Second)
	if !e.Served || e.Ran < QuickExit {
		why := fmt.Sprintf("the command exited with code %d after %s", e.Code, ran)
		if !e.Served {
			why += ", before its endpoint ever answered"
		}
		if out := strings.TrimSpace(e.Output); out != "" {
			why += "; its last lines:\n" + out
		}
		return StateFailed, why
	}
	return StateSuspended, fmt.Sprintf("the command exited by itself with code %d after %s: resume starts it again", e.Code, ran)
}
