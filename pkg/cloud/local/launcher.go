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
	MetadataEndpoint string // "" for a virtual instance, which reads Metadata
	Dir              string // the instance's own scratch directory
	ReadyFile        string // the agent creates it once it serves its task queue
	// Metadata is the instance's metadata service itself, which a virtual
	// instance's agent reads in-process (Watch); an agent process polls
	// it at MetadataEndpoint.
	Metadata *metadata.Service
}

// VirtualAgent is the node agent of a virtual instance, running in this
// process.
type VirtualAgent interface {
	// Kill ends the agent and its trainer at once, as a machine that loses
	// its power ends its processes: nothing more is checkpointed, uploaded
	// or reported. It returns once they have ended, and may be called more
	// than once.
	Kill()
	// Done is closed once the agent has ended, killed or on its own.
	Done() <-chan struct{}
}

// LauncherConfig configures a Launcher. Zero values mean the defaults noted.
type LauncherConfig struct {
	// AgentCommand returns the argv that starts a node agent (required,
	// unless StartVirtual is set).
	AgentCommand func(AgentLaunch) []string
	// StartVirtual, when set, makes every instance virtual: its node agent
	// runs inside this process, started by this hook, instead of as a
	// process of AgentCommand. It returns once the agent serves its task
	// queue. The instance's notices reach the agent through
	// AgentLaunch.Metadata, and no endpoint is served.
	StartVirtual func(context.Context, AgentLaunch) (VirtualAgent, error)
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
	// Placement, when set, says where instance id is: its zone, which its
	// metadata endpoint answers as Compute Engine's instance/zone, and
	// whether it is a Compute Engine instance, whose agent process then
	// gets GCE_METADATA_HOST pointing at that endpoint, as Google's
	// clients expect on a GCE VM.
	Placement func(id string) (zone string, gce bool)
	// OnTaken, when set, is told once of each instance taken at the end of
	// its interruption notice (Interrupt), by the notice's timer or by a
	// Stop after the notice ran out, once its agent has ended: what a
	// cloud's instance-state event says. A notice without time to
	// checkpoint in leaves the agent nothing to say, so this is how its
	// run learns at once. An instance stopped before its notice ran out
	// was given back, not taken.
	OnTaken func(id string)
}

// Launcher runs node agents, one per instance, each with its own metadata
// service: as local processes with an endpoint each, or virtual, inside
// this process. Simulated clouds (this package's and pkg/cloud/sim) use it
// for the machine side of an instance and decide stock, prices and
// failures themselves. Safe for concurrent use.
type Launcher struct {
	cfg    LauncherConfig
	ownDir bool
	log    *zap.Logger

	mu       sync.Mutex
	machines map[string]*machine
}

// machine is one instance's agent, a process or virtual.
type machine struct {
	meta *metadata.Service
	dir  string
	// exited is closed once the agent has ended.
	exited <-chan struct{}
	// end kills the agent and returns once it has ended.
	end  func()
	cmd  *exec.Cmd // nil for a virtual agent
	kill *time.Timer
	// noticeEnds is when a served notice takes the instance; zero
	// without one.
	noticeEnds time.Time
	takenOnce  sync.Once
}

// NewLauncher returns a launcher.
func NewLauncher(cfg LauncherConfig) (*Launcher, error) {
	if cfg.AgentCommand == nil && cfg.StartVirtual == nil {
		return nil, fmt.Errorf("launcher: AgentCommand or StartVirtual is required: it says how to start a node agent")
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
	return &Launcher{cfg: cfg, ownDir: ownDir, log: cfg.Logger, machines: map[string]*machine{}}, nil
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

// Virtual reports whether the launcher's instances are virtual.
func (l *Launcher) Virtual() bool { return l.cfg.StartVirtual != nil }

// Start launches the agent of instance id and returns once it serves its
// task queue. A failure is the caller's to classify (an init failure).
func (l *Launcher) Start(ctx context.Context, id string) error {
	dir := filepath.Join(l.cfg.Dir, id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("scratch directory: %w", err)
	}
	if l.Virtual() {
		return l.startVirtual(ctx, id, dir)
	}
	meta, err := metadata.Start(id)
	if err != nil {
		_ = os.RemoveAll(dir)
		return fmt.Errorf("metadata endpoint: %w", err)
	}
	launch := AgentLaunch{
		InstanceID: id, TaskQueue: TaskQueueFor(id), MetadataEndpoint: meta.Endpoint(),
		Dir: dir, ReadyFile: filepath.Join(dir, "agent.ready"),
	}
	argv := l.cfg.AgentCommand(launch)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(BaseEnv(), l.cfg.Env...)
	if l.cfg.Placement != nil {
		zone, gce := l.cfg.Placement(id)
		meta.SetZone(zone)
		if gce {
			cmd.Env = append(cmd.Env, metadata.EnvGCEMetadataHost+"="+meta.HostPort())
		}
	}
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
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		if logf != nil {
			_ = logf.Close()
		}
		close(exited)
	}()
	m := &machine{meta: meta, dir: dir, exited: exited, cmd: cmd, end: func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}}
	l.add(id, m)
	if err := l.waitReady(ctx, m, launch.ReadyFile); err != nil {
		_ = l.Stop(id)
		return fmt.Errorf("%w (agent log: %s)", err, filepath.Join(dir, "agent.log"))
	}
	return nil
}

