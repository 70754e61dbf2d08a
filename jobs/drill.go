package jobs

import (
	"context"
	"fmt"
	"io"
	"maps"
	"time"

	"refuel/workflows/training"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"refuel/activities"
	"refuel/pkg/spec"
	"refuel/pkg/trainer"
	"refuel/workflows"
)

// DrillReport is what `starter drill --json` prints (docs/contracts.md).
type DrillReport struct {
	Passed              bool    `json:"passed"`
	WorkflowID          string  `json:"workflow_id"`
	CheckpointStep      int64   `json:"checkpoint_step"`
	PreemptedAtStep     int64   `json:"preempted_at_step"`
	ResumedFromStep     int64   `json:"resumed_from_step"`
	LostSteps           int64   `json:"lost_steps"`
	ReplacementSeconds  float64 `json:"replacement_seconds"`
	RecoverySeconds     float64 `json:"recovery_seconds"`
	FinalIdentical      bool    `json:"final_identical"`
	InterruptedInstance string  `json:"interrupted_instance"`
	ReplacementInstance string  `json:"replacement_instance"`
	FinalDigest         string  `json:"final_digest"`
	ReferenceDigest     string  `json:"reference_digest"`
	Reason              string  `json:"reason,omitempty"`
	// Nodes is the drill job's gang size (--nodes); NodesReplaced the
	// nodes it replaced while the others waited: 1 for a gang's drill,
	// whose last rank alone is interrupted.
	Nodes         int `json:"nodes"`
	NodesReplaced int `json:"nodes_replaced"`
	// ShrunkTo is how many nodes an elastic gang (--min-nodes) trained on
	// after the drill took a node with nothing to replace it, and GrewTo
	// how many it grew back to once stock returned; 0 when it did not.
	ShrunkTo int `json:"shrunk_to,omitempty"`
	GrewTo   int `json:"grew_to,omitempty"`
}

// DrillOptions shape one drill.
type DrillOptions struct {
	Work        time.Duration // compute of the drill's job
	Interval    time.Duration // its checkpoint interval
	NoticeGrace time.Duration // how long the instance lives after the notice
	Timeout     time.Duration
	Progress    io.Writer // one line per stage, for people watching
	// DataConverter decodes the agent's reports (the client's, so that
	// encrypted ones read); nil is the default.
	DataConverter converter.DataConverter
	// Nodes makes the drill's job a gang of that many nodes (0 or 1: one
	// node); the drill interrupts its last rank's instance.
	Nodes int
	// MinNodes makes the gang elastic (resources.min_nodes): the drill
	// holds the interrupted node's market in its zone out of stock for Hold, so the
	// gang finds no replacement within ShrinkAfter, trains on without it,
	// and grows back once the hold ends.
	MinNodes    int
	ShrinkAfter time.Duration
	Hold        time.Duration
	// Tier is the drill job's tier; flexible (spot first) by default, for
	// a gang too: the sim reads its built-in one-node traces as stock for
	// every node alike, as starter sim does.
	Tier spec.Tier
}

