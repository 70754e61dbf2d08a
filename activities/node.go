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
	"refuel/pkg/capacity"
	"refuel/pkg/checkpoint"
	"refuel/pkg/trainer"
)

// Signaler is the part of a Temporal client the node agent needs to tell
// its run about progress and to heartbeat its training activity. The
// agent heartbeats through the client rather than the activity's own
// RecordHeartbeat: the SDK cancels an activity whose heartbeat call
// fails, and an agent must train on through an outage of the cluster.
type Signaler interface {
	SignalWorkflow(ctx context.Context, workflowID, runID, signalName string, arg any) error
	RecordActivityHeartbeat(ctx context.Context, taskToken []byte, details ...any) error
}

var _ Signaler = client.Client(nil)

// Node is the training activity a node agent serves on its instance's own
// task queue: the workflow's way to run a job on exactly this machine.
type Node struct {
	InstanceID       string // empty on a joined machine: each attempt names its own
	Dir              string // the instance's scratch space
	MetadataEndpoint string // IMDS-compatible endpoint for interruption notices
	// GCEMetadataHost is a Compute Engine instance's metadata server,
	// whose instance/preempted is its notice; "" off GCE.
	GCEMetadataHost string
	DefaultStoreURL string // checkpoint store for specs that name none
	Signaler        Signaler
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
	// SharedHost says other instances' agents run on this host too (a
	// virtual instance's): a development environment gets a free port.
	SharedHost bool

	mu       sync.Mutex
	attempts map[attemptKey]*trainerRun
	// earlyStops are stops that came before their attempt's RunTraining.
	earlyStops map[attemptKey]time.Time
}

// instanceFor is the instance an attempt runs on: the agent's own, or on
// a machine that joined the base group (InstanceID empty), the run's
// turn on it that the attempt names.
func (n *Node) instanceFor(in TrainingInput) string {
	if n.InstanceID != "" {
		return n.InstanceID
	}
	return in.InstanceID
}

// RunTraining runs one attempt of a job under the node agent: restore the
// latest checkpoint, run the trainer, upload its checkpoints, report
// progress, and on an interruption notice or a stop request save a final
// checkpoint before returning. It returns normally in every such case;
// only agent-side failures (storage unreachable) are errors.
//
// With push control (TrainingInput.Control) the trainer is the agent's,
// not the activity's: StopTraining stops it, and a RunTraining the run
// lets go of (it continued as new, or the cluster stopped waiting on it
// during an outage) leaves it training, for the next RunTraining of the
// same attempt to attach to. Nothing the cluster does or fails to do
// stops the trainer but a stop request.
func (n *Node) RunTraining(ctx context.Context, in TrainingInput) (TrainingResult, error) {
	info := activity.GetInfo(ctx)
	t, err := n.attach(ctx, in, info.WorkflowExecution.ID)
	if err != nil {
		return TrainingResult{}, err
	}
	lettingGo := false
	defer func() { n.detach(t, in, lettingGo) }()
	// Heartbeats go on after a stop request, while the trainer saves its
	// final checkpoint: the run waits for it and must not time it out.
	hbCtx, stopHeartbeats := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHeartbeats()
	answers := make(chan heartbeatAnswer, 1)
	go t.rep.heartbeat(hbCtx, info.TaskToken, heartbeatEvery(in), answers)
	for {
		select {
		case <-t.done:
			return t.result, t.err
		case a := <-answers:
			if in.Control != ControlPush && a == cancelAsked {
				// Runs recorded before push control stop an attempt by
				// cancelling this activity.
				t.stop()
				<-t.done
				return t.result, t.err
			}
			// The cluster no longer waits on this activity: the run
			// continued as new, or timed it out while the cluster was
			// away, or sent the attempt again, and attaches again with a
			// RunTraining of its own.
			lettingGo = true
			return TrainingResult{}, errLetGo
		case <-ctx.Done():
			if in.Control != ControlPush {
				t.stop()
				<-t.done
				return t.result, t.err
			}
			lettingGo = true
			return TrainingResult{}, ctx.Err()
		}
	}
}

// errLetGo ends a RunTraining the cluster no longer waits on; nobody
// reads it.
var errLetGo = errors.New("the run let go of this attempt; its trainer trains on for the next RunTraining to attach")

