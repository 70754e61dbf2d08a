package activities

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
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
	// DemoTrainer, when set, is the demo trainer run in the agent's own
	// process (a virtual instance's, whose SelfCommand is empty) instead
	// of SelfCommand's; a job's own command runs as a process either way.
	DemoTrainer agent.Func
	// Notices and Machine are a virtual instance's: its notices read
	// in-process, and its life (see agent.Config).
	Notices agent.NoticeSource
	Machine *agent.Machine

	mu       sync.Mutex
	attempts map[attemptKey]*trainerRun
}

// RunTraining runs one attempt of a job under the node agent: restore the
// latest checkpoint, run the trainer, upload its checkpoints, report
// progress, and on an interruption notice or a stop request save a final
// checkpoint before returning. It returns normally in every such case;
// only agent-side failures (storage unreachable) are errors.
//
// With push control (TrainingInput.Control) the trainer is the agent's,
// not the activity's: StopTraining stops it, and a RunTraining the run
// lets go of (it continued as new) leaves it training, for the next
// RunTraining of the same attempt to attach to.
func (n *Node) RunTraining(ctx context.Context, in TrainingInput) (TrainingResult, error) {
	t, err := n.attach(ctx, in, activity.GetInfo(ctx).WorkflowExecution.ID)
	if err != nil {
		return TrainingResult{}, err
	}
	// Heartbeats go on after a stop request, while the trainer saves its
	// final checkpoint: the run waits for it and must not time it out.
	hbCtx, stopHeartbeats := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHeartbeats()
	go t.rep.heartbeat(hbCtx, ctx, heartbeatEvery(in))
	select {
	case <-t.done:
		return t.result, t.err
	case <-ctx.Done():
		if in.Control != ControlPush {
			// Runs recorded before push control stop an attempt by
			// cancelling this activity.
			t.stop()
			<-t.done
			return t.result, t.err
		}
		n.letGo(t)
		return TrainingResult{}, ctx.Err()
	}
}

// StopTraining asks the trainer of an attempt to stop at a checkpoint;
// the attempt's RunTraining then returns how it ended. An attempt that
// already ended, or that this agent never ran, is left as it is.
func (n *Node) StopTraining(_ context.Context, in StopInput) error {
	n.mu.Lock()
	t := n.attempts[attemptKey{in.JobID, in.Attempt}]
	n.mu.Unlock()
	if t != nil {
		t.stop()
	}
	return nil
}

// attemptKey names one attempt of one job.
type attemptKey struct {
	job     string
	attempt int
}

// trainerRun is one attempt's trainer under the agent.
type trainerRun struct {
	rep    *reporter
	stop   context.CancelFunc // stops the trainer at a checkpoint
	done   chan struct{}      // closed once result and err are set
	result TrainingResult
	err    error

	mu     sync.Mutex
	orphan *time.Timer // stops a trainer no run attaches to again
}

// lettingGoGrace is how long a trainer the run let go of trains on,
// waiting for the run's next RunTraining to attach, before the agent
// stops it at a checkpoint: a run that continued as new attaches within
// moments; one that was terminated never will.
const lettingGoGrace = 5 * time.Minute

// keepResult is how long the agent remembers how an attempt ended, for a
// run that continued as new while it ended to attach and read it.
const keepResult = 10 * time.Minute

// attach returns the attempt's trainer, starting it the first time.
func (n *Node) attach(ctx context.Context, in TrainingInput, workflowID string) (*trainerRun, error) {
	key := attemptKey{in.Spec.ID, in.Attempt}
	n.mu.Lock()
	defer n.mu.Unlock()
	if t := n.attempts[key]; t != nil {
		t.mu.Lock()
		if t.orphan != nil {
			t.orphan.Stop()
			t.orphan = nil
		}
		t.mu.Unlock()
		return t, nil
	}
	store, err := checkpoint.Open(ctx, StoreURL(in.CheckpointURL, n.DefaultStoreURL), in.Spec.ID)
	if err != nil {
		return nil, err
	}
	_, total := n.command(in)
	trainCtx, stop := context.WithCancel(context.Background())
	t := &trainerRun{
		rep: &reporter{
			node: n, store: store, workflowID: workflowID, signalEvery: in.SignalEvery,
			progress: Progress{Attempt: in.Attempt, InstanceID: n.InstanceID, TotalSteps: total},
		},
		stop: stop,
		done: make(chan struct{}),
	}
	if n.attempts == nil {
		n.attempts = map[attemptKey]*trainerRun{}
	}
	n.attempts[key] = t
	go func() {
		defer store.Close()
		t.result, t.err = n.train(trainCtx, in, store, t.rep)
		t.rep.flush()
		stop()
		close(t.done)
		time.AfterFunc(keepResult, func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			if n.attempts[key] == t {
				delete(n.attempts, key)
			}
		})
	}()
	return t, nil
}

// letGo leaves a trainer training for its run's next RunTraining, and
// stops it if none comes.
func (n *Node) letGo(t *trainerRun) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.orphan == nil {
		t.orphan = time.AfterFunc(lettingGoGrace, func() {
			n.Logger.Warn("no run attached to the trainer again: stopping it at a checkpoint")
			t.stop()
		})
	}
}

// heartbeatEvery is how often RunTraining heartbeats for the input.
func heartbeatEvery(in TrainingInput) time.Duration {
	if in.HeartbeatEvery > 0 {
		return in.HeartbeatEvery
	}
	return time.Second
}

