package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/metadata"
)

// AgentLaunch says how to start the node agent of one instance.
type AgentLaunch struct {
	InstanceID       string
	TaskQueue        string
	MetadataEndpoint string
	Dir              string // the instance's own scratch directory
	ReadyFile        string // the agent creates it once it serves its task queue
}

// LauncherConfig configures a Launcher. Zero values mean the defaults noted.
type LauncherConfig struct {
	// AgentCommand returns the argv that starts a node agent (required).
	AgentCommand func(AgentLaunch) []string
	// Dir holds the instances' scratch directories; default a temp dir
	// removed by Close.
	Dir string
	// ReadyTimeout bounds an agent's start-up; default 60s.
	ReadyTimeout time.Duration
	// Env is what an agent needs to connect (TEMPORAL_* settings, the
	// codec key file), added to the few variables every process needs
	// (BaseEnv). Nothing else of this process's environment reaches an
	// agent: not the cloud credentials of the worker that started it.
	Env    []string
	Logger *zap.Logger
}

// Launcher runs node agents as local processes, one per instance, each
// with its own metadata endpoint. Simulated clouds (this package's and
// pkg/cloud/sim) use it for the machine side of an instance and decide
// stock, prices and failures themselves. Safe for concurrent use.
type Launcher struct {
	cfg    LauncherConfig
	ownDir bool
	log    *zap.Logger

	mu    sync.Mutex
	procs map[string]*process
}

type process struct {
	cmd    *exec.Cmd
	meta   *metadata.Service
	dir    string
	exited chan struct{}
	kill   *time.Timer
}

// NewLauncher returns a launcher.
func NewLauncher(cfg LauncherConfig) (*Launcher, error) {
	if cfg.AgentCommand == nil {
		return nil, fmt.Errorf("launcher: AgentCommand is required: it says how to start a node agent")
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 60 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	ownDir := cfg.Dir == ""
	if ownDir {
		d, err := os.MkdirTemp("", "refuel-instances-")
		if err != nil {
			return nil, err
		}
		cfg.Dir = d
	}
	// Instances hold checkpoints and logs of other people's jobs: no one
	// but this user may look in.
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("launcher: instance directory: %w", err)
	}
	return &Launcher{cfg: cfg, ownDir: ownDir, log: cfg.Logger, procs: map[string]*process{}}, nil
}

// baseEnv are the variables of this process an agent gets whatever its
// job: where programs are, whose home, the locale and the time zone.
var baseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR"}

// BaseEnv is the part of this process's environment every agent gets:
// the variables of baseEnv and the locale's LC_* that are set.
func BaseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(baseEnv, name) || strings.HasPrefix(name, "LC_") {
			env = append(env, kv)
		}
	}
	return env
}

// TaskQueueFor is the task queue the agent of an instance serves.
func TaskQueueFor(instanceID string) string { return "refuel-node-" + instanceID }

// Start launches the agent of instance id and returns once it serves its
// task queue. A failure is the caller's to classify (an init failure).
func (l *Launcher) Start(ctx context.Context, id string) error {
	meta, err := metadata.Start(id)
	if err != nil {
		return fmt.Errorf("metadata endpoint: %w", err)
	}
	dir := filepath.Join(l.cfg.Dir, id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		_ = meta.Close()
		return fmt.Errorf("scratch directory: %w", err)
	}
	launch := AgentLaunch{
		InstanceID: id, TaskQueue: TaskQueueFor(id), MetadataEndpoint: meta.Endpoint(),
		Dir: dir, ReadyFile: filepath.Join(dir, "agent.ready"),
	}
	argv := l.cfg.AgentCommand(launch)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(BaseEnv(), l.cfg.Env...)
	logf, err := os.OpenFile(filepath.Join(dir, "agent.log"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err == nil {
		cmd.Stdout, cmd.Stderr = logf, logf
	}
	// Own process group, so terminating the instance takes the trainer
	// with it; and die with us, so a crashed worker leaves no agent behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = meta.Close()
		return fmt.Errorf("start agent: %w", err)
	}
	p := &process{cmd: cmd, meta: meta, dir: dir, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		if logf != nil {
			_ = logf.Close()
		}
		close(p.exited)
	}()
	l.mu.Lock()
	l.procs[id] = p
	l.mu.Unlock()
	if err := l.waitReady(ctx, p, launch.ReadyFile); err != nil {
		_ = l.Stop(id)
		return fmt.Errorf("%w (agent log: %s)", err, filepath.Join(dir, "agent.log"))
	}
	return nil
}

func (l *Launcher) waitReady(ctx context.Context, p *process, readyFile string) error {
	deadline := time.NewTimer(l.cfg.ReadyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(readyFile); err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("node agent exited during start-up")
		case <-deadline.C:
			return fmt.Errorf("node agent not ready after %s", l.cfg.ReadyTimeout)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Alive reports whether the agent of instance id still runs.
func (l *Launcher) Alive(id string) bool {
	p := l.process(id)
	if p == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Interrupt serves an interruption notice on the instance's metadata
// endpoint and kills the instance at the time it names.
func (l *Launcher) Interrupt(id string, at time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.procs[id]
	if !ok {
		return &capacity.NotFoundError{ID: id}
	}
	p.meta.Interrupt("terminate", at)
	if p.kill != nil {
		p.kill.Stop()
	}
	p.kill = time.AfterFunc(time.Until(at), func() { p.killGroup() })
	l.log.Info("interruption notice served", zap.String("instance", id), zap.Time("terminate_at", at))
	return nil
}

// RecommendRebalance publishes a rebalance recommendation to the instance.
func (l *Launcher) RecommendRebalance(id string, at time.Time) error {
	p := l.process(id)
	if p == nil {
		return &capacity.NotFoundError{ID: id}
	}
	p.meta.RecommendRebalance(at)
	return nil
}

// Stop ends the instance's whole process group, waits for it and removes
// its scratch space. An unknown id is *capacity.NotFoundError.
func (l *Launcher) Stop(id string) error {
	l.mu.Lock()
	p, ok := l.procs[id]
	delete(l.procs, id)
	l.mu.Unlock()
	if !ok {
		return &capacity.NotFoundError{ID: id}
	}
	p.terminate()
	return nil
}

// Close stops every instance: nothing outlives the launcher.
func (l *Launcher) Close() {
	l.mu.Lock()
	all := l.procs
	l.procs = map[string]*process{}
	l.mu.Unlock()
	for _, p := range all {
		p.terminate()
	}
	if l.ownDir {
		_ = os.RemoveAll(l.cfg.Dir)
	}
}

func (l *Launcher) process(id string) *process {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.procs[id]
}

func (p *process) killGroup() { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }

func (p *process) terminate() {
	if p.kill != nil {
		p.kill.Stop()
	}
	p.killGroup()
	<-p.exited
	_ = p.meta.Close()
	_ = os.RemoveAll(p.dir)
}
