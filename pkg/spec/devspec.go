package spec

import (
	"fmt"
	"os"
	"path"
	"strings"
	"time"
	"unicode"
)

// DevSpec is one development environment as a developer asks for it
// (docs/contracts.md): a GPU instance running a server they connect to
// (JupyterLab, sshd, code-server), whose workspace outlives every move
// and which stops by itself when nobody uses it. The same struct is the
// DevEnvironment workflow's input, serialised as JSON.
type DevSpec struct {
	ID       string `json:"id"`
	Team     string `json:"team,omitempty"`
	Priority int    `json:"priority"`
	// Tier is critical (base or on-demand capacity only) or flexible
	// (spot allowed); default critical: an interactive session that the
	// market takes away costs a person's time.
	Tier      Tier      `json:"tier"`
	Resources Resources `json:"resources"`
	// Command is the server the developer connects to. It listens on
	// $REFUEL_PORT and keeps its files in $REFUEL_WORKSPACE.
	Command []string `json:"command"`
	// Env is added to the command's environment, beside the contract's
	// REFUEL_* variables (which it may not override).
	Env map[string]string `json:"env,omitempty"`
	// Workspace is the absolute path on the instance whose files are
	// saved and restored on every move; default a directory of the
	// environment's own in the node agent's scratch space.
	Workspace string `json:"workspace,omitempty"`
	// WorkspaceInterval is how often the workspace is saved while the
	// environment runs; 0 means DefaultWorkspaceInterval.
	WorkspaceInterval Duration `json:"workspace_interval,omitempty"`
	// IdleTimeout is how long the environment may go without activity
	// before it saves its workspace, gives its instance back and waits
	// (suspended); nil means DefaultIdleTimeout, 0 never stops it.
	IdleTimeout *Duration `json:"idle_timeout,omitempty"`
	// MaxDuration bounds how long the environment runs in all; 0 is no
	// bound.
	MaxDuration Duration `json:"max_duration,omitempty"`
	BudgetUSD   float64  `json:"budget_usd,omitempty"`
}

// Defaults applied by DevSpec.Normalize to fields left out.
const (
	DefaultDevTier           = TierCritical
	DefaultWorkspaceInterval = 5 * time.Minute
	DefaultIdleTimeout       = 30 * time.Minute
)

// Limits of a DevSpec beyond those it shares with a JobSpec (see
// limits.go). The README's development environments section lists them.
const (
	// MinWorkspaceInterval and MaxWorkspaceInterval bound
	// workspace_interval: a save is an archive of the whole workspace.
	MinWorkspaceInterval = time.Second
	MaxWorkspaceInterval = 24 * time.Hour
	// MinIdleTimeout and MaxIdleTimeout bound idle_timeout when it is
	// not 0: the agent samples activity every few seconds, and an
	// environment nobody used for a week should not hold a GPU.
	MinIdleTimeout = 5 * time.Second
	MaxIdleTimeout = 7 * 24 * time.Hour
	// MaxWorkspaceBytes bounds workspace, a path.
	MaxWorkspaceBytes = MaxWorkdirBytes
)

// DevTiers are the tiers an environment may have.
var DevTiers = []Tier{TierCritical, TierFlexible}

// systemDirs are directories a workspace may not be: restoring a
// workspace replaces what its directory holds.
var systemDirs = map[string]bool{
	"/": true, "/bin": true, "/boot": true, "/dev": true, "/etc": true, "/home": true, "/lib": true,
	"/lib32": true, "/lib64": true, "/proc": true, "/run": true, "/sbin": true, "/sys": true,
	"/tmp": true, "/usr": true, "/var": true,
}

// Normalize fills defaults for fields left out, never overriding a value
// that was given.
func (s *DevSpec) Normalize() {
	if s.Tier == "" {
		s.Tier = DefaultDevTier
	}
	s.Tier = Tier(strings.ToLower(string(s.Tier)))
	if s.Resources.GPUs == 0 {
		s.Resources.GPUs = DefaultGPUs
	}
	if s.WorkspaceInterval == 0 {
		s.WorkspaceInterval = Duration(DefaultWorkspaceInterval)
	}
	if s.IdleTimeout == nil {
		d := Duration(DefaultIdleTimeout)
		s.IdleTimeout = &d
	}
}

