package agent

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"refuel/pkg/devenv"
	"refuel/pkg/spec"
)

// Dev makes a Run a development environment's (Config.Dev): the command
// is a server a developer connects to, and the agent keeps its workspace.
//
// # Development environment contract
//
// The command runs in the workspace with the trainer contract's
// environment (REFUEL_JOB_ID is the environment's id, REFUEL_ATTEMPT and
// REFUEL_INSTANCE_ID as for a trainer), less its checkpoint variables,
// plus:
//
//   - REFUEL_PORT: the port to listen on, on every interface. Where
//     instances share a host (the local and simulated clouds) the agent
//     picks a free one; elsewhere it is DefaultDevPort, or a free one
//     where something on the machine already listens there.
//   - REFUEL_WORKSPACE: the workspace, an absolute directory whose files
//     are the environment's: kept across stops, moves and preemptions.
//
// Before the command starts, the agent empties the workspace and lays
// the newest save of the environment's store into it; with no save, the
// workspace is left as it is (created if missing). A save is the whole
// workspace as a tar.gz archive (directories, regular files and symbolic
// links with their modes and times; sockets, pipes and devices are left
// out), uploaded as a checkpoint of the store: data first, then a
// manifest with its sha256, the newest Config.Keep kept. The agent saves
// every SaveEvery while something in the workspace changed, and once
// more when the command has exited: after a stop request (SIGTERM, then
// Config.StopGrace to exit), after an interruption notice (the command
// runs on for NoticeGrace, then gets SIGTERM; the save must reach the
// store before the instance goes, or the work since the save before is
// reported lost), and after the command ended by itself.
//
// The agent reports where developers connect (Host and the port) and
// how the environment is used: every SampleEvery it counts the
// established TCP connections to the port (/proc/net/tcp and tcp6) and
// asks nvidia-smi how busy the GPUs are (an instance without nvidia-smi
// shows no GPU use, and that is no error). Either is activity.
type Dev struct {
	// Workspace is the absolute directory whose files are kept; created
	// if missing.
	Workspace string
	// SaveEvery is how often the workspace is saved while the command
	// runs; default spec.DefaultWorkspaceInterval.
	SaveEvery time.Duration
	// Host is where developers reach the instance: its address
	// (capacity.Instance.Address); "" is this machine's host name.
	Host string
	// Port is the port the command listens on; 0 lets the agent choose:
	// a free port where instances share a host (SharedHost, or a
	// loopback Host), DefaultDevPort elsewhere unless something already
	// listens there.
	Port       int
	SharedHost bool
	// NoticeGrace is how long the command runs on after an interruption
	// notice before it gets SIGTERM, so a developer at work can save;
	// never more than half of what the notice's window leaves. 0 sends
	// SIGTERM at once.
	NoticeGrace time.Duration
	// SampleEvery is how often use is sampled; default 5s.
	SampleEvery time.Duration
	// QuietAfter is how long after the last use the environment counts
	// as quiet rather than in use; default devenv.QuietAfter(0).
	QuietAfter time.Duration
	// NvidiaSMI is the nvidia-smi asked for GPU use; default
	// "nvidia-smi" on the agent's PATH.
	NvidiaSMI string
	// Connections counts the established TCP connections to a local
	// port; default reads /proc/net/tcp and tcp6.
	Connections func(port int) int
	// Ready, when set, makes the command a service replica's model
	// server (see Readiness).
	Ready *Readiness
}

// DefaultDevPort is the port an environment's command listens on where
// its instance is its own.
const DefaultDevPort = 8080

const (
	defaultSampleEvery = 5 * time.Second
	// probeEvery is how often the endpoint is tried until it answers.
	probeEvery = 250 * time.Millisecond
)

// Events of a development environment's Run; Event.Dev says more.
const (
	// EventEndpoint: the command started; Dev has the endpoint and the
	// workspace.
	EventEndpoint EventKind = "endpoint"
	// EventServing: the endpoint answered for the first time.
	EventServing EventKind = "serving"
	// EventUsage: a sample of the environment's use, every SampleEvery.
	EventUsage EventKind = "usage"
)

