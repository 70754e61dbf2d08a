package activities

import (
	"fmt"
	"path/filepath"
	"time"

	"refuel/pkg/agent"
	"refuel/pkg/devenv"
)

// DevInput makes a RunTraining attempt a development environment's
// (TrainingInput.Dev): its Spec is the environment's spec.DevSpec.Job(),
// its command a server a developer connects to, its checkpoints the
// workspace's saves in the store under the environment's id (see
// agent.Dev for the contract). StopTraining stops it as it stops a
// trainer: SIGTERM, Spec's StopGrace, the final save.
type DevInput struct {
	// Workspace is the absolute directory kept across moves: the
	// DevSpec's workspace; "" is <agent dir>/workspaces/<id>.
	Workspace string `json:"workspace,omitempty"`
	// SaveEvery is the DevSpec's workspace_interval; 0 is the default.
	SaveEvery time.Duration `json:"save_every,omitempty"`
	// IdleTimeout is the DevSpec's idle_timeout: the agent says the
	// environment went quiet devenv.QuietAfter(IdleTimeout) after its
	// last use.
	IdleTimeout time.Duration `json:"idle_timeout,omitempty"`
	// Host is where developers reach the instance: the lease's
	// capacity.Instance.Address (loopback on the local and simulated
	// clouds, where the agent then picks a free port); "" is the
	// machine's host name.
	Host string `json:"host,omitempty"`
	// Port is the port the command listens on; 0 lets the agent choose.
	Port int `json:"port,omitempty"`
	// NoticeGrace is how long the command runs on after an interruption
	// notice before SIGTERM (agent.Dev.NoticeGrace); 0 sends it at once.
	NoticeGrace time.Duration `json:"notice_grace,omitempty"`
	// SampleEvery is how often the agent samples use; 0 is 5s.
	SampleEvery time.Duration `json:"sample_every,omitempty"`
	// Ready, when set, makes the attempt a service replica's: its
	// command is the model server, ready at the first 2xx of the probe
	// (agent.Readiness), its files never saved.
	Ready *ReadyInput `json:"ready,omitempty"`
}

// ReadyInput is a service replica's readiness probe (spec.Readiness).
type ReadyInput struct {
	Path         string        `json:"path"`
	InitialDelay time.Duration `json:"initial_delay"`
	Period       time.Duration `json:"period"`
	Timeout      time.Duration `json:"timeout"`
}

// Progress kinds of a development environment's attempt, signalled
// beside restored, checkpoint (a workspace save uploaded), notice and
// rebalance.
const (
	// ProgressEndpoint: the command started; Dev says where it listens.
	ProgressEndpoint ProgressKind = "endpoint"
	// ProgressServing: the endpoint answered for the first time.
	ProgressServing ProgressKind = "serving"
	// ProgressUsage: the environment went from quiet to in use or back
	// (Dev.InUse, Dev.LastActive); also every devUsageRefresh while in
	// use, in case a signal was lost.
	ProgressUsage ProgressKind = "usage"
)

// devUsageRefresh is how often an environment in use says so again.
const devUsageRefresh = 5 * time.Minute

// DevProgress is what a development environment's attempt reports
// (Progress.Dev), in every heartbeat and in its signals.
type DevProgress struct {
	Endpoint  string `json:"endpoint,omitempty"`
	Workspace string `json:"workspace,omitempty"`
	// Serving reports whether the endpoint has answered.
	Serving bool `json:"serving,omitempty"`
	// Since is when the command started; LastActive when the agent last
	// saw the environment in use (Since before that), and InUse whether
	// that was within devenv.QuietAfter.
	Since      time.Time `json:"since,omitzero"`
	LastActive time.Time `json:"last_active,omitzero"`
	InUse      bool      `json:"in_use,omitempty"`
	// Usage is the latest sample: connections and GPU use.
	Usage devenv.Sample `json:"usage"`
	// LoadSeconds is how long a model server took from its start to its
	// first ready probe: its model-load time.
	LoadSeconds float64 `json:"load_seconds,omitempty"`
}

// Activity is what the report says of the environment's use, with the
// developer's last touch, for devenv's judgements.
func (p DevProgress) Activity(lastTouch time.Time) devenv.Activity {
	return devenv.Activity{Since: p.Since, LastActive: p.LastActive, InUse: p.InUse, LastTouch: lastTouch}
}

// DevResult is how a development environment's attempt ended
// (TrainingResult.Dev).
type DevResult struct {
	Endpoint  string    `json:"endpoint,omitempty"`
	Workspace string    `json:"workspace,omitempty"`
	Started   time.Time `json:"started,omitzero"`
	// RanSeconds is how long the command ran, and Served whether its
	// endpoint ever answered: what devenv.CommandExit judges a command
	// that ended by itself on.
	RanSeconds float64 `json:"ran_seconds"`
	Served     bool    `json:"served"`
	// NeverReady: a model server stopped for not getting ready in time.
	NeverReady bool      `json:"never_ready,omitempty"`
	LastActive time.Time `json:"last_active,omitzero"`
	// Saved reports that the workspace as the command left it is in the
	// store. When it is not (the final save missed the notice's window,
	// the store failed), SaveError says why and UnsavedSeconds is the
	// work lost: from the store's newest save to the command's end.
	Saved          bool    `json:"saved"`
	SaveError      string  `json:"save_error,omitempty"`
	UnsavedSeconds float64 `json:"unsaved_seconds,omitempty"`
}