// StopTraining asks the trainer of an attempt to stop at a checkpoint;
// the attempt's RunTraining then returns how it ended. An attempt that
// already ended is left as it is. A stop can reach the agent before the
// RunTraining it stops, both being tasks on the instance's queue: the
// agent keeps it, and that attempt's trainer starts stopped.
func (n *Node) StopTraining(_ context.Context, in StopInput) error {
	key := attemptKey{in.JobID, in.Attempt}
	n.mu.Lock()
	t := n.attempts[key]
	if t == nil {
		n.stopAhead(key, time.Now())
		n.mu.Unlock()
		return nil
	}
	n.mu.Unlock()
	t.stop()
	return nil
}

// keepEarlyStop is how long a stop for an attempt the agent has not seen
// waits for its RunTraining: the run sends the two together.
const keepEarlyStop = 10 * time.Minute

// stopAhead keeps a stop for an attempt not started yet, forgetting
// those kept longer than keepEarlyStop. n.mu is held.
func (n *Node) stopAhead(key attemptKey, now time.Time) {
	if n.earlyStops == nil {
		n.earlyStops = map[attemptKey]time.Time{}
	}
	for k, at := range n.earlyStops {
		if now.Sub(at) > keepEarlyStop {
			delete(n.earlyStops, k)
		}
	}
	n.earlyStops[key] = now
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

	mu sync.Mutex
	// held counts the RunTrainings attached to the trainer: a second may
	// attach before the first lets go (a run that continued as new, or
	// sent the attempt again).
	held   int
	orphan *time.Timer // stops a trainer no run attaches to again
	// orphaned is set when the agent stopped the trainer because no run
	// attached within the tolerance: the next RunTraining of the attempt
	// trains again from the checkpoint it saved.
	orphaned bool
}

// DefaultControlPlaneTolerance is how long a trainer the run let go of
// trains on, waiting for a RunTraining of its run to attach, before the
// agent stops it at a checkpoint: a run that continued as new attaches
// within moments, one whose cluster was away attaches when the cluster
// is back; one that was terminated never will.
const DefaultControlPlaneTolerance = 5 * time.Minute

// tolerance is how long the agent waits for a run to attach again.
func tolerance(in TrainingInput) time.Duration {
	if in.ControlPlaneTolerance > 0 {
		return in.ControlPlaneTolerance
	}
	return DefaultControlPlaneTolerance
}

// keepResult is how long the agent remembers how an attempt ended, for a
// run that continued as new, or whose cluster was away, while it ended to
// attach and read it.
func keepResult(in TrainingInput) time.Duration {
	return max(10*time.Minute, 2*tolerance(in))
}

// attach returns the attempt's trainer, starting it the first time.
func (n *Node) attach(ctx context.Context, in TrainingInput, workflowID string) (*trainerRun, error) {
	key := attemptKey{in.Spec.ID, in.Attempt}
	n.mu.Lock()
	defer n.mu.Unlock()
	var outage Outage
	for t := n.attempts[key]; t != nil; t = n.attempts[key] {
		t.mu.Lock()
		if t.orphan != nil {
			t.orphan.Stop()
			t.orphan = nil
		}
		orphaned := t.orphaned
		if !orphaned {
			t.held++
		}
		t.mu.Unlock()
		if !orphaned {
			return t, nil
		}
		// Its run is back after the agent gave up waiting: once the
		// trainer has saved its checkpoint, train on from it. The agent
		// serves its other calls meanwhile.
		n.mu.Unlock()
		<-t.done
		n.mu.Lock()
		if n.attempts[key] != t {
			continue // another RunTraining of the attempt got there first
		}
		outage = t.rep.outageSeen()
		outage.TrainerRestarts++
		n.Logger.Info("a run attached again after its trainer was stopped for want of one: training on from its checkpoint",
			zap.String("job", in.Spec.ID), zap.Int("attempt", in.Attempt))
		break
	}
	store, err := checkpoint.Open(ctx, StoreURL(in.CheckpointURL, n.DefaultStoreURL), in.Spec.ID)
	if err != nil {
		return nil, err
	}
	if in.Dev == nil {
		// A workspace outlives its workflow: an environment started again
		// under its id restores what the one before kept.
		store.SetRun(in.RunIdentity)
	}
	_, total := n.command(in)
	trainCtx, stop := context.WithCancel(context.Background())
	t := &trainerRun{
		rep: &reporter{
			node: n, store: store, workflowID: workflowID, signalEvery: in.SignalEvery,
			progress: Progress{Attempt: in.Attempt, InstanceID: n.instanceFor(in), TotalSteps: total},
			outage:   outage,
			soon:     make(chan struct{}, 1),
		},
		stop: stop,
		done: make(chan struct{}),
		held: 1,
	}
	if n.attempts == nil {
		n.attempts = map[attemptKey]*trainerRun{}
	}
	n.attempts[key] = t
	if _, ok := n.earlyStops[key]; ok {
		delete(n.earlyStops, key)
		n.Logger.Info("the attempt was stopped before it started: its trainer starts stopped",
			zap.String("job", in.Spec.ID), zap.Int("attempt", in.Attempt))
		stop()
	}
	go func() {
		defer store.Close()
		t.result, t.err = n.train(trainCtx, in, store, t.rep)
		if o := t.rep.outageSeen(); o != (Outage{}) {
			t.result.Outage = &o
		}
		t.rep.flush()
		stop()
		close(t.done)
		time.AfterFunc(keepResult(in), func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			if n.attempts[key] == t {
				delete(n.attempts, key)
			}
		})
	}()
	return t, nil
}