// DevReport is what an event of a development environment says.
type DevReport struct {
	Endpoint  string
	Workspace string
	Serving   bool
	Sample    devenv.Sample
	// LoadTime is how long a model server took from its start to its
	// first ready probe; 0 until it is ready.
	LoadTime time.Duration
	// LastActive is when the agent last saw the environment in use; the
	// command's start before that. InUse says that was within
	// QuietAfter.
	LastActive time.Time
	InUse      bool
}

// DevResult is how a development environment's attempt ended.
type DevResult struct {
	Endpoint  string
	Workspace string
	// Started is when the command started, and Ran how long it ran.
	Started time.Time
	Ran     time.Duration
	// Served reports whether its endpoint ever answered; NeverReady that
	// a model server was stopped for not answering its readiness probe
	// in time.
	Served     bool
	NeverReady bool
	LastActive time.Time
	// Saved reports that the workspace as the command left it is in the
	// store: its last save uploaded, or nothing changed since the save
	// the store has. When it is not, SaveError says why and Unsaved is
	// the work lost: from the newest save in the store (or the command's
	// start) to the command's end.
	Saved     bool
	SaveError string
	Unsaved   time.Duration
}

// withDefaults is a copy of d with its defaults filled in; nil for nil.
func (d *Dev) withDefaults() (*Dev, error) {
	if d == nil {
		return nil, nil
	}
	c := *d
	if err := c.setDefaults(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (d *Dev) setDefaults() error {
	switch {
	case d.Workspace == "" || !filepath.IsAbs(d.Workspace):
		return fmt.Errorf("agent: workspace %q: want an absolute directory", d.Workspace)
	case d.Port < 0 || d.Port > 65535:
		return fmt.Errorf("agent: port %d: want 1 to 65535, or 0 to let the agent choose", d.Port)
	}
	d.Workspace = filepath.Clean(d.Workspace)
	if d.SaveEvery <= 0 {
		d.SaveEvery = spec.DefaultWorkspaceInterval
	}
	if d.SampleEvery <= 0 {
		d.SampleEvery = defaultSampleEvery
	}
	if d.QuietAfter <= 0 {
		d.QuietAfter = devenv.QuietAfter(0)
	}
	if d.NvidiaSMI == "" {
		d.NvidiaSMI = "nvidia-smi"
	}
	if d.Connections == nil {
		d.Connections = func(port int) int { return establishedConnections(port, procNetTCP) }
	}
	if d.Host == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("agent: the endpoint's host: %w", err)
		}
		d.Host = host
	}
	return nil
}

// sharesHost reports whether other instances may listen on this host.
func (d *Dev) sharesHost() bool {
	if d.SharedHost || d.Host == "localhost" {
		return true
	}
	ip := net.ParseIP(d.Host)
	return ip != nil && ip.IsLoopback()
}