// train runs the attempt's trainer until it ends or ctx is done (a stop
// at a checkpoint) and says how it ended.
func (n *Node) train(ctx context.Context, in TrainingInput, store *checkpoint.Store, rep *reporter) (TrainingResult, error) {
	command, total := n.command(in)
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
		RestartFromScratch: in.Spec.Checkpoint.RestartFromScratch,
		Keep:               in.Spec.Checkpoint.Keep,
		InstanceID:         n.InstanceID,
		JobID:              in.Spec.ID,
		MetadataEndpoint:   n.MetadataEndpoint,
		StopGrace:          in.StopGrace,
		OnEvent:            rep.onEvent,
		Func:               n.demoFunc(in),
		Notices:            n.Notices,
		Machine:            n.Machine,
		Gang:               agent.Gang{Rank: in.Gang.Rank, Nodes: in.Gang.Nodes, MasterAddr: in.Gang.MasterAddr, MasterPort: in.Gang.MasterPort},
	})
	if errors.Is(err, agent.ErrMachineGone) {
		// The instance is gone: like a machine without power, it answers
		// nothing, and the run learns it from the missing heartbeats.
		return TrainingResult{}, activity.ErrResultPending
	}
	var none *checkpoint.NotFoundError
	if errors.As(err, &none) && len(none.Skipped) > 0 {
		// The run fails with class checkpoint: no retry brings the work
		// back, and training from step 0 must be asked for.
		return TrainingResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"%v, the newest: %v; put a good checkpoint back in the store, or set checkpoint.restart_from_scratch: true to train again from step 0",
			none, none.Skipped[0]), "checkpoint", nil)
	}
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
		// The final model is rank 0's: another rank's last checkpoint is
		// the one it restored.
		if res.Outcome == agent.Completed && len(in.Spec.Command) == 0 && in.Gang.Rank == 0 {
			out.ModelDigest = n.finalDigest(context.WithoutCancel(ctx), store, *res.LastCheckpoint, filepath.Join(dir, "final"))
		}
	}
	switch res.Outcome {
	case agent.Failed:
		why := fmt.Sprintf("trainer exited with code %d", res.ExitCode)
		if res.ExitCode < 0 {
			why = "trainer could not start"
		}
		out.Message = fmt.Sprintf("%s: %s\n(whole output: starter logs %s --attempt %d)", why, res.Stderr, in.Spec.ID, in.Attempt)
	case agent.GangStopped:
		out.Message = fmt.Sprintf("rank %d stopped with its gang at step %d: %s\n(whole output: starter logs %s --attempt %d)", in.Gang.Rank, res.LastStep, res.Stderr, in.Spec.ID, in.Attempt)
	}
	return out, nil
}

// OutcomeGangStopped is the outcome of a gang's rank whose trainer stopped
// because its gang did (another rank was stopped, preempted or lost), not
// because this node was asked to stop or got a notice: its instance is
// sound. Rank 0's final checkpoint is uploaded, as for a stop.
const OutcomeGangStopped = TrainingOutcome(agent.GangStopped)

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
// signals (only the few events the run acts on, to keep its history
// short: checkpoints closer together than signalEvery are told together).
type reporter struct {
	node        *Node
	store       *checkpoint.Store
	workflowID  string
	signalEvery time.Duration

	mu       sync.Mutex
	progress Progress
	sentAt   time.Time // the last checkpoint signal
	pending  *Progress // checkpoints not signalled yet
}

func (r *reporter) onEvent(e agent.Event) {
	r.mu.Lock()
	r.progress.Step = max(r.progress.Step, e.Step)
	if e.Total > 0 {
		r.progress.TotalSteps = e.Total
	}
	p := r.progress
	p.Time = e.Time
	switch e.Kind {
	case agent.EventRestored:
		p.Kind, p.Step = ProgressRestored, e.Step
	case agent.EventCheckpoint:
		p.Kind, p.Checkpoints = ProgressCheckpoint, 1
		if e.Checkpoint != nil {
			p.Checkpoint = refOf(r.store, *e.Checkpoint)
			p.Checkpoint.WriteSeconds = e.WriteTime.Seconds()
		}
		if q := r.pending; q != nil {
			p.Checkpoints += q.Checkpoints
			if p.Checkpoint != nil && q.Checkpoint != nil {
				p.Checkpoint.WriteSeconds += q.Checkpoint.WriteSeconds
			}
		}
		if p.Checkpoint != nil {
			// Heartbeats carry the latest checkpoint too: a run whose
			// instance goes silent learns of those not signalled yet.
			latest := *p.Checkpoint
			r.progress.Checkpoint = &latest
		}
		if r.signalEvery > 0 && e.Time.Sub(r.sentAt) < r.signalEvery {
			r.pending = &p
			r.mu.Unlock()
			return
		}
		r.pending, r.sentAt = nil, e.Time
	case agent.EventNotice:
		p.Kind = ProgressNotice
	case agent.EventRebalance:
		p.Kind = ProgressRebalance
	default:
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	r.send(p)
}

// flush signals the checkpoints not told yet.
func (r *reporter) flush() {
	r.mu.Lock()
	p := r.pending
	r.pending = nil
	r.mu.Unlock()
	if p != nil {
		r.send(*p)
	}
}

func (r *reporter) send(p Progress) {
	if r.node.Machine.Lost() {
		return // a machine that is gone tells nothing, checkpoints held back included
	}
	// A signal that cannot be sent is not fatal: the activity's result
	// carries the same facts when it returns.
	if err := r.node.Signaler.SignalWorkflow(context.Background(), r.workflowID, "", r.node.ProgressSignal, p); err != nil {
		r.node.Logger.Warn("progress signal not delivered", zap.String("kind", string(p.Kind)), zap.Error(err))
	}
}

// heartbeat reports progress every so often: liveness, and for runs
// recorded before push control, the way a stop request reaches the
// activity.
func (r *reporter) heartbeat(ctx, actx context.Context, every time.Duration) {
	t := time.NewTicker(every)
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
