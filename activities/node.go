package activities

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"refuel/pkg/agent"
	"refuel/pkg/checkpoint"
	"refuel/pkg/trainer"
)

// Signaler is the part of a Temporal client the node agent needs to tell
// its run about progress.
type Signaler interface {
	SignalWorkflow(ctx context.Context, workflowID, runID, signalName string, arg any) error
}

var _ Signaler = client.Client(nil)

// Node is the training activity a node agent serves on its instance's own
// task queue: the workflow's way to run a job on exactly this machine.
type Node struct {
	InstanceID       string
	Dir              string // the instance's scratch space
	MetadataEndpoint string // IMDS-compatible endpoint for interruption notices
	DefaultStoreURL  string // checkpoint store for specs that name none
	Signaler         Signaler
	// SelfCommand runs this binary's subcommands; the demo trainer is
	// SelfCommand + "trainer".
	SelfCommand  []string
	DemoStepTime time.Duration
	Logger       *zap.Logger
	// ProgressSignal is the signal name that carries Progress to the run.
	ProgressSignal string
}

// RunTraining runs one attempt of a job under the node agent: restore the
// latest checkpoint, run the trainer, upload its checkpoints, report
// progress, and on an interruption notice or a stop request save a final
// checkpoint before returning. It returns normally in every such case;
// only agent-side failures (storage unreachable) are errors.
func (n *Node) RunTraining(ctx context.Context, in TrainingInput) (TrainingResult, error) {
	info := activity.GetInfo(ctx)
	store, err := checkpoint.Open(ctx, StoreURL(in.CheckpointURL, n.DefaultStoreURL), in.Spec.ID)
	if err != nil {
		return TrainingResult{}, err
	}
	defer store.Close()

	command, total := n.command(in)
	rep := &reporter{
		node: n, store: store, workflowID: info.WorkflowExecution.ID,
		progress: Progress{Attempt: in.Attempt, InstanceID: n.InstanceID, TotalSteps: total},
	}
	// Heartbeats go on after a stop request, while the trainer saves its
	// final checkpoint: the run waits for it and must not time it out.
	hbCtx, stopHeartbeats := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHeartbeats()
	go rep.heartbeat(hbCtx, ctx)

	dir := filepath.Join(n.Dir, fmt.Sprintf("attempt-%d", in.Attempt))
	res, err := agent.Run(ctx, agent.Config{
		Command:            command,
		Env:                envList(in.Spec.Env),
		Dir:                dir,
		Workdir:            in.Spec.Workdir,
		WorkdirBase:        n.Dir,
		Attempt:            in.Attempt,
		CheckpointInterval: in.CheckpointInterval,
		Store:              store,
		Keep:               in.Spec.Checkpoint.Keep,
		InstanceID:         n.InstanceID,
		JobID:              in.Spec.ID,
		MetadataEndpoint:   n.MetadataEndpoint,
		StopGrace:          in.StopGrace,
		OnEvent:            rep.onEvent,
	})
	if err != nil {
		return TrainingResult{}, err
	}
	if res.LogsErr != nil {
		n.Logger.Warn("the trainer's output did not all reach the store", zap.String("job", in.Spec.ID), zap.Int("attempt", in.Attempt), zap.Error(res.LogsErr))
	}
	out := TrainingResult{
		Outcome:      TrainingOutcome(res.Outcome),
		RestoredStep: res.RestoredStep,
		LastStep:     res.LastStep,
		TotalSteps:   total,
		ExitCode:     res.ExitCode,
		NoticeAt:     res.NoticeAt,
		LogsURL:      store.LogsURL(),
	}
	if res.LastCheckpoint != nil {
		out.LastCheckpoint = refOf(store, *res.LastCheckpoint)
		if res.Outcome == agent.Completed && len(in.Spec.Command) == 0 {
			out.ModelDigest = n.finalDigest(ctx, store, *res.LastCheckpoint, filepath.Join(dir, "final"))
		}
	}
	if res.Outcome == agent.Failed {
		why := fmt.Sprintf("trainer exited with code %d", res.ExitCode)
		if res.ExitCode < 0 {
			why = "trainer could not start"
		}
		out.Message = fmt.Sprintf("%s: %s\n(whole output: starter logs %s --attempt %d)", why, res.Stderr, in.Spec.ID, in.Attempt)
	}
	return out, nil
}

// envList is a JobSpec's env as the agent takes it, sorted by name so
// the trainer's environment is the same on every attempt.
func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, name := range slices.Sorted(maps.Keys(env)) {
		out = append(out, name+"="+env[name])
	}
	return out
}

// command is the trainer to run: the spec's, or the demo trainer sized by
// the spec's work. total is the demo trainer's step count (0 if unknown).
func (n *Node) command(in TrainingInput) ([]string, int64) {
	if len(in.Spec.Command) > 0 {
		return in.Spec.Command, 0
	}
	steps := trainer.StepsFor(in.Spec.Work.D(), n.DemoStepTime)
	every := max(1, trainer.StepsFor(in.CheckpointInterval, n.DemoStepTime))
	argv := append(append([]string{}, n.SelfCommand...), "trainer",
		"--steps", strconv.FormatInt(steps, 10),
		"--checkpoint-every", strconv.FormatInt(every, 10),
		"--step-time", n.DemoStepTime.String())
	return argv, steps
}

// finalDigest reads the demo trainer's final model back from the store
// into dir, so the run's result names exactly what was saved.
func (n *Node) finalDigest(ctx context.Context, store *checkpoint.Store, m checkpoint.Manifest, dir string) string {
	if err := store.Restore(ctx, m, dir); err != nil {
		return ""
	}
	model, err := trainer.ReadCheckpoint(dir)
	if err != nil {
		return ""
	}
	return model.Digest()
}

// reporter turns agent events into heartbeats (always) and progress
// signals (only the few events the run acts on, to keep its history short).
type reporter struct {
	node       *Node
	store      *checkpoint.Store
	workflowID string

	mu       sync.Mutex
	progress Progress
}

func (r *reporter) onEvent(e agent.Event) {
	r.mu.Lock()
	r.progress.Step = max(r.progress.Step, e.Step)
	if e.Total > 0 {
		r.progress.TotalSteps = e.Total
	}
	p := r.progress
	r.mu.Unlock()
	p.Time = e.Time
	switch e.Kind {
	case agent.EventRestored:
		p.Kind, p.Step = ProgressRestored, e.Step
	case agent.EventCheckpoint:
		p.Kind = ProgressCheckpoint
		if e.Checkpoint != nil {
			p.Checkpoint = refOf(r.store, *e.Checkpoint)
			p.Checkpoint.WriteSeconds = e.WriteTime.Seconds()
		}
	case agent.EventNotice:
		p.Kind = ProgressNotice
	case agent.EventRebalance:
		p.Kind = ProgressRebalance
	default:
		return
	}
	// A signal that cannot be sent is not fatal: the activity's result
	// carries the same facts when it returns.
	if err := r.node.Signaler.SignalWorkflow(context.Background(), r.workflowID, "", r.node.ProgressSignal, p); err != nil {
		r.node.Logger.Warn("progress signal not delivered", zap.String("kind", string(p.Kind)), zap.Error(err))
	}
}

// heartbeat reports progress every second; heartbeats are also how a
// stop request (pause, cancel) reaches the activity.
func (r *reporter) heartbeat(ctx, actx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		r.mu.Lock()
		p := r.progress
		r.mu.Unlock()
		activity.RecordHeartbeat(actx, p)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
