package spec

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func dur(d time.Duration) *Duration {
	v := Duration(d)
	return &v
}

func TestParseDevSpecAcceptsYAMLAndJSON(t *testing.T) {
	cases := map[string]string{
		"yaml": `
id: ana-notebook
team: research
priority: 70
tier: flexible
resources: {gpus: 2, instance_types: [g5.2xlarge]}
command: [jupyter, lab, --no-browser]
env: {NOTEBOOK_TOKEN: secret}
workspace: /home/ana/work/
workspace_interval: 2m
idle_timeout: 45m
max_duration: 72h
budget_usd: 120
`,
		"json": `{"id":"ana-notebook","team":"research","priority":70,"tier":"flexible",
"resources":{"gpus":2,"instance_types":["g5.2xlarge"]},"command":["jupyter","lab","--no-browser"],
"env":{"NOTEBOOK_TOKEN":"secret"},"workspace":"/home/ana/work/","workspace_interval":"2m",
"idle_timeout":"45m","max_duration":"72h","budget_usd":120}`,
	}
	want := DevSpec{
		ID: "ana-notebook", Team: "research", Priority: 70, Tier: TierFlexible,
		Resources: Resources{GPUs: 2, InstanceTypes: []string{"g5.2xlarge"}},
		Command:   []string{"jupyter", "lab", "--no-browser"}, Env: map[string]string{"NOTEBOOK_TOKEN": "secret"},
		Workspace: "/home/ana/work/", WorkspaceInterval: Duration(2 * time.Minute), IdleTimeout: dur(45 * time.Minute),
		MaxDuration: Duration(72 * time.Hour), BudgetUSD: 120,
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseDevSpec([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, want); diff != "" {
				t.Errorf("got(-), want(+):\n%s", diff)
			}
		})
	}
}

