package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveWorkdir(t *testing.T) {
	base := t.TempDir()
	code := filepath.Join(base, "code")
	if err := os.Mkdir(code, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		workdir string
		want    string
		wantErr string
	}{
		"unset is the default":         {workdir: "", want: "/default"},
		"absolute":                     {workdir: code + "/", want: code},
		"relative to the agent's dir":  {workdir: "code", want: code},
		"relative climbing out":        {workdir: "../etc", wantErr: "leaves the node agent's directory"},
		"relative climbing in and out": {workdir: "code/../../x", wantErr: "leaves the node agent's directory"},
		"missing":                      {workdir: "/no/such/dir", wantErr: "workdir /no/such/dir: no such file or directory: the job's code must be there"},
		"a file":                       {workdir: "file", wantErr: "is not a directory"},
		"NUL":                          {workdir: "a\x00b", wantErr: "NUL"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := resolveWorkdir(tc.workdir, base, "/default")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestResolveCommand(t *testing.T) {
	workdir := t.TempDir()
	bin := t.TempDir()
	script := func(dir, name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	train := script(workdir, "train.sh", 0o755)
	script(workdir, "notes.txt", 0o644)
	tool := script(bin, "tool", 0o755)
	script(workdir, "tool", 0o755) // never found through PATH's "."
	env := []string{"PATH=.:relative:" + bin}
	cases := map[string]struct {
		name    string
		want    string
		wantErr string
	}{
		"relative path in the workdir": {name: "./train.sh", want: train},
		"absolute path":                {name: tool, want: tool},
		"bare name on the trainer's PATH, not its relative entries": {name: "tool", want: tool},
		"bare name not on PATH":  {name: "train.sh", wantErr: `command "train.sh" is not on the trainer's PATH (.:relative:` + bin + `): install it on the instance`},
		"missing in the workdir": {name: "./nope.py", wantErr: "command ./nope.py (" + filepath.Join(workdir, "nope.py") + " in the workdir): no such file or directory"},
		"not executable":         {name: "./notes.txt", wantErr: "is not executable"},
		"a directory":            {name: workdir, wantErr: "is a directory"},
		"empty":                  {name: "", wantErr: "command[0]"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := resolveCommand(tc.name, env, workdir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestRunInWorkdir runs a relative command the way a JobSpec names one,
// [sh, train.sh] in its workdir, with the job's PATH.
func TestRunInWorkdir(t *testing.T) {
	h := newHarness(t)
	base := t.TempDir()
	code := filepath.Join(base, "code")
	if err := os.MkdirAll(code, 0o755); err != nil {
		t.Fatal(err)
	}
	body := "echo \"in $(pwd) attempt $REFUEL_ATTEMPT\"\necho REFUEL_PROGRESS step=1 total=1\n"
	if err := os.WriteFile(filepath.Join(code, "train.sh"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := h.config("unused", "PATH=/usr/bin:/bin")
	cfg.Command = []string{"sh", "train.sh"}
	cfg.Workdir, cfg.WorkdirBase = "code", base
	cfg.Attempt = 2
	res, err := Run(context.Background(), cfg)
	if err != nil || res.Outcome != Completed {
		t.Fatalf("Run: %+v, %v", res, err)
	}
	if want := "in " + code + " attempt 2\n"; !strings.HasPrefix(h.stdout.String(), want) {
		t.Errorf("stdout %q, want it to start %q", h.stdout.String(), want)
	}
	if res.LastStep != 1 {
		t.Errorf("last step %d; want the progress line's 1", res.LastStep)
	}
}

// TestRunCannotStart: a workdir or command that is not there fails the
// attempt with the reason, and the reason is in the attempt's output.
func TestRunCannotStart(t *testing.T) {
	cases := map[string]struct {
		edit func(*Config)
		want string
	}{
		"missing workdir": {func(c *Config) { c.Workdir = "/no/such/code" }, "workdir /no/such/code: no such file or directory"},
		"bad env":         {func(c *Config) { c.Env = append(c.Env, "=1") }, `env: "=1"`},
		"command not on PATH": {func(c *Config) { c.Command = []string{"no-such-trainer-anywhere"} },
			`command "no-such-trainer-anywhere" is not on the trainer's PATH`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			cfg := h.config("complete")
			tc.edit(&cfg)
			res, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != Failed || res.ExitCode != -1 || !strings.Contains(res.Stderr, tc.want) {
				t.Errorf("got %+v; want failed, exit -1, stderr containing %q", res, tc.want)
			}
			if got := h.storedOutput(0); !strings.Contains(got, "refuel: cannot start the trainer: ") || !strings.Contains(got, tc.want) {
				t.Errorf("stored output:\n%s\nwant the reason", got)
			}
		})
	}
}
