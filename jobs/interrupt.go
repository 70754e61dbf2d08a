package jobs

import (
	"context"
	"fmt"
	"io"
	"time"

	"refuel/workflows/training"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"refuel/activities"
	"refuel/workflows"
)

// Interrupt takes an instance away through the InjectInterruption
// workflow, so drills work against any cluster the worker serves. It
// returns when the notice was served.
func Interrupt(ctx context.Context, c client.Client, instanceID string, grace time.Duration) (time.Time, error) {
	return interrupt(ctx, c, activities.InterruptInput{InstanceID: instanceID, Grace: grace})
}

// drillStill is how long the simulated cloud's market stands still from
// the notice `starter interrupt` serves: time enough for the run to
// recover, so the report measures refuel's recovery, not the next tick's
// stock (the market moves a tick a second there). The drill holds it
// still for the whole drill.
const drillStill = 2 * time.Minute

// holdMarket holds the simulated market's clock still for d from now,
// or lets it go (d 0), on the clouds that have such a clock; the others
// ignore it. id names the workflow that carries it.
func holdMarket(ctx context.Context, c client.Client, id string, d time.Duration) error {
	_, err := inject(ctx, c, id, activities.InterruptInput{Still: d})
	return err
}

// interrupt is Interrupt of any input: one that holds stock too.
func interrupt(ctx context.Context, c client.Client, in activities.InterruptInput) (time.Time, error) {
	res, err := inject(ctx, c, "interrupt-"+in.InstanceID, in)
	if err != nil {
		return time.Time{}, fmt.Errorf("interrupt %s: %w", in.InstanceID, err)
	}
	return res.NoticeAt, nil
}

// inject runs the InjectInterruption workflow id on in and waits for it.
func inject(ctx context.Context, c client.Client, id string, in activities.InterruptInput) (activities.InterruptResult, error) {
	var res activities.InterruptResult
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.InjectInterruptionName, in)
	if err == nil {
		err = run.Get(ctx, &res)
	}
	return res, err
}

// Recovery is how a run came back from the loss of one instance, timed
// from the interruption notice.
type Recovery struct {
	// CheckpointStep is the latest checkpoint the run knew of when it
	// lost the instance: the one it must resume from, or a newer one
	// saved on the notice.
	CheckpointStep      int64
	ReplacementInstance string
	ReplacementSeconds  float64
	RecoverySeconds     float64
	PreemptedAtStep     int64
	ResumedFromStep     int64
	LostSteps           int64
}

// awaitRecovery waits until run id resumes on another instance after the
// preemption of instance, whose notice was served at notice. On a real or
// simulated spot market the run may already have been preempted and
// recovered before: only a recovery that follows the preemption of this
// instance counts; a move or a yield the pool asked for meanwhile is a
// recovery too, but not this one.
func awaitRecovery(ctx context.Context, c client.Client, id, instance string, notice time.Time) (Recovery, training.Status, error) {
	st, err := WaitFor(ctx, c, id, func(s training.Status) bool {
		p, r := s.LastPreemption, s.LastRecovery
		return p != nil && p.InstanceID == instance && r != nil && !r.ResumedAt.IsZero() &&
			!r.ResumedAt.Before(p.Time) && r.InstanceID != instance
	})
	if err != nil {
		return Recovery{}, st, fmt.Errorf("%w; it did not resume on another instance after %s was taken (%s)", err, instance, recoverySeen(st))
	}
	rec := Recovery{
		ReplacementInstance: st.LastRecovery.InstanceID,
		ReplacementSeconds:  st.LastRecovery.ReplacementAt.Sub(notice).Seconds(),
		RecoverySeconds:     st.LastRecovery.ResumedAt.Sub(notice).Seconds(),
		ResumedFromStep:     st.LastRecovery.ResumedFromStep,
		PreemptedAtStep:     st.LastPreemption.AtStep,
		CheckpointStep:      st.LastPreemption.CheckpointStep,
	}
	rec.LostSteps = max(0, rec.PreemptedAtStep-rec.ResumedFromStep)
	return rec, st, nil
}

// recoverySeen says what the run last recorded of a loss and a
// recovery, for a drill that waited in vain.
func recoverySeen(st training.Status) string {
	seen := "no preemption recorded"
	if p := st.LastPreemption; p != nil {
		seen = fmt.Sprintf("last preemption: %s at step %d", p.InstanceID, p.AtStep)
	}
	if r := st.LastRecovery; r != nil {
		seen += fmt.Sprintf("; last recovery: onto %s from step %d", r.InstanceID, r.ResumedFromStep)
	}
	return seen
}