func TestParseDevSpecFillsDefaults(t *testing.T) {
	cases := map[string]struct {
		doc  string
		idle time.Duration
	}{
		"idle_timeout left out": {"id: dev\ncommand: [sleep, infinity]\n", DefaultIdleTimeout},
		"idle_timeout 0: never": {"id: dev\ncommand: [sleep, infinity]\nidle_timeout: 0\n", 0},
		"idle_timeout as text":  {"id: dev\ncommand: [sleep, infinity]\nidle_timeout: 0s\n", 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseDevSpec([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			if got.Tier != TierCritical || got.Resources.GPUs != DefaultGPUs || got.SaveEvery() != DefaultWorkspaceInterval ||
				got.Workspace != "" || got.MaxDuration != 0 {
				t.Errorf("defaults not filled: %+v", got)
			}
			if got.Idle() != tc.idle {
				t.Errorf("idle timeout %s; want %s", got.Idle(), tc.idle)
			}
		})
	}
}

func TestDevSpecValidateNamesEveryBadField(t *testing.T) {
	cases := map[string]struct {
		edit   func(*DevSpec)
		fields []string
	}{
		"missing id":           {func(s *DevSpec) { s.ID = "" }, []string{"id"}},
		"bad id":               {func(s *DevSpec) { s.ID = "Ana's box" }, []string{"id"}},
		"bad team":             {func(s *DevSpec) { s.Team = "-x" }, []string{"team"}},
		"priority":             {func(s *DevSpec) { s.Priority = 101 }, []string{"priority"}},
		"deadline tier":        {func(s *DevSpec) { s.Tier = TierDeadline }, []string{"tier"}},
		"unknown tier":         {func(s *DevSpec) { s.Tier = "spot" }, []string{"tier"}},
		"missing command":      {func(s *DevSpec) { s.Command = nil }, []string{"command"}},
		"empty program":        {func(s *DevSpec) { s.Command = []string{" "} }, []string{"command[0]"}},
		"NUL in an argument":   {func(s *DevSpec) { s.Command = []string{"sh", "a\x00b"} }, []string{"command[1]"}},
		"reserved env":         {func(s *DevSpec) { s.Env = map[string]string{"REFUEL_PORT": "1"} }, []string{"env.REFUEL_PORT"}},
		"bad env name":         {func(s *DevSpec) { s.Env = map[string]string{"1X": "1"} }, []string{`env["1X"]`}},
		"relative workspace":   {func(s *DevSpec) { s.Workspace = "work" }, []string{"workspace"}},
		"home not expanded":    {func(s *DevSpec) { s.Workspace = "~/work" }, []string{"workspace"}},
		"dot-dot in workspace": {func(s *DevSpec) { s.Workspace = "/home/ana/../bob" }, []string{"workspace"}},
		"doubled slash":        {func(s *DevSpec) { s.Workspace = "/home//ana" }, []string{"workspace"}},
		"the root":             {func(s *DevSpec) { s.Workspace = "/" }, []string{"workspace"}},
		"a system directory":   {func(s *DevSpec) { s.Workspace = "/etc" }, []string{"workspace"}},
		"under /proc":          {func(s *DevSpec) { s.Workspace = "/proc/self" }, []string{"workspace"}},
		"control character":    {func(s *DevSpec) { s.Workspace = "/home/a\nb" }, []string{"workspace"}},
		"long workspace":       {func(s *DevSpec) { s.Workspace = "/" + strings.Repeat("a", MaxWorkspaceBytes) }, []string{"workspace"}},
		"negative interval":    {func(s *DevSpec) { s.WorkspaceInterval = Duration(-time.Second) }, []string{"workspace_interval"}},
		"tiny interval":        {func(s *DevSpec) { s.WorkspaceInterval = Duration(time.Millisecond) }, []string{"workspace_interval"}},
		"huge interval":        {func(s *DevSpec) { s.WorkspaceInterval = Duration(25 * time.Hour) }, []string{"workspace_interval"}},
		"negative idle":        {func(s *DevSpec) { s.IdleTimeout = dur(-time.Minute) }, []string{"idle_timeout"}},
		"absurd idle":          {func(s *DevSpec) { s.IdleTimeout = dur(10000 * time.Hour) }, []string{"idle_timeout"}},
		"idle under a sample":  {func(s *DevSpec) { s.IdleTimeout = dur(time.Second) }, []string{"idle_timeout"}},
		"negative duration":    {func(s *DevSpec) { s.MaxDuration = Duration(-time.Hour) }, []string{"max_duration"}},
		"duration over a year": {func(s *DevSpec) { s.MaxDuration = Duration(MaxWork + time.Hour) }, []string{"max_duration"}},
		"negative budget":      {func(s *DevSpec) { s.BudgetUSD = -1 }, []string{"budget_usd"}},
		"gang":                 {func(s *DevSpec) { s.Resources.Nodes = 2 }, []string{"resources.nodes"}},
		"elastic":              {func(s *DevSpec) { s.Resources.ShrinkAfter = Duration(time.Minute) }, []string{"resources.min_nodes"}},
		"too many GPUs":        {func(s *DevSpec) { s.Resources.GPUs = MaxGPUs + 1 }, []string{"resources.gpus"}},
		"several": {func(s *DevSpec) { s.Command = nil; s.Workspace = "work"; s.IdleTimeout = dur(-time.Second) },
			[]string{"command", "workspace", "idle_timeout"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := DevSpec{ID: "dev", Command: []string{"sleep", "infinity"}}
			s.Normalize()
			tc.edit(&s)
			var ve *ValidationError
			if err := s.Validate(); !errors.As(err, &ve) {
				t.Fatalf("error %v; want *ValidationError", err)
			}
			var got []string
			for _, f := range ve.Fields {
				got = append(got, f.Field)
				if f.Fix == "" {
					t.Errorf("%s: no fix given", f.Field)
				}
			}
			if diff := cmp.Diff(got, tc.fields); diff != "" {
				t.Errorf("fields got(-), want(+):\n%s", diff)
			}
			if ve.Kind != "DevSpec" {
				t.Errorf("kind %q; want DevSpec", ve.Kind)
			}
		})
	}
}

func TestDevSpecAcceptsWhatItDocuments(t *testing.T) {
	for name, edit := range map[string]func(*DevSpec){
		"trailing slash":         func(s *DevSpec) { s.Workspace = "/home/ana/work/" },
		"under a system dir":     func(s *DevSpec) { s.Workspace = "/var/lib/dev" },
		"never idle":             func(s *DevSpec) { s.IdleTimeout = dur(0) },
		"the shortest idle":      func(s *DevSpec) { s.IdleTimeout = dur(MinIdleTimeout) },
		"a week idle":            func(s *DevSpec) { s.IdleTimeout = dur(MaxIdleTimeout) },
		"a second between saves": func(s *DevSpec) { s.WorkspaceInterval = Duration(time.Second) },
		"one node said":          func(s *DevSpec) { s.Resources.Nodes = 1 },
	} {
		t.Run(name, func(t *testing.T) {
			s := DevSpec{ID: "dev", Command: []string{"sleep", "infinity"}}
			s.Normalize()
			edit(&s)
			if err := s.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestParseDevSpecRejectsUnknownAndMistypedFields(t *testing.T) {
	cases := map[string]struct{ doc, field, mention string }{
		"typo":          {"id: d\ncommand: [x]\nidle_timout: 5m\n", "idle_timout", "did you mean idle_timeout?"},
		"a job's field": {"id: d\ncommand: [x]\nwork: 5h\n", "work", "is not a field of a DevSpec"},
		"case":          {"id: d\ncommand: [x]\nWorkspace: /w\n", "Workspace", "Field names are case-sensitive"},
		"command text":  {"id: d\ncommand: jupyter lab\n", "command", "write a list"},
		"bad duration":  {"id: d\ncommand: [x]\nidle_timeout: soon\n", "idle_timeout", `"soon" is not a duration`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseDevSpec([]byte(tc.doc))
			var ve *ValidationError
			if !errors.As(err, &ve) || !ve.Has(tc.field) || !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %v; want a field error on %s mentioning %q", err, tc.field, tc.mention)
			}
		})
	}
}

// What starter accepts, the workflow accepts the same once sent as JSON,
// idle_timeout 0 (never) included.
func TestDevSpecSurvivesTheTripToTheWorkflow(t *testing.T) {
	for _, idle := range []string{"", "idle_timeout: 0\n", "idle_timeout: 90s\n"} {
		s, err := ParseDevSpec([]byte("id: d\ncommand: [x]\n" + idle))
		if err != nil {
			t.Fatal(err)
		}
		j, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeDevSpecJSON(j)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(s, again); diff != "" {
			t.Errorf("%s: got(-), want(+):\n%s", j, diff)
		}
	}
}

// The JobSpec an environment's attempts run under is a valid one.
func TestDevSpecJobIsValid(t *testing.T) {
	for _, max := range []time.Duration{0, 8 * time.Hour} {
		s := DevSpec{ID: "dev", Team: "research", Priority: 70, Command: []string{"sleep", "infinity"},
			Env: map[string]string{"A": "b"}, MaxDuration: Duration(max), BudgetUSD: 9}
		s.Normalize()
		js := s.Job()
		js.Normalize()
		if err := js.Validate(now); err != nil {
			t.Fatalf("max_duration %s: %v", max, err)
		}
		if js.ID != "dev" || js.Tier != TierCritical || js.Priority != 70 || js.Checkpoint.Keep != WorkspaceKeep ||
			js.Command[0] != "sleep" || js.Env["A"] != "b" || js.BudgetUSD != 9 {
			t.Errorf("job %+v does not carry the environment's fields", js)
		}
		if want := max; want > 0 && js.Work.D() != want {
			t.Errorf("work %s; want max_duration %s", js.Work, want)
		}
	}
}

// The example environments in examples/ are valid as shipped, and state
// the usual priority of development work.
func TestExampleDevSpecs(t *testing.T) {
	for _, name := range []string{"dev-http.yaml", "dev-notebook.yaml", "dev-ssh.yaml"} {
		t.Run(name, func(t *testing.T) {
			s, err := ReadDevSpec(filepath.Join("..", "..", "examples", name))
			if err != nil {
				t.Fatal(err)
			}
			if s.Priority != 70 {
				t.Errorf("priority %d; the examples give development 70", s.Priority)
			}
		})
	}
}
