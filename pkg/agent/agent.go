package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"refuel/pkg/checkpoint"
)

// Config is one run of a trainer on this instance.
type Config struct {
	// Command is the trainer's argv. A program name with a slash is a
	// path, relative to the workdir; a bare one is looked up on the
	// trainer's PATH.
	Command []string
	// Func, when set, is the trainer instead of Command's program: a
	// function run in the agent's own process with Command[1:] as its
	// arguments (Command[0] names it in the output). The workdir must
	// still exist, but the function does not run in it.
	Func Func
	// Env is the job's "NAME=value" variables. The trainer's environment
	// is only these, the agent's PATH, HOME, TZ, TMPDIR and locale
	// (LANG, LANGUAGE, LC_*), and the contract's variables, which Env
	// cannot override.
	Env []string
	// Dir is the attempt's own directory: its checkpoints live in
	// Dir/checkpoints and its output in Dir/logs.
	Dir string
	// Workdir is where the command runs: absolute, or relative to
	// WorkdirBase (default Dir) without ..; default Dir. It must exist.
	Workdir     string
	WorkdirBase string
	// Attempt numbers this run among the job's attempts: the trainer sees
	// it as REFUEL_ATTEMPT, and its output is kept under it.
	Attempt int
	// CheckpointInterval is how often the trainer should checkpoint, as
	// REFUEL_CHECKPOINT_INTERVAL_SECONDS (whole seconds, at least 1); 0
	// leaves the variable unset.
	CheckpointInterval time.Duration
	// Logs shape how the trainer's output is kept.
	Logs LogOptions

	Store *checkpoint.Store
	// RestartFromScratch lets the trainer start from step 0 when the store
	// holds checkpoints of which none verifies; otherwise the attempt
	// fails with *checkpoint.NotFoundError listing them, rather than throw
	// their work away in silence.
	RestartFromScratch bool
	// Keep is how many good checkpoints stay in the store; at least one.
	// In a gang, each rank above 0 keeps as many of its shards.
	Keep       int
	InstanceID string
	JobID      string
	// Gang is this node's place in a gang of several nodes; zero for a run
	// of one node.
	Gang Gang
	// Dev, when set, runs a development environment's command instead of
	// a trainer: its workspace kept, its use watched (see Dev).
	Dev *Dev

	// MetadataEndpoint is the instance metadata service, such as
	// http://169.254.169.254; "" watches for no notices.
	MetadataEndpoint string
	// GCEMetadataHost is a Compute Engine instance's metadata server
	// (host:port, as GCE_METADATA_HOST names it), whose instance/preempted
	// is watched instead of MetadataEndpoint; "" on any other cloud.
	GCEMetadataHost string
	// Notices, when set, are the instance's notices read in-process
	// instead of polled from MetadataEndpoint: a virtual instance's.
	Notices NoticeSource
	// Machine, when set, is the instance's own life, for an agent that
	// runs inside another process (a virtual instance's): once it is
	// killed, Run kills the trainer and returns ErrMachineGone, reporting
	// nothing more. An agent process leaves it nil and dies with its
	// machine.
	Machine *Machine
	// NoticePoll is how often the metadata service is asked; default 1s.
	NoticePoll time.Duration
	// UploadMargin is kept back from an interruption notice's window to
	// upload the final checkpoint; default 20s.
	UploadMargin time.Duration
	// StopGrace is how long a stopped trainer may take to exit; default 2m.
	StopGrace time.Duration

	// OnEvent, when set, is called for each Event, one call at a time, from
	// the agent's goroutines. It should return quickly: trainer output is
	// not read while it runs.
	OnEvent func(Event)
	// Stdout and Stderr, when set, get a copy of the trainer's output. They
	// are written from different goroutines: one writer passed as both
	// must be safe for concurrent use.
	Stdout, Stderr io.Writer
}

// EventKind says what an Event reports.
type EventKind string

const (
	// EventRestored: a checkpoint was downloaded before the trainer started.
	EventRestored EventKind = "restored"
	// EventProgress: the trainer printed a REFUEL_PROGRESS line.
	EventProgress EventKind = "progress"
	// EventCheckpoint: a checkpoint was uploaded.
	EventCheckpoint EventKind = "checkpoint"
	// EventNotice: an interruption notice arrived; the trainer is stopping.
	EventNotice EventKind = "notice"
	// EventRebalance: the provider recommends moving off this instance
	// soon; nothing is stopped.
	EventRebalance EventKind = "rebalance"
)

// Event is something a caller may want to report while the trainer runs.
type Event struct {
	Kind EventKind
	// Step is the step restored, reported or checkpointed.
	Step int64
	// Total is the trainer's total steps when it reported them.
	Total      int64
	Checkpoint *checkpoint.Manifest
	// WriteTime is how long uploading the checkpoint took: what
	// `interval: auto` weighs against the work a preemption loses.
	WriteTime time.Duration
	Notice    *Notice
	Time      time.Time
	// Dev is what a development environment's event says.
	Dev *DevReport
}