// Idle is the idle timeout in force: IdleTimeout, or its default; 0
// never stops the environment.
func (s DevSpec) Idle() time.Duration {
	if s.IdleTimeout == nil {
		return DefaultIdleTimeout
	}
	return s.IdleTimeout.D()
}

// SaveEvery is how often the workspace is saved: WorkspaceInterval, or
// its default.
func (s DevSpec) SaveEvery() time.Duration {
	if s.WorkspaceInterval <= 0 {
		return DefaultWorkspaceInterval
	}
	return s.WorkspaceInterval.D()
}

// ParseDevSpec reads a DevSpec from YAML or JSON, rejecting unknown
// fields, fills defaults and validates it.
func ParseDevSpec(data []byte) (DevSpec, error) {
	var s DevSpec
	if err := DecodeStrict(data, &s, "DevSpec", MaxDocumentBytes); err != nil {
		return DevSpec{}, err
	}
	s.Normalize()
	return s, s.Validate()
}

// ReadDevSpec reads and parses a DevSpec file.
func ReadDevSpec(path string) (DevSpec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return DevSpec{}, err
	}
	s, err := ParseDevSpec(data)
	if err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// DecodeDevSpecJSON decodes a DevSpec as the DevEnvironment workflow
// receives it, as strictly as DecodeJobSpecJSON.
func DecodeDevSpecJSON(data []byte) (DevSpec, error) {
	var s DevSpec
	err := decodeJSON(data, &s, "DevSpec", MaxDocumentBytes)
	return s, err
}

// Validate checks a normalised spec and returns a *ValidationError
// listing every problem, or nil.
func (s *DevSpec) Validate() error {
	var fe fieldErrors
	checkID(&fe, s.ID, "give the environment a unique id such as ana-notebook")
	checkTeam(&fe, s.Team)
	if s.Priority < 0 || s.Priority > MaxPriority {
		fe.add("priority", fmt.Sprintf("%d is out of range", s.Priority), "use an integer from 0 (lowest) to 100 (highest)")
	}
	if s.Tier != TierCritical && s.Tier != TierFlexible {
		fe.add("tier", fmt.Sprintf("%q is not a tier of an environment", clip(string(s.Tier))),
			"use critical (base or on-demand only) or flexible (spot allowed); an environment has no deadline")
	}
	s.Resources.validate(&fe, "ask for 1 or more GPUs")
	if s.Resources.Nodes > 1 {
		fe.add("resources.nodes", fmt.Sprintf("%d is more than one", s.Resources.Nodes), "leave it out: an environment runs on one instance")
	}
	if s.Resources.MinNodes > 1 || s.Resources.ShrinkAfter != 0 {
		fe.add("resources.min_nodes", "is for gangs of a training job", "leave resources.min_nodes and shrink_after out: an environment runs on one instance")
	}
	if len(s.Command) == 0 {
		fe.add("command", "is required", `name the server to run, listening on $REFUEL_PORT, e.g. [sh, -c, "jupyter lab --ip=0.0.0.0 --port=$REFUEL_PORT"]`)
	}
	checkCommand(&fe, s.Command, "name the server to run, such as jupyter or /usr/sbin/sshd")
	checkEnv(&fe, s.Env, "the command")
	checkWorkspace(&fe, s.Workspace)
	switch d := s.WorkspaceInterval.D(); {
	case d < 0:
		fe.add("workspace_interval", "is negative", fmt.Sprintf("give how often to save the workspace, such as 5m, or leave it out for %s", DefaultWorkspaceInterval))
	case d < MinWorkspaceInterval:
		fe.add("workspace_interval", fmt.Sprintf("%s is under a second", d), "save at most every second; every few minutes is usual")
	case d > MaxWorkspaceInterval:
		fe.add("workspace_interval", fmt.Sprintf("%s is more than a day", d), fmt.Sprintf("save at least daily (%s), every few minutes is usual", MaxWorkspaceInterval))
	}
	if s.IdleTimeout != nil {
		const fix = "give how long the environment may go unused before it stops, such as 30m, or 0 never to stop it"
		switch d := s.IdleTimeout.D(); {
		case d < 0:
			fe.add("idle_timeout", "is negative", fix)
		case d > 0 && d < MinIdleTimeout:
			fe.add("idle_timeout", fmt.Sprintf("%s is shorter than %s", d, MinIdleTimeout), fmt.Sprintf("give at least %s (minutes for real work), or 0 never to stop it", MinIdleTimeout))
		case d > MaxIdleTimeout:
			fe.add("idle_timeout", fmt.Sprintf("%s is more than a week", d), fmt.Sprintf("give at most %s, or 0 never to stop it", MaxIdleTimeout))
		}
	}
	switch d := s.MaxDuration.D(); {
	case d < 0:
		fe.add("max_duration", "is negative", "give how long the environment may run at a time before it suspends, such as 72h, or leave it out for no bound")
	case d > MaxWork:
		fe.add("max_duration", fmt.Sprintf("%s is more than a year", d), "give at most 8784h (366 days), or leave it out for no bound")
	}
	switch {
	case s.BudgetUSD < 0:
		fe.add("budget_usd", "is negative", "give a budget in USD, or leave it out for none")
	case s.BudgetUSD > MaxBudgetUSD:
		fe.add("budget_usd", fmt.Sprintf("%g is above %g", s.BudgetUSD, float64(MaxBudgetUSD)), "give a budget of at most 10000000 USD, or leave it out for none")
	}
	return fe.err("DevSpec", clip(s.ID))
}