// Drill runs the field's acceptance test against a running stack: a job
// saves a checkpoint, its instance is taken away, and refuel must get a
// replacement by itself and resume from the latest checkpoint, ending
// with exactly the model an uninterrupted run makes.
func Drill(ctx context.Context, c client.Client, o DrillOptions) (DrillReport, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	say := func(format string, args ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "drill: "+format+"\n", args...)
		}
	}
	js := spec.JobSpec{
		ID: fmt.Sprintf("drill-%s", time.Now().UTC().Format("20060102-150405.000")), Team: "drill", Tier: spec.TierFlexible,
		Priority: 50, Work: spec.Duration(o.Work), Checkpoint: spec.Checkpoint{Interval: o.Interval.String()},
	}
	if o.Nodes > 1 {
		js.Resources.Nodes = o.Nodes
	}
	elastic := o.Nodes > 1 && o.MinNodes > 0 && o.MinNodes < o.Nodes
	if elastic {
		js.Resources.MinNodes, js.Resources.ShrinkAfter = o.MinNodes, spec.Duration(o.ShrinkAfter)
	}
	if o.Tier != "" {
		js.Tier = o.Tier
	}
	if js.Tier == spec.TierDeadline {
		d := time.Now().Add(100 * o.Work) // slack enough to wait for spot
		js.Deadline = &d
	}
	js.Normalize()
	nodes := js.Resources.NodeCount()
	// A simulated market moves a tick a second: held still for the drill,
	// it cannot take the run's nodes while the drill measures a recovery.
	if err := holdMarket(ctx, c, "hold-market-"+js.ID, o.Timeout); err != nil {
		say("the market's clock could not be held still (%v): a tick may move it during the drill", err)
	} else {
		defer func() {
			rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = holdMarket(rctx, c, "release-market-"+js.ID, 0)
		}()
	}
	rep := DrillReport{WorkflowID: js.ID, Nodes: nodes}
	run, err := Submit(ctx, c, js)
	if err != nil {
		return rep, err
	}
	say("submitted %s; waiting for its first checkpoint", js.ID)
	st, err := WaitFor(ctx, c, js.ID, func(s training.Status) bool {
		return s.LastCheckpoint != nil && s.Instance != nil && s.State == workflows.StateRunning && (nodes == 1 || len(s.Nodes) == nodes)
	})
	if err != nil {
		return rep, err
	}
	rep.CheckpointStep = st.LastCheckpoint.Step
	// The agent's latest checkpoint, which the run may not have been told
	// yet.
	if now, err := StatusNow(ctx, c, o.DataConverter, js.ID); err == nil && now.LastCheckpoint != nil {
		rep.CheckpointStep = max(rep.CheckpointStep, now.LastCheckpoint.Step)
	}
	rep.InterruptedInstance = st.Instance.ID
	kept := map[int]string{} // a gang's ranks the drill leaves alone
	if nodes > 1 {
		last := st.Nodes[len(st.Nodes)-1]
		rep.InterruptedInstance = last.Instance.ID
		for _, n := range st.Nodes[:len(st.Nodes)-1] {
			kept[n.Rank] = n.Instance.ID
		}
		say("gang of %d nodes training; rank %d is on %s", nodes, last.Rank, last.Instance.ID)
	}
	say("checkpoint at step %d on %s; interrupting the instance (notice %s)", rep.CheckpointStep, rep.InterruptedInstance, o.NoticeGrace)

	var hold time.Duration
	if elastic {
		hold = o.Hold
		say("holding the stock of its market in its zone for %s: no replacement within shrink_after %s", hold, o.ShrinkAfter)
	}
	notice, err := interrupt(ctx, c, activities.InterruptInput{InstanceID: rep.InterruptedInstance, Grace: o.NoticeGrace, Hold: hold})
	if err != nil {
		return rep, err
	}
	rec, st, err := awaitRecovery(ctx, c, js.ID, rep.InterruptedInstance, notice)
	if err != nil {
		return rep, err
	}
	rep.CheckpointStep = max(rep.CheckpointStep, rec.CheckpointStep)
	rep.ReplacementInstance, rep.ReplacementSeconds, rep.RecoverySeconds = rec.ReplacementInstance, rec.ReplacementSeconds, rec.RecoverySeconds
	rep.PreemptedAtStep, rep.ResumedFromStep, rep.LostSteps = rec.PreemptedAtStep, rec.ResumedFromStep, rec.LostSteps
	say("resumed on %s from step %d, %.1fs after the notice; waiting for the end", rep.ReplacementInstance, rep.ResumedFromStep, rep.RecoverySeconds)

	var final training.Status
	if err := run.Get(ctx, &final); err != nil {
		return rep, fmt.Errorf("drill run %s: %w", js.ID, err)
	}
	rep.FinalDigest = final.ModelDigest
	rep.NodesReplaced = final.NodeReplacements
	// The demo trainer's defaults, uninterrupted, on as many nodes at
	// each step as the gang trained on: the reference model.
	widths := []trainer.Width{{From: 0, Nodes: nodes}}
	for _, r := range final.Ledger.Resizes {
		widths = append(widths, trainer.Width{From: r.Step, Nodes: r.To})
		if r.To < r.From && rep.ShrunkTo == 0 {
			rep.ShrunkTo = r.To
		}
		if r.To > r.From && rep.ShrunkTo > 0 {
			rep.GrewTo = r.To
		}
	}
	rep.ReferenceDigest = trainer.TrainWidths(trainer.Config{Steps: final.TotalSteps, Seed: trainer.DefaultSeed}, widths).Digest()
	rep.FinalIdentical = rep.FinalDigest != "" && rep.FinalDigest == rep.ReferenceDigest
	switch {
	case !rep.FinalIdentical:
		rep.Reason = "the final model differs from an uninterrupted run's"
	case elastic && rep.ShrunkTo != nodes-1:
		rep.Reason = fmt.Sprintf("the elastic gang did not train on without its lost node (shrunk to %d; want %d)", rep.ShrunkTo, nodes-1)
	case elastic && rep.GrewTo != nodes:
		rep.Reason = fmt.Sprintf("the elastic gang did not grow back to %d nodes before it finished (grew to %d): give it more --work or a shorter --hold", nodes, rep.GrewTo)
	case !elastic && nodes > 1 && rep.NodesReplaced < 1:
		rep.Reason = "the gang was not kept: no node was replaced while the others waited"
	case nodes > 1 && !maps.Equal(kept, gangAt(st, nodes)):
		rep.Reason = fmt.Sprintf("the ranks the drill left alone moved: %v before, %v after", kept, gangAt(st, nodes))
	case rep.ResumedFromStep < rep.CheckpointStep:
		rep.Reason = "resumed from before the checkpoint the drill saw"
	case rep.ReplacementInstance == rep.InterruptedInstance:
		rep.Reason = "no replacement instance was acquired"
	default:
		rep.Passed = true
	}
	say("final model %s identical=%v", short(rep.FinalDigest), rep.FinalIdentical)
	return rep, nil
}

// gangAt is the instance of each rank of a gang of nodes but the last,
// as its status shows them (an elastic gang may train on fewer).
func gangAt(st training.Status, nodes int) map[int]string {
	m := map[int]string{}
	for _, n := range st.Nodes {
		if n.Instance != nil && n.Rank < nodes-1 {
			m[n.Rank] = n.Instance.ID
		}
	}
	return m
}

func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}