// devConfig is the agent's side of a development environment's attempt;
// nil for a trainer's.
func (n *Node) devConfig(in TrainingInput) (*agent.Dev, error) {
	d := in.Dev
	if d == nil {
		return nil, nil
	}
	ws := d.Workspace
	if ws == "" {
		dir, err := filepath.Abs(filepath.Join(n.Dir, "workspaces", in.Spec.ID))
		if err != nil {
			return nil, err
		}
		ws = dir
	}
	out := &agent.Dev{
		Workspace: ws, SaveEvery: d.SaveEvery, Host: d.Host, Port: d.Port, SharedHost: n.SharedHost,
		NoticeGrace: d.NoticeGrace, SampleEvery: d.SampleEvery, QuietAfter: devenv.QuietAfter(d.IdleTimeout),
	}
	if r := d.Ready; r != nil {
		out.Ready = &agent.Readiness{Path: r.Path, InitialDelay: r.InitialDelay, Period: r.Period, Timeout: r.Timeout}
	}
	return out, nil
}

// devOutcome adds to out what a development environment's attempt did,
// and says in its message what an exit of the command means: a command
// that failed to start (devenv.CommandExit.Verdict) fails the attempt
// whatever its exit status; one that served and ended by itself is
// completed, which for an environment means suspended, not done.
func devOutcome(in TrainingInput, res agent.Result, out *TrainingResult) {
	d := res.Dev
	if in.Dev == nil || d == nil {
		return
	}
	out.Dev = &DevResult{
		Endpoint: d.Endpoint, Workspace: d.Workspace, Started: d.Started, RanSeconds: d.Ran.Seconds(), Served: d.Served,
		LastActive: d.LastActive, Saved: d.Saved, SaveError: d.SaveError, UnsavedSeconds: d.Unsaved.Seconds(), NeverReady: d.NeverReady,
	}
	if r := in.Dev.Ready; r != nil && (res.Outcome == agent.Completed || res.Outcome == agent.Failed) {
		// A model server ends only when stopped: any other end fails the
		// replica, which is replaced.
		why := "the model server exited with code " + fmt.Sprint(res.ExitCode)
		if d.NeverReady {
			why = fmt.Sprintf("the model server did not answer GET %s with 2xx within %s", r.Path, r.InitialDelay+r.Period+r.Timeout)
		}
		out.Outcome = OutcomeFailed
		out.Message = fmt.Sprintf("%s; its last lines:\n%s\n(whole output: starter logs %s --attempt %d)", why, res.Stderr, in.Spec.ID, in.Attempt)
		return
	}
	if res.Outcome == agent.Completed || res.Outcome == agent.Failed {
		state, why := devenv.CommandExit{Code: res.ExitCode, Ran: d.Ran, Served: d.Served, Output: res.Stderr}.Verdict()
		out.Message = fmt.Sprintf("%s\n(whole output: starter logs %s --attempt %d)", why, in.Spec.ID, in.Attempt)
		if state == devenv.StateFailed {
			out.Outcome = OutcomeFailed
		}
	}
}

// devEvent reports a development environment's own events: it keeps
// what they say for the heartbeats and signals the run when the command
// starts, when its endpoint first answers, and when its use changes.
// It reports whether e was such an event.
func (r *reporter) devEvent(e agent.Event) bool {
	if e.Dev == nil {
		return false
	}
	d := e.Dev
	r.mu.Lock()
	prev := r.progress.Dev
	now := &DevProgress{Endpoint: d.Endpoint, Workspace: d.Workspace, Serving: d.Serving, LastActive: d.LastActive, InUse: d.InUse, Usage: d.Sample,
		LoadSeconds: d.LoadTime.Seconds()}
	if prev != nil {
		now.Since = prev.Since
	}
	p := r.progress
	p.Time = e.Time
	p.Dev = now
	switch e.Kind {
	case agent.EventEndpoint:
		now.Since = d.LastActive
		p.Kind = ProgressEndpoint
	case agent.EventServing:
		p.Kind = ProgressServing
	case agent.EventUsage:
		changed := prev == nil || prev.InUse != d.InUse
		if !changed && !(d.InUse && e.Time.Sub(r.devToldAt) >= devUsageRefresh) {
			r.progress.Dev = now
			r.mu.Unlock()
			return true
		}
		p.Kind = ProgressUsage
	}
	r.progress.Dev = now
	r.devToldAt = e.Time
	r.mu.Unlock()
	r.send(p)
	return true
}