// checkWorkspace accepts an absolute path, in its plain form, that is
// not a directory of the system: restoring a workspace replaces what its
// directory holds.
func checkWorkspace(fe *fieldErrors, w string) {
	const fix = "give an absolute path such as /home/dev/work, or leave it out for a directory of the environment's own"
	clean := path.Clean(w)
	switch {
	case w == "":
	case len(w) > MaxWorkspaceBytes:
		fe.add("workspace", fmt.Sprintf("is %d bytes long", len(w)), fmt.Sprintf("use a path of at most %d bytes", MaxWorkspaceBytes))
	case strings.IndexFunc(w, unicode.IsControl) >= 0:
		fe.add("workspace", "contains a control character", fix)
	case strings.HasPrefix(w, "~"):
		fe.add("workspace", fmt.Sprintf("%q starts with ~, which nothing expands", clip(w)), "write the home directory out, e.g. /home/dev/work")
	case !path.IsAbs(w):
		fe.add("workspace", fmt.Sprintf("%q is a relative path", clip(w)), fix)
	case clean != strings.TrimSuffix(w, "/") && w != "/":
		fe.add("workspace", fmt.Sprintf("%q is not in its plain form", clip(w)), fmt.Sprintf("write it without . and .. or doubled slashes, e.g. %s", clip(clean)))
	case systemDirs[clean] || strings.HasPrefix(clean, "/proc/") || strings.HasPrefix(clean, "/sys/") || strings.HasPrefix(clean, "/dev/"):
		fe.add("workspace", fmt.Sprintf("%s is a directory of the system, which restoring the workspace would replace", clean), "give a directory of the environment's own, such as /home/dev/work")
	}
}

// Job is the JobSpec a training run's attempt and recovery code see for
// the environment: its id, team, priority, tier, resources, command, env
// and budget as given; work its max_duration, or MaxWork without one;
// its workspace snapshots as the checkpoints of the worker's store,
// WorkspaceKeep of them kept.
func (s DevSpec) Job() JobSpec {
	work := s.MaxDuration
	if work <= 0 {
		work = Duration(MaxWork)
	}
	return JobSpec{
		ID: s.ID, Team: s.Team, Priority: s.Priority, Tier: s.Tier, Work: work,
		Resources: s.Resources, Command: s.Command, Env: s.Env, BudgetUSD: s.BudgetUSD,
		Checkpoint: Checkpoint{Keep: WorkspaceKeep, Interval: s.SaveEvery().String()},
		Policy:     DefaultPolicy,
	}
}

// WorkspaceKeep is how many workspace snapshots an environment keeps in
// its store: the newest, and the one before in case the newest is
// damaged.
const WorkspaceKeep = 2

// String shows a spec in logs without its command line.
func (s DevSpec) String() string {
	return fmt.Sprintf("%s (team %q, tier %s, priority %d, idle timeout %s)", s.ID, s.Team, s.Tier, s.Priority, s.Idle())
}
