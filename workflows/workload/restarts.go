package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/pkg/capacity"
)

// Restarts counts, by fault, the times a run trained again after one:
// its trainer failed, its agent failed, its instance went silent, its
// base machine was lost, or refuel's own control plane lost touch with a
// trainer (a trainer its agent stopped because the cluster was away past
// the run's tolerance, trained again on the same instance). The fault
// table (capacity.FaultRemedy) says which of them max_restarts caps
// (Total) and the key each is counted under in status.restarts, where
// every counted fault appears, 0 or not. Preemptions the market
// announces are not faults and are not counted here.
type Restarts map[capacity.Fault]int

// Total is every restart a fault caused, the ones max_restarts caps.
func (c Restarts) Total() int {
	n := 0
	for _, f := range capacity.Faults {
		if f.Remedy().Restarts {
			n += c[f]
		}
	}
	return n
}

// Add counts n restarts after fault f (a fault this build does not know
// as the one it is handled as).
func (c *Restarts) Add(f capacity.Fault, n int) {
	if *c == nil {
		*c = Restarts{}
	}
	(*c)[f.Known()] += n
}

// MarshalJSON writes every fault status.restarts counts under its key,
// in the table's order.
func (c Restarts) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for _, f := range capacity.Faults {
		key := f.Remedy().Key
		if key == "" {
			continue
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, key)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(c[f]), 10)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads the counts by key; a key this build does not know
// is counted as the fault it is handled as.
func (c *Restarts) UnmarshalJSON(data []byte) error {
	var byKey map[string]int
	if err := json.Unmarshal(data, &byKey); err != nil {
		return err
	}
	*c = nil
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		f, ok := capacity.FaultOfKey(key)
		if !ok {
			f = capacity.Fault(key)
		}
		if n := byKey[key]; n != 0 {
			c.Add(f, n)
		}
	}
	return nil
}

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
// max_restarts, ends the workload with an error naming it. Otherwise,
// for a fault max_restarts caps, it waits before the workload acquires
// again, twice as long after each fault (with jitter, so workloads that
// failed together do not come back together): a fault that repeats
// costs a few instances, not an endless loop of them.
func (rc recovery) restart(ctx workflow.Context, cause capacity.Fault, msg string) error {
	w := rc.w
	if err := rc.CountRestart(cause, msg); err != nil || !cause.Remedy().Restarts {
		return err // a fault that counts against nothing is no fault that repeats
	}
	if workflow.GetVersion(ctx, restartBackoffVersion, workflow.DefaultVersion, 1) < 1 {
		return nil
	}
	c := w.Counts.Restarts
	wait := jittered(w.Opts.RestartBackoff<<min(c.Total()-1, 10), w.Identity, w.Held.Attempts)
	wait = min(wait, w.Opts.MaxRestartBackoff)
	workflow.GetLogger(ctx).Warn("restarting after a fault", "cause", cause, "restarts", c.Total(), "wait", wait, "error", msg)
	// Only a pause cuts the wait short: a yield or a spent budget is
	// heeded when the workload acquires again.
	_, err := WaitFor(ctx, wait, "wait "+wait.Round(time.Second).String()+" before restarting ("+string(cause)+")", func() bool { return w.Host.MustStop(ctx, StopYield, StopBudget) != GoOn })
	return err
}

// CountRestart counts a fault of the given cause under its key in
// status.restarts and, past the spec's max_restarts for a fault it caps,
// returns the error that ends the workload. A fault with no key there
// (one that ends the workload) is not counted.
func (rc recovery) CountRestart(cause capacity.Fault, msg string) error {
	w := rc.w
	remedy := cause.Remedy()
	if remedy.Key == "" {
		return nil
	}
	w.Counts.Restarts.Add(cause, 1)
	if limit := w.Spec.Restarts(); remedy.Restarts && w.Counts.Restarts.Total() > limit {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s after %d restarts (max_restarts %d; %s); last: %s",
				remedy.Verdict, w.Counts.Restarts.Total()-1, limit, w.Counts.Restarts.Capped(), msg),
			remedy.Type, nil)
	}
	return nil
}

// Any reports whether the run trained again after any fault.
func (c Restarts) Any() bool {
	for _, f := range capacity.Faults {
		if c[f] > 0 {
			return true
		}
	}
	return false
}

// Capped is the restarts max_restarts caps, in the table's order, as a
// person reads them: "trainer 1, agent 0, instance lost 2".
func (c Restarts) Capped() string { return c.Line(true) }

// Uncapped is the restarts max_restarts does not cap: "control plane 2,
// node lost 0".
func (c Restarts) Uncapped() string { return c.Line(false) }

func (c Restarts) Line(capped bool) string {
	var parts []string
	for _, f := range capacity.Faults {
		if rm := f.Remedy(); rm.Key != "" && rm.Restarts == capped {
			parts = append(parts, strings.ReplaceAll(string(f), "-", " ")+" "+strconv.Itoa(c[f]))
		}
	}
	return strings.Join(parts, ", ")
}

// jittered is d give or take a fifth, by a fraction derived from the
// run's identity and attempt: spread across runs, the same on replay.
func jittered(d time.Duration, identity string, attempt int) time.Duration {
	h := fnv.New32a()
	h.Write([]byte(identity + "/" + strconv.Itoa(attempt)))
	f := float64(h.Sum32())/float64(1<<32)*0.4 - 0.2 // in [-0.2, 0.2)
	return d + time.Duration(f*float64(d))
}