// detach ends a RunTraining's hold on its trainer. One that lets go
// leaves the trainer training for the run's next RunTraining; once no
// RunTraining holds it, the agent stops it at a checkpoint if none
// attaches within the tolerance.
func (n *Node) detach(t *trainerRun, in TrainingInput, lettingGo bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.held--
	select {
	case <-t.done:
		return // nothing trains to be let go of
	default:
	}
	if lettingGo && t.held == 0 && t.orphan == nil {
		wait := tolerance(in)
		t.orphan = time.AfterFunc(wait, func() {
			t.mu.Lock()
			t.orphaned = true
			t.mu.Unlock()
			n.Logger.Warn("no run attached to the trainer again: stopping it at a checkpoint",
				zap.String("job", in.Spec.ID), zap.Int("attempt", in.Attempt), zap.Duration("waited", wait))
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
	dev, err := n.devConfig(in)
	if err != nil {
		return TrainingResult{}, err
	}
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
		InstanceID:         n.instanceFor(in),
		JobID:              in.Spec.ID,
		MetadataEndpoint:   n.MetadataEndpoint,
		GCEMetadataHost:    n.GCEMetadataHost,
		StopGrace:          in.StopGrace,
		OnEvent:            rep.onEvent,
		Func:               n.demoFunc(in),
		Notices:            n.Notices,
		Machine:            n.Machine,
		Gang:               agent.Gang{Rank: in.Gang.Rank, Nodes: in.Gang.Nodes, MasterAddr: in.Gang.MasterAddr, MasterPort: in.Gang.MasterPort},
		Dev:                dev,
	})
	if errors.Is(err, agent.ErrMachineGone) {
		// The instance is gone: like a machine without power, it answers
		// nothing, and the run learns it from the missing heartbeats.
		return TrainingResult{}, activity.ErrResultPending
	}
	var foreign *checkpoint.ForeignRunError
	if errors.As(err, &foreign) {
		// No retry makes another run's checkpoint this run's.
		return TrainingResult{}, temporal.NewNonRetryableApplicationError(foreign.Error(), capacity.CheckpointFault.Remedy().Type, nil)
	}
	var none *checkpoint.NotFoundError
	if errors.As(err, &none) && len(none.Skipped) > 0 {
		// The run fails with class checkpoint: no retry brings the work
		// back, and training from step 0 must be asked for.
		return TrainingResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"%v, the newest: %v; put a good checkpoint back in the store, or set checkpoint.restart_from_scratch: true to train again from step 0",
			none, none.Skipped[0]), capacity.CheckpointFault.Remedy().Type, nil)
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
	devOutcome(in, res, &out)
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

// signalTimeout bounds one progress signal, retries included.
const signalTimeout = 30 * time.Second