// choosePort is the port the command gets.
func (d *Dev) choosePort() (int, error) {
	if d.Port > 0 {
		return d.Port, nil
	}
	if !d.sharesHost() {
		// The machine is the instance's own, but another program (or a
		// second machine joined from the same host) may hold the usual
		// port: then any free one, since the endpoint names it.
		if l, err := net.Listen("tcp", ":"+strconv.Itoa(DefaultDevPort)); err == nil {
			l.Close()
			return DefaultDevPort, nil
		}
	}
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, fmt.Errorf("agent: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// devSession is a development environment's side of one Run.
type devSession struct {
	r        *run
	cfg      Dev
	port     int
	endpoint string
	gpu      gpuProbe

	// Saves, written by one goroutine at a time: the periodic saver
	// while the command runs, then finish.
	next        int64 // the step of the next save
	lastSum     [sha256.Size]byte
	haveSum     bool  // lastSum is the workspace as the store has it, or will
	lastWritten int64 // the newest save written; 0 for none

	started time.Time
	stop    context.CancelFunc
	loops   sync.WaitGroup

	mu         sync.Mutex
	served     bool
	readyAt    time.Time
	lastActive time.Time
	// neverReady is closed when a model server was not ready in time.
	neverReady chan struct{}

	// What finish found.
	stoppedAt time.Time
	finalErr  error
}

// prepareDev readies the workspace and the endpoint once the store's
// newest good checkpoint, if any, is restored: that checkpoint is the
// newest save, and its archive becomes the workspace.
func (r *run) prepareDev() error {
	if r.cfg.Dev == nil {
		return nil
	}
	d := &devSession{r: r, cfg: *r.cfg.Dev, gpu: gpuProbe{command: r.cfg.Dev.NvidiaSMI}, next: 1, neverReady: make(chan struct{})}
	ws := d.cfg.Workspace
	if m := r.result.LastCheckpoint; m != nil {
		archive := filepath.Join(r.checkpointDir(), stepName(m.Step), WorkspaceArchive)
		if _, err := os.Stat(archive); err != nil {
			r.say("checkpoint step %d of %s is no workspace save (it has no %s): the command does not start", m.Step, r.cfg.Store.URL(), WorkspaceArchive)
			return fmt.Errorf("agent: checkpoint step %d of %s is no workspace save (it has no %s): the store holds another job's checkpoints under this id; use another id or another store",
				m.Step, r.cfg.Store.URL(), WorkspaceArchive)
		}
		st, err := extractArchive(archive, ws)
		if err != nil {
			return fmt.Errorf("agent: restore the workspace from save %d: %w", m.Step, err)
		}
		if d.lastSum, err = fingerprint(ws); err != nil {
			return fmt.Errorf("agent: workspace %s: %w", ws, err)
		}
		d.haveSum, d.next = true, m.Step+1
		r.say("restored the workspace %s from save %d: %s", ws, m.Step, st)
	} else {
		if err := os.MkdirAll(ws, 0o700); err != nil {
			return fmt.Errorf("agent: workspace: %w", err)
		}
		r.say("no workspace save in %s: the command starts with %s as it is", r.cfg.Store.URL(), ws)
	}
	port, err := d.cfg.choosePort()
	if err != nil {
		return err
	}
	d.port, d.endpoint = port, devenv.Endpoint(d.cfg.Host, port)
	r.dev = d
	return nil
}

// contract is the command's share of the contract's variables: a
// trainer's without the checkpoint directory and interval, which are the
// agent's here, and the port and workspace.
func (d *devSession) contract(trainer []string) []string {
	if d == nil {
		return trainer
	}
	var out []string
	for _, kv := range trainer {
		if !strings.HasPrefix(kv, "REFUEL_CHECKPOINT_") {
			out = append(out, kv)
		}
	}
	return append(out, devenv.EnvPort+"="+strconv.Itoa(d.port), devenv.EnvWorkspace+"="+d.cfg.Workspace)
}

// workdir is where the command runs by default: the workspace, or for a
// trainer, def.
func (d *devSession) workdir(def string) string {
	if d == nil {
		return def
	}
	return d.cfg.Workspace
}

// startDev starts saving the workspace and sampling its use, now that
// the command runs. Nil when the Run is no environment's.
func (r *run) startDev() *devSession {
	d := r.dev
	if d == nil {
		return nil
	}
	d.started = time.Now()
	d.lastActive = d.started
	r.say("the command listens at %s (%s=%d) with the workspace %s", d.endpoint, devenv.EnvPort, d.port, d.cfg.Workspace)
	r.emit(Event{Kind: EventEndpoint, Dev: d.report(devenv.Sample{})})
	ctx, cancel := d.r.cfg.Machine.bound(context.Background())
	d.stop = cancel
	if d.serves() {
		// A model server's files are scratch: nothing is saved.
		d.loops.Add(1)
		go func() {
			defer d.loops.Done()
			d.probeReady(ctx)
		}()
		return d
	}
	d.loops.Add(2)
	go func() {
		defer d.loops.Done()
		d.saveLoop(ctx)
	}()
	go func() {
		defer d.loops.Done()
		d.watchUse(ctx)
	}()
	return d
}

func (d *devSession) report(s devenv.Sample) *DevReport {
	d.mu.Lock()
	defer d.mu.Unlock()
	rep := &DevReport{Endpoint: d.endpoint, Workspace: d.cfg.Workspace, Serving: d.served, Sample: s, LastActive: d.lastActive,
		InUse: time.Since(d.lastActive) < d.cfg.QuietAfter}
	if !d.readyAt.IsZero() {
		rep.LoadTime = d.readyAt.Sub(d.started)
	}
	return rep
}

// watchUse tries the endpoint until it answers, and samples the
// environment's use every SampleEvery, until ctx ends.
func (d *devSession) watchUse(ctx context.Context) {
	sample := time.NewTicker(d.cfg.SampleEvery)
	defer sample.Stop()
	probe := time.NewTicker(probeEvery)
	defer probe.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-probe.C:
			if d.answers(ctx) {
				probe.Stop()
				d.mu.Lock()
				d.served = true
				d.mu.Unlock()
				d.r.say("the endpoint %s answers", d.endpoint)
				d.r.emit(Event{Kind: EventServing, Dev: d.report(devenv.Sample{})})
			}
		case <-sample.C:
			s := d.sampleUsage(ctx)
			if ctx.Err() != nil {
				return
			}
			if s.Active() {
				d.mu.Lock()
				d.lastActive = time.Now()
				d.mu.Unlock()
			}
			d.r.emit(Event{Kind: EventUsage, Dev: d.report(s)})
		}
	}
}