// Notice is an interruption notice or rebalance recommendation from the
// instance metadata service.
type Notice struct {
	// Action is "terminate", "stop" or "hibernate" for an interruption, and
	// "rebalance" for a rebalance recommendation.
	Action string
	// Time is when the provider will act; zero if it did not say.
	Time time.Time
}

// Outcome is how a run ended.
type Outcome string

const (
	// Completed: the trainer exited 0 on its own.
	Completed Outcome = "completed"
	// Preempted: an interruption notice stopped the trainer.
	Preempted Outcome = "preempted"
	// Stopped: the caller's context was cancelled and the trainer stopped.
	Stopped Outcome = "stopped"
	// Failed: the trainer exited non-zero on its own, or could not start.
	Failed Outcome = "failed"
	// GangStopped: a gang's trainer stopped without being asked, because
	// its gang stopped (another rank was stopped or preempted, or one
	// vanished): it printed REFUEL_STOPPED and exited 0. Rank 0's final
	// checkpoint is uploaded, as for a stop.
	GangStopped Outcome = "gang-stopped"
)

// Result is what a run did.
type Result struct {
	Outcome Outcome
	// RestoredStep is the step the trainer resumed from; 0 when it started
	// fresh.
	RestoredStep int64
	// LastStep is the highest step the trainer reported or checkpointed.
	LastStep int64
	// LastCheckpoint is the newest good checkpoint in the store as this run
	// knows it: the last one uploaded, or else the one restored.
	LastCheckpoint *checkpoint.Manifest
	// Notice is the interruption notice that preempted the trainer, and
	// NoticeAt when the agent saw it.
	Notice   *Notice
	NoticeAt time.Time
	// ExitCode is the trainer's exit status; 128+n when signal n ended
	// it, -1 when it could not start.
	ExitCode int
	// Killed reports that the trainer outlived its grace after SIGTERM and
	// its process group was killed.
	Killed bool
	// Stderr is the last 20 lines of the trainer's stderr, which explain
	// a failure; the whole output is in the store.
	Stderr string
	// LogsErr is why the attempt's output did not all reach the store;
	// nil when it did.
	LogsErr error
	// Dev is how a development environment's attempt ended; nil for a
	// trainer's, and when the command could not start.
	Dev *DevResult
}

const (
	defaultNoticePoll   = time.Second
	defaultUploadMargin = 20 * time.Second
	defaultStopGrace    = 2 * time.Minute
	// unknownNoticeWindow is assumed when a notice has no time: the
	// two minutes that AWS promises.
	unknownNoticeWindow = 2 * time.Minute
)

// Run restores the latest checkpoint, runs the trainer until it exits, is
// preempted or ctx is cancelled, and uploads its checkpoints along the way.
// A trainer's own failure is Outcome Failed with a nil error; the error is
// for the agent's failures, such as a store it cannot read or write. When a
// final upload fails, Run returns the Result so far with the error. On a
// Machine that is killed, Run returns ErrMachineGone and no Result.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.setDefaults(); err != nil {
		return Result{}, err
	}
	if !cfg.Machine.enter() {
		return Result{}, ErrMachineGone
	}
	defer cfg.Machine.leave()
	r := &run{cfg: cfg}
	defer r.closeShards()
	// A stop asked for while the checkpoint restores waits for it, then
	// stops the trainer at its first step: cut short, the restore would
	// fail the attempt (an object store's reads end with their context)
	// instead of stopping it.
	prepareCtx, cancel := cfg.Machine.bound(context.WithoutCancel(ctx))
	err := r.prepare(prepareCtx)
	if err == nil {
		err = r.prepareDev()
	}
	cancel()
	if err != nil {
		if r.log != nil {
			r.log.close()
		}
		if cfg.Machine.Lost() {
			return Result{}, ErrMachineGone
		}
		return Result{}, err
	}
	return r.supervise(ctx)
}

func (c *Config) setDefaults() error {
	switch {
	case len(c.Command) == 0:
		return errors.New("agent: no command")
	case c.Store == nil:
		return errors.New("agent: no checkpoint store")
	case c.Dir == "":
		return errors.New("agent: no working directory")
	}
	if err := c.Gang.check(); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	dev, err := c.Dev.withDefaults()
	if err != nil {
		return err
	}
	c.Dev = dev
	dir, err := filepath.Abs(c.Dir)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	c.Dir = dir
	c.Keep = max(c.Keep, 1)
	if c.NoticePoll <= 0 {
		c.NoticePoll = defaultNoticePoll
	}
	if c.UploadMargin <= 0 {
		c.UploadMargin = defaultUploadMargin
	}
	if c.StopGrace <= 0 {
		c.StopGrace = defaultStopGrace
	}
	if c.WorkdirBase == "" {
		c.WorkdirBase = c.Dir
	}
	return nil
}