// InterruptReport is what `starter interrupt --json` prints: the drill's
// report of one interruption, of a run that was already running.
type InterruptReport struct {
	Passed              bool    `json:"passed"`
	WorkflowID          string  `json:"workflow_id"`
	Node                int     `json:"node"` // the rank interrupted; 0 for a one-node run
	CheckpointStep      int64   `json:"checkpoint_step"`
	PreemptedAtStep     int64   `json:"preempted_at_step"`
	ResumedFromStep     int64   `json:"resumed_from_step"`
	LostSteps           int64   `json:"lost_steps"`
	ReplacementSeconds  float64 `json:"replacement_seconds"`
	RecoverySeconds     float64 `json:"recovery_seconds"`
	InterruptedInstance string  `json:"interrupted_instance"`
	ReplacementInstance string  `json:"replacement_instance"`
	Reason              string  `json:"reason,omitempty"`
}

// InterruptOptions shape one interruption.
type InterruptOptions struct {
	Node     int           // the gang rank whose instance is taken; 0 for a one-node run
	Grace    time.Duration // how long the instance lives after the notice
	Timeout  time.Duration // how long to wait for the recovery
	Progress io.Writer     // one line per stage, for people watching
	// DataConverter decodes the agent's reports (the client's, so that
	// encrypted ones read); nil is the default.
	DataConverter converter.DataConverter
}

// NotHoldingError says a run holds no instance to interrupt.
type NotHoldingError struct {
	ID, State string
	Node      int
}

func (e *NotHoldingError) Error() string {
	return fmt.Sprintf("%s holds no instance for rank %d now (state %s): interrupt it while it runs", e.ID, e.Node, e.State)
}

// InterruptRun serves a real interruption notice to the instance a
// running training run holds (a gang's rank opts.Node), then waits for
// the run to get a replacement by itself and resume from its latest
// checkpoint, and reports it as the drill does.
func InterruptRun(ctx context.Context, c client.Client, id string, o InterruptOptions) (InterruptReport, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	say := func(format string, args ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "interrupt: "+format+"\n", args...)
		}
	}
	rep := InterruptReport{WorkflowID: id, Node: o.Node}
	w, err := RequireType(ctx, c, id, workflows.TrainingRunName, "only a training run's instance is interrupted this way")
	if err != nil {
		return rep, err
	}
	if !w.Running {
		return rep, fmt.Errorf("%s has ended: there is no instance to interrupt", id)
	}
	// The checkpoint is the agent's latest, which the run may not have
	// been told yet.
	st, err := StatusNow(ctx, c, o.DataConverter, id)
	if err != nil {
		return rep, err
	}
	instance, err := instanceOf(st, o.Node)
	if err != nil {
		return rep, err
	}
	rep.InterruptedInstance = instance
	if ck := st.LastCheckpoint; ck != nil {
		rep.CheckpointStep = ck.Step
	}
	say("%s rank %d is on %s, last checkpoint at step %d; serving the notice (grace %s)", id, o.Node, instance, rep.CheckpointStep, o.Grace)
	notice, err := interrupt(ctx, c, activities.InterruptInput{InstanceID: instance, Grace: o.Grace, Still: drillStill})
	if err != nil {
		return rep, err
	}
	rec, _, err := awaitRecovery(ctx, c, id, instance, notice)
	if err != nil {
		return rep, err
	}
	rep.CheckpointStep = max(rep.CheckpointStep, rec.CheckpointStep)
	rep.ReplacementInstance, rep.ReplacementSeconds, rep.RecoverySeconds = rec.ReplacementInstance, rec.ReplacementSeconds, rec.RecoverySeconds
	rep.PreemptedAtStep, rep.ResumedFromStep, rep.LostSteps = rec.PreemptedAtStep, rec.ResumedFromStep, rec.LostSteps
	say("resumed on %s from step %d, %.1fs after the notice", rep.ReplacementInstance, rep.ResumedFromStep, rep.RecoverySeconds)
	switch {
	case rep.ResumedFromStep < rep.CheckpointStep:
		rep.Reason = "resumed from before the checkpoint seen at the notice"
	default:
		rep.Passed = true
	}
	return rep, nil
}

// instanceOf is the instance rank node of a run holds.
func instanceOf(st training.Status, node int) (string, error) {
	if st.State != workflows.StateRunning {
		return "", &NotHoldingError{ID: st.ID, State: string(st.State), Node: node}
	}
	if len(st.Nodes) == 0 {
		if node != 0 {
			return "", fmt.Errorf("--node %d: %s is a one-node run; its only rank is 0", node, st.ID)
		}
		if st.Instance == nil {
			return "", &NotHoldingError{ID: st.ID, State: string(st.State), Node: node}
		}
		return st.Instance.ID, nil
	}
	for _, n := range st.Nodes {
		if n.Rank == node {
			if n.Instance == nil {
				return "", &NotHoldingError{ID: st.ID, State: string(st.State), Node: node}
			}
			return n.Instance.ID, nil
		}
	}
	return "", fmt.Errorf("--node %d: %s is a gang of %d nodes, ranks 0..%d", node, st.ID, len(st.Nodes), len(st.Nodes)-1)
}
