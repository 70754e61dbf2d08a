package workflows

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/pkg/capacity"
)

// Restarts counts, by cause, the times a run started training again
// after a fault: its trainer failed, its agent failed, or its instance
// went silent. Together they are capped by the spec's max_restarts.
// Preemptions the market announces are not faults and are not counted
// here; nor are losses refuel's own control plane caused (ControlPlane:
// a trainer its agent stopped because the cluster was away past the
// run's tolerance, trained again on the same instance), which are
// counted apart and capped by nothing.
type Restarts struct {
	Trainer      int `json:"trainer"`
	Agent        int `json:"agent"`
	InstanceLost int `json:"instance_lost"`
	ControlPlane int `json:"control-plane"`
	// NodeLost counts base machines that joined the pool (`worker join`)
	// and went silent under the run: capped by nothing, as the machine is
	// the team's, not a market's.
	NodeLost int `json:"node-lost"`
}

// Total is every restart a fault caused, the ones max_restarts caps.
func (c Restarts) Total() int { return c.Trainer + c.Agent + c.InstanceLost }

// lossCause says why an attempt that ended in an error lost its
// instance: its agent never picked the work up or failed on its side
// (a checkpoint store it cannot reach), or the instance went silent.
func lossCause(err error) capacity.Fault {
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) && timeout.TimeoutType() == enums.TIMEOUT_TYPE_SCHEDULE_TO_START {
		return capacity.AgentFault
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return capacity.AgentFault
	}
	return capacity.InstanceLost
}

// restart counts a fault of the given cause and, past the spec's
// max_restarts, ends the run with an error naming it. Otherwise it waits
// before the run acquires again, twice as long after each fault (with
// jitter, so runs that failed together do not come back together): a
// fault that repeats costs a few instances, not an endless loop of them.
func (r *run) restart(ctx workflow.Context, cause capacity.Fault, msg string) error {
	if err := r.countRestart(cause, msg); err != nil || !cause.Remedy().Restarts {
		return err // a fault that counts against nothing is no fault that repeats
	}
	if workflow.GetVersion(ctx, restartBackoffVersion, workflow.DefaultVersion, 1) < 1 {
		return nil
	}
	c := r.Restarts
	wait := jittered(r.opts.RestartBackoff<<min(c.Total()-1, 10), r.identity, r.Attempts)
	wait = min(wait, r.opts.MaxRestartBackoff)
	workflow.GetLogger(ctx).Warn("restarting after a fault", "cause", cause, "restarts", c.Total(), "wait", wait, "error", msg)
	// Only a pause cuts the wait short: a yield or a spent budget is
	// heeded when the run acquires again.
	_, err := waitFor(ctx, wait, "wait "+wait.Round(time.Second).String()+" before restarting ("+string(cause)+")", func() bool { return r.mustStop(ctx, stopYield, stopBudget) != goOn })
	return err
}

// countRestart counts a fault of the given cause and, past the spec's
// max_restarts, returns the error that ends the run. A fault that counts
// against nothing (capacity.FaultRemedy.Restarts) is not counted here.
func (r *run) countRestart(cause capacity.Fault, msg string) error {
	c := &r.Restarts
	remedy := cause.Remedy()
	if !remedy.Restarts {
		return nil
	}
	switch cause {
	case capacity.TrainerFault:
		c.Trainer++
	case capacity.AgentFault:
		c.Agent++
	default:
		c.InstanceLost++
	}
	if limit := r.spec.Restarts(); c.Total() > limit {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s after %d restarts (max_restarts %d; trainer %d, agent %d, instance lost %d); last: %s",
				remedy.Verdict, c.Total()-1, limit, c.Trainer, c.Agent, c.InstanceLost, msg),
			remedy.Type, nil)
	}
	return nil
}

// jittered is d give or take a fifth, by a fraction derived from the
// run's identity and attempt: spread across runs, the same on replay.
func jittered(d time.Duration, identity string, attempt int) time.Duration {
	h := fnv.New32a()
	h.Write([]byte(identity + "/" + strconv.Itoa(attempt)))
	f := float64(h.Sum32())/float64(1<<32)*0.4 - 0.2 // in [-0.2, 0.2)
	return d + time.Duration(f*float64(d))
}