// run is the state of one Run shared by its goroutines.
type run struct {
	cfg Config
	log *outputLog
	// shards is where a gang's rank above 0 keeps its own checkpoints;
	// nil for rank 0 and a run of one node, whose are the job's.
	shards *checkpoint.Store

	// dev is a development environment's side of the run; nil for a
	// trainer's.
	dev *devSession

	mu     sync.Mutex // guards result and gangStopped, and serialises OnEvent
	result Result
	// gangStopped is set when a gang's trainer printed REFUEL_STOPPED.
	gangStopped bool
}

func (r *run) closeShards() {
	if r.shards != nil {
		r.shards.Close()
	}
}

// uploads is the store this node's checkpoints go to: the job's, or in a
// gang's rank above 0, the rank's shards.
func (r *run) uploads() *checkpoint.Store {
	if r.shards != nil {
		return r.shards
	}
	return r.cfg.Store
}

func (r *run) checkpointDir() string { return filepath.Join(r.cfg.Dir, "checkpoints") }

// say adds a line of the agent's own to the attempt's output.
func (r *run) say(format string, args ...any) {
	r.log.add(checkpoint.AgentStream, fmt.Sprintf(format, args...), false)
}

// emit records what an event says in the result, then hands it to
// OnEvent; a machine that is gone reports nothing.
func (r *run) emit(e Event) {
	e.Time = time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cfg.Machine.Lost() {
		return
	}
	switch e.Kind {
	case EventRestored:
		r.result.RestoredStep = e.Step
		r.result.LastCheckpoint = e.Checkpoint
	case EventCheckpoint:
		r.result.LastCheckpoint = e.Checkpoint
	}
	r.result.LastStep = max(r.result.LastStep, e.Step)
	if r.cfg.OnEvent != nil {
		r.cfg.OnEvent(e)
	}
}

// prepare starts the attempt's output log, empties the local checkpoint
// directory and restores the newest checkpoint that downloads intact
// into it.
func (r *run) prepare(ctx context.Context) error {
	if err := makePrivateDir(r.cfg.Dir); err != nil {
		return err
	}
	log, err := newOutputLog(filepath.Join(r.cfg.Dir, "logs"), r.cfg.Store, r.cfg.Attempt, r.cfg.InstanceID, r.cfg.Logs)
	if err != nil {
		return err
	}
	r.log = log
	dir := r.checkpointDir()
	// Leftovers from an earlier run on this machine are not trusted: the
	// store is the record.
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("agent: clear %s: %w", dir, err)
	}
	if err := makePrivateDir(dir); err != nil {
		return err
	}
	if !r.cfg.Gang.ownsCheckpoints() {
		if r.shards, err = r.cfg.Store.OpenShard(ctx, r.cfg.Gang.Rank); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
	}
	ms, err := r.cfg.Store.List(ctx)
	if err != nil {
		return fmt.Errorf("agent: restore: %w", err)
	}
	// Restore verifies while it downloads, so a corrupt checkpoint costs one
	// download before falling back to the one before it.
	var skipped []*checkpoint.CorruptError
	for _, m := range ms {
		if want := r.cfg.Store.Run(); m.Run != "" && want != "" && m.Run != want {
			r.say("checkpoint step %d was written by another run of this job id (%s): the trainer does not start", m.Step, m.Run)
			return &checkpoint.ForeignRunError{URL: r.cfg.Store.URL(), JobID: r.cfg.JobID, Step: m.Step, Run: m.Run, Want: want}
		}
		err := r.cfg.Store.Restore(ctx, m, filepath.Join(dir, stepName(m.Step)))
		var corrupt *checkpoint.CorruptError
		if errors.As(err, &corrupt) {
			r.say("skipping checkpoint step %d: %v", m.Step, corrupt)
			skipped = append(skipped, corrupt)
			continue
		}
		if err != nil {
			return fmt.Errorf("agent: restore: %w", err)
		}
		r.emit(Event{Kind: EventRestored, Step: m.Step, Checkpoint: &m})
		r.say("restored checkpoint step %d from %s", m.Step, r.cfg.Store.StepURL(m.Step))
		if r.shards != nil {
			return r.restoreShard(ctx, m.Step, filepath.Join(dir, stepName(m.Step)))
		}
		return nil
	}
	if len(skipped) > 0 && !r.cfg.RestartFromScratch {
		r.say("no checkpoint in %s verifies (%d corrupt): the trainer does not start", r.cfg.Store.URL(), len(skipped))
		return &checkpoint.NotFoundError{URL: r.cfg.Store.URL(), Skipped: skipped}
	}
	r.say("no checkpoint in %s: the trainer starts from scratch", r.cfg.Store.URL())
	return nil
}