// answers reports whether the endpoint takes a connection.
func (d *devSession) answers(ctx context.Context) bool {
	dialer := net.Dialer{Timeout: time.Second}
	c, err := dialer.DialContext(ctx, "tcp", d.endpoint)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// holdOnNotice keeps the command running after an interruption notice
// seen at seen for NoticeGrace, but at most half the time left until
// stopBy (when it must have exited), so that it still has time to stop
// and the workspace to be saved; it returns early when the command
// exits or the machine is gone.
func (d *devSession) holdOnNotice(t running, seen, stopBy time.Time) {
	if d == nil || d.cfg.NoticeGrace <= 0 {
		return
	}
	hold := min(d.cfg.NoticeGrace, stopBy.Sub(seen)/2)
	if hold <= 0 {
		return
	}
	d.r.say("interruption notice: the command runs on for %s so that work in progress can be saved, then gets SIGTERM", hold.Round(time.Millisecond))
	timer := time.NewTimer(hold)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-t.done():
	case <-d.r.cfg.Machine.gone():
	}
}

// finish ends the sampling and periodic saves, once the command has
// exited, and saves the workspace as the command left it into the
// checkpoint directory for the final upload, within ctx (the upload's).
func (d *devSession) finish(ctx context.Context) {
	if d == nil {
		return
	}
	d.stop()
	d.loops.Wait()
	d.stoppedAt = time.Now()
	if d.r.cfg.Machine.Lost() || d.serves() {
		return
	}
	if _, err := d.save(ctx); err != nil {
		d.finalErr = fmt.Errorf("the final save: %w", err)
		d.r.say("the workspace could not be saved: %v", err)
	}
}

// settle records in res how the environment's attempt ended, given how
// the final upload went, and returns what Run returns as its error: the
// upload's for a trainer; for an environment none, as a save that did
// not reach the store is reported in res.Dev, as lost work.
func (d *devSession) settle(res *Result, uploadErr error) error {
	if d == nil {
		return uploadErr
	}
	d.mu.Lock()
	out := &DevResult{
		Endpoint: d.endpoint, Workspace: d.cfg.Workspace, Started: d.started, Served: d.served, LastActive: d.lastActive,
	}
	d.mu.Unlock()
	select {
	case <-d.neverReady:
		out.NeverReady = true
	default:
	}
	if !d.started.IsZero() {
		out.Ran = d.stoppedAt.Sub(d.started)
	}
	var inStore int64
	since := d.started
	if m := res.LastCheckpoint; m != nil {
		inStore, since = m.Step, m.CreatedAt
	}
	err := errors.Join(d.finalErr, uploadErr)
	out.Saved = err == nil && inStore >= d.lastWritten
	if !out.Saved {
		if err == nil {
			err = fmt.Errorf("save %d did not reach the store", d.lastWritten)
		}
		out.SaveError = err.Error()
		if !since.IsZero() {
			out.Unsaved = max(0, d.stoppedAt.Sub(since))
		}
		d.r.say("the workspace as the command left it is not in the store: %v; the work since %s is lost", err, since.UTC().Format(time.RFC3339))
	}
	res.Dev = out
	return nil
}
