package devenv

import (
	"fmt"
	"strings"
	"time"

	"refuel/pkg/cost"
	"refuel/pkg/spec"
)

// Status is a DevEnvironment's answer to the status query
// (docs/contracts.md); fields are only ever added.
type Status struct {
	ID string `json:"id"`
	// Who started it (MemoWho); "" when no one said.
	Who      string `json:"who,omitempty"`
	Team     string `json:"team,omitempty"`
	Priority int    `json:"priority"`
	Tier     string `json:"tier"`
	State    State  `json:"state"`
	// Reason says why it is in its state: what suspended it, where a
	// move goes and why, why it failed.
	Reason string `json:"reason,omitempty"`
	// Since is when it entered its state.
	Since time.Time `json:"since"`
	// Endpoint is host:port while it runs (the agent's report); "" else.
	Endpoint string `json:"endpoint,omitempty"`
	// Serving reports whether the endpoint has answered the agent.
	Serving bool `json:"serving"`
	// IdleSeconds is how long it has gone without use (0 unless running);
	// IdleTimeout is how long it may, 0 for ever.
	IdleSeconds float64       `json:"idle_seconds"`
	IdleTimeout spec.Duration `json:"idle_timeout"`
	// LastActive is when it was last in use: a connection, GPU use, a
	// touch.
	LastActive *time.Time `json:"last_active,omitempty"`
	// Instance is what it runs on now; nil while it holds none.
	Instance *Instance `json:"instance,omitempty"`
	// CostUSD is all it has cost; IdleCostUSD the part of it paid while
	// idle (SplitHeld), beside ActiveHours and IdleHours of instance time.
	CostUSD     float64 `json:"cost_usd"`
	IdleCostUSD float64 `json:"idle_cost_usd"`
	ActiveHours float64 `json:"active_hours"`
	IdleHours   float64 `json:"idle_hours"`
	BudgetUSD   float64 `json:"budget_usd,omitempty"`
	// Cost breaks cost_usd down by market and pool; Ledger is every paid
	// stretch of instance time behind it (starter cost rolls them up by
	// team and pool beside runs and services).
	Cost   cost.Breakdown `json:"cost"`
	Ledger cost.Ledger    `json:"ledger"`
	// Moves counts its moves to other capacity (a notice, a preemption,
	// the pool's), Preemptions those the market forced.
	Moves       int       `json:"moves"`
	Preemptions int       `json:"preemptions"`
	Failures    []Failure `json:"failures"`
	// Workspace is where its files live and were last saved.
	Workspace Workspace `json:"workspace"`
	// LostWorkSeconds is the work of moves whose final save did not
	// finish in time: from the last save to the move.
	LostWorkSeconds float64   `json:"lost_work_seconds"`
	Attempt         int       `json:"attempt"`
	StartedAt       time.Time `json:"started_at"`
}

// Instance is the instance an environment runs on.
type Instance struct {
	ID       string `json:"id"`
	Offering string `json:"offering"`
	Market   string `json:"market"`
	Zone     string `json:"zone"`
	// Layer is base or burst, when the capacity pool placed it.
	Layer        string    `json:"layer,omitempty"`
	PricePerHour float64   `json:"price_per_hour"`
	Since        time.Time `json:"since"`
}

// Failure is one failure an environment met, as a run's status lists
// them.
type Failure struct {
	Class    string    `json:"class"`
	Offering string    `json:"offering"`
	Message  string    `json:"message"`
	Time     time.Time `json:"time"`
}

// Workspace is an environment's files: where they live on its instance,
// the store they are saved to, and the last save.
type Workspace struct {
	// Path is the workspace on the instance: the spec's, or the agent's
	// default (reported once the agent has chosen it).
	Path string `json:"path,omitempty"`
	// StoreURL is where its saves (and the command's output) go.
	StoreURL string `json:"store_url,omitempty"`
	// LastSave is the newest save in the store; nil before the first.
	LastSave *Save `json:"last_save,omitempty"`
}

// Save is one saved workspace in the store.
type Save struct {
	// Step numbers the environment's saves: each is a checkpoint of its
	// store whose data is an archive of the workspace.
	Step  int64     `json:"step"`
	Time  time.Time `json:"time"`
	URL   string    `json:"url"`
	Bytes int64     `json:"bytes,omitempty"`
}

// Summary is the environment's one line, for the Web UI's current
// details' heading and for logs: who, where, endpoint, idle for how
// long of how long, cost.
func (s Status) Summary() string {
	parts := []string{fmt.Sprintf("%s %s", s.ID, s.State)}
	if s.Who != "" {
		parts = append(parts, "of "+s.Who)
	}
	if s.Instance != nil {
		parts = append(parts, "on "+s.Instance.where())
	}
	if s.Endpoint != "" {
		parts = append(parts, "at "+s.Endpoint)
	}
	if s.State == StateRunning {
		parts = append(parts, "idle "+s.idle())
	}
	parts = append(parts, fmt.Sprintf("$%.2f ($%.2f idle)", s.CostUSD, s.IdleCostUSD))
	return strings.Join(parts, ", ")
}

// Details is the environment's current details as markdown, for the Web
// UI (workflow.SetCurrentDetails).
func (s Status) Details() string {
	lines := []string{"**" + s.Summary() + "**", ""}
	add := func(format string, args ...any) { lines = append(lines, "- "+fmt.Sprintf(format, args...)) }
	if s.Reason != "" {
		add("**why** %s", s.Reason)
	}
	add("**who** %s, team %s, priority %d, tier %s", orDash(s.Who), orDash(s.Team), s.Priority, s.Tier)
	if s.Instance != nil {
		add("**where** %s since %s", s.Instance.where(), s.Instance.Since.UTC().Format(time.RFC3339))
	}
	if s.Endpoint != "" {
		add("**endpoint** `%s`%s", s.Endpoint, map[bool]string{false: " (not answering yet)"}[s.Serving])
	}
	add("**idle** %s", s.idle())
	add("**cost** $%.4f: %.2f h active, %.2f h idle ($%.4f)", s.CostUSD, s.ActiveHours, s.IdleHours, s.IdleCostUSD)
	if ls := s.Workspace.LastSave; ls != nil {
		add("**workspace** %s, saved %s (save %d)", orDash(s.Workspace.Path), ls.Time.UTC().Format(time.RFC3339), ls.Step)
	} else {
		add("**workspace** %s, not saved yet", orDash(s.Workspace.Path))
	}
	if s.Moves > 0 || s.LostWorkSeconds > 0 {
		add("**moves** %d (%d preemptions), %s of work lost", s.Moves, s.Preemptions, seconds(s.LostWorkSeconds))
	}
	if n := len(s.Failures); n > 0 {
		f := s.Failures[n-1]
		add("**last failure** %s %s: %s", f.Class, f.Offering, f.Message)
	}
	return strings.Join(lines, "\n")
}

// idle says how long of how long the environment has gone unused.
func (s Status) idle() string {
	of := "no timeout"
	if s.IdleTimeout > 0 {
		of = "of " + s.IdleTimeout.D().String()
	}
	return fmt.Sprintf("%s %s", seconds(s.IdleSeconds), of)
}

func (i Instance) where() string {
	w := i.ID
	if i.Offering != "" {
		w += " (" + i.Offering
		if i.Layer != "" {
			w += ", " + i.Layer
		}
		w += ")"
	}
	return w
}

func seconds(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Second).String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