// startVirtual starts a virtual instance's agent through the hook. Its
// metadata is served to it alone, in-process.
func (l *Launcher) startVirtual(ctx context.Context, id, dir string) error {
	meta := metadata.New(id)
	ctx, cancel := context.WithTimeout(ctx, l.cfg.ReadyTimeout)
	defer cancel()
	agent, err := l.cfg.StartVirtual(ctx, AgentLaunch{InstanceID: id, TaskQueue: TaskQueueFor(id), Dir: dir, Metadata: meta})
	if err != nil {
		_ = os.RemoveAll(dir)
		return fmt.Errorf("start virtual agent: %w", err)
	}
	l.add(id, &machine{meta: meta, dir: dir, exited: agent.Done(), end: agent.Kill})
	return nil
}

func (l *Launcher) add(id string, m *machine) {
	l.mu.Lock()
	l.machines[id] = m
	l.mu.Unlock()
}

func (l *Launcher) waitReady(ctx context.Context, m *machine, readyFile string) error {
	deadline := time.NewTimer(l.cfg.ReadyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(readyFile); err == nil {
			return nil
		}
		select {
		case <-m.exited:
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
	m := l.machine(id)
	if m == nil {
		return false
	}
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// Interrupt serves an interruption notice on the instance's metadata
// service and kills the instance at the time it names.
func (l *Launcher) Interrupt(id string, at time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, ok := l.machines[id]
	if !ok {
		return &capacity.NotFoundError{ID: id}
	}
	m.meta.Interrupt("terminate", at)
	if m.kill != nil {
		m.kill.Stop()
	}
	m.noticeEnds = at
	m.kill = time.AfterFunc(time.Until(at), func() {
		m.end()
		l.taken(id, m)
	})
	l.log.Info("interruption notice served", zap.String("instance", id), zap.Time("terminate_at", at))
	return nil
}

// RecommendRebalance publishes a rebalance recommendation to the instance.
func (l *Launcher) RecommendRebalance(id string, at time.Time) error {
	m := l.machine(id)
	if m == nil {
		return &capacity.NotFoundError{ID: id}
	}
	m.meta.RecommendRebalance(at)
	return nil
}

// Stop ends the instance's agent (a process's whole group), waits for it
// and removes its scratch space. An unknown id is *capacity.NotFoundError.
func (l *Launcher) Stop(id string) error {
	l.mu.Lock()
	m, ok := l.machines[id]
	delete(l.machines, id)
	var noticeEnds time.Time
	if ok {
		noticeEnds = m.noticeEnds
	}
	l.mu.Unlock()
	if !ok {
		return &capacity.NotFoundError{ID: id}
	}
	m.terminate()
	if !noticeEnds.IsZero() && !time.Now().Before(noticeEnds) {
		l.taken(id, m)
	}
	return nil
}

// taken tells OnTaken, once, that the instance was taken at the end of
// its notice.
func (l *Launcher) taken(id string, m *machine) {
	if l.cfg.OnTaken != nil {
		m.takenOnce.Do(func() { l.cfg.OnTaken(id) })
	}
}

// Running is how many instances' agents the launcher holds.
func (l *Launcher) Running() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.machines)
}

// Close stops every instance: nothing outlives the launcher.
func (l *Launcher) Close() {
	l.mu.Lock()
	all := l.machines
	l.machines = map[string]*machine{}
	l.mu.Unlock()
	var wg sync.WaitGroup
	for _, m := range all {
		wg.Go(m.terminate)
	}
	wg.Wait()
	if l.ownDir {
		_ = os.RemoveAll(l.cfg.Dir)
	}
}

func (l *Launcher) machine(id string) *machine {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.machines[id]
}

func (m *machine) terminate() {
	if m.kill != nil {
		m.kill.Stop()
	}
	m.end()
	_ = m.meta.Close()
	_ = os.RemoveAll(m.dir)
}
