package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"refuel/jobs"
)

// documented are the commands of the README and docs/contracts.md, each
// with whether it talks to Temporal (and so takes the client flags).
var documented = map[string]bool{
	"submit": true, "list": true, "status": true, "wait": true, "cancel": true, "logs": true,
	"pause": true, "resume": true, "priority": true, "budget": true, "interrupt": true,
	"serve": true, "load": true, "metrics": true, "service-status": true, "stop-service": true, "pool": true,
	"nodes": true, "drain": true, "undrain": true,
	"setup": true, "drill": true, "demo": true, "cost": true,
	"sim": false, "completion": false, "ui": true, "scale-bench": false, "sim-bench": false, "autoscale-bench": false,
	"bench scale": false, "bench sim": false, "bench autoscale": false,
	"estimate": false, "estimate-bench": false, "bench estimate": false,
	"serve-bench": false, "bench serve": false,
}

func TestEveryDocumentedCommandExistsWithTheClientFlags(t *testing.T) {
	root := newRoot(&bytes.Buffer{}, &bytes.Buffer{})
	for name, talks := range documented {
		t.Run(name, func(t *testing.T) {
			cmd, rest, err := root.Find(strings.Fields(name))
			if err != nil || len(rest) != 0 || cmd == root {
				t.Fatalf("starter %s: not a command (%v, rest %v)", name, err, rest)
			}
			if cmd.Short == "" || cmd.Example == "" {
				t.Errorf("starter %s: want a summary and an example", name)
			}
			for _, f := range clientFlagNames {
				if got := cmd.Flags().Lookup(f) != nil; got != talks {
					t.Errorf("starter %s: has --%s %v; want %v", name, f, got, talks)
				}
			}
		})
	}
}

func TestEveryCommandsHelpHasASynopsisAndAnExampleAndExitsZero(t *testing.T) {
	for name := range documented {
		for _, flag := range []string{"-h", "--help", "-help"} {
			args := append(strings.Fields(name), flag)
			var out, errs bytes.Buffer
			if code := run(args, &out, &errs); code != 0 {
				t.Errorf("starter %v: exit %d; want 0 (stderr %q)", args, code, errs.String())
			}
			got := out.String()
			if !strings.Contains(got, "starter "+name) || !strings.Contains(got, "Examples:\n  ") {
				t.Errorf("starter %v printed\n%s\nwant a synopsis and an example", args, got)
			}
			if strings.Count(strings.ToLower(got), "usage:") != 1 {
				t.Errorf("starter %v printed %d usage blocks; want one:\n%s", args, strings.Count(strings.ToLower(got), "usage:"), got)
			}
		}
	}
	var out bytes.Buffer
	if code := run([]string{"wait", "-h"}, &out, &bytes.Buffer{}); code != 0 || !strings.Contains(out.String(), "--timeout duration") || !strings.Contains(out.String(), "--temporal-address") {
		t.Errorf("starter wait -h: exit %d\n%s\nwant its flags and the client flags", code, out.String())
	}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		out.Reset()
		if code := run(args, &out, &bytes.Buffer{}); code != 0 || !strings.Contains(out.String(), "Exit status: 0 success") {
			t.Errorf("starter %v: exit %d, output %q", args, code, out.String())
		}
	}
}

func TestUsageMistakesExitTwoNamingTheFix(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no command":              {nil, "Usage:"},
		"unknown command":         {[]string{"launch"}, `unknown command "launch"`},
		"wait without an id":      {[]string{"wait"}, "give one run's or service's id"},
		"wait with two ids":       {[]string{"wait", "a", "b"}, "give one run's or service's id"},
		"negative wait timeout":   {[]string{"wait", "a", "--timeout", "-1s"}, "--timeout -1s"},
		"cancel without an id":    {[]string{"cancel"}, "starter cancel ID"},
		"unknown flag":            {[]string{"list", "--bogus"}, "unknown flag: --bogus"},
		"bad flag value":          {[]string{"list", "--limit", "many"}, "invalid argument"},
		"list takes no id":        {[]string{"list", "job-1"}, "takes no arguments"},
		"json without wait":       {[]string{"submit", "job.yaml", "--json"}, "use it with --wait"},
		"short retention":         {[]string{"setup", "--retention", "1h"}, "24h or more"},
		"status without an id":    {[]string{"status"}, "give one job id"},
		"serve without a file":    {[]string{"serve"}, "give one ServiceSpec file"},
		"serve with two files":    {[]string{"serve", "a.yaml", "b.yaml"}, "give one ServiceSpec file"},
		"service-status, no id":   {[]string{"service-status", "--json"}, "give one service id"},
		"stop-service, two ids":   {[]string{"stop-service", "chat", "search"}, "give one service id"},
		"pool with an id":         {[]string{"pool", "chat"}, "one pool per namespace"},
		"priority without N":      {[]string{"priority", "chat"}, "starter priority ID N"},
		"priority not a number":   {[]string{"priority", "chat", "high"}, `priority "high" is not an integer`},
		"budget not money":        {[]string{"budget", "run", "NaN"}, "0 or more"},
		"load without --qps":      {[]string{"load", "chat"}, "--qps is required"},
		"metrics without --qps":   {[]string{"metrics", "chat"}, "--qps is required"},
		"interrupt without an id": {[]string{"interrupt"}, "starter interrupt ID"},
		"interrupt, rank -1":      {[]string{"interrupt", "run", "--node", "-1"}, "ranks count from 0"},
		"completion of fish":      {[]string{"completion", "fish"}, "bash, or starter completion zsh"},
		"sim without a trace":     {[]string{"sim"}, "--trace is missing"},
		"sim, unknown flag":       {[]string{"sim", "--bogus"}, "starter sim: unknown flag: --bogus\nrun `starter sim -h` for its flags and an example\n"},
		"sim-bench, unknown flag": {[]string{"sim-bench", "--bogus"}, "starter sim-bench: unknown flag: --bogus\nrun `starter sim-bench -h` for its flags and an example\n"},
		"sim, bad policy":         {[]string{"sim", "--trace", "t.json", "--policy", "fast"}, `unknown policy "fast"`},
		"sim, bad duration":       {[]string{"sim", "--trace", "t.json", "--work", "two days"}, "write it like 48h"},
		"sim-bench, bad starts":   {[]string{"sim-bench", "--starts", "0"}, "--starts 0 is below 1"},
		"bench sim, bad starts":   {[]string{"bench", "sim", "--starts", "0"}, "--starts 0 is below 1"},
		"bench without a bench":   {[]string{"bench", "nope"}, "scale, sim, autoscale or estimate"},
		"drill, gang too large":   {[]string{"drill", "--nodes", "1000"}, "--nodes 1000"},
		"setup, negative wait":    {[]string{"setup", "--wait=-1s"}, "--wait -1s"},
		"api key file missing":    {[]string{"list", "--api-key-file", "/nonexistent/key"}, "--api-key-file"},
		"one-dash unknown flag":   {[]string{"status", "x", "-bogus"}, "unknown shorthand flag"},
		"codec keys of no file":   {[]string{"pool", "--codec-keys", "/nonexistent/keys"}, "--codec-keys"},
		"spec that is no JobSpec": {[]string{"submit", "../examples/service.yaml"}, "is a ServiceSpec (an inference service), not a JobSpec: start it with starter serve"},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errs bytes.Buffer
			if code := run(tc.args, &out, &errs); code != 2 {
				t.Errorf("starter %v: exit %d; want 2 (stderr %q)", tc.args, code, errs.String())
			}
			if !strings.Contains(errs.String(), tc.want) {
				t.Errorf("starter %v: stderr %q; want it to mention %q", tc.args, errs.String(), tc.want)
			}
			if out.Len() != 0 {
				t.Errorf("starter %v wrote to stdout: %q", tc.args, out.String())
			}
		})
	}
}

func TestCompletionScripts(t *testing.T) {
	for shell, want := range map[string]string{"bash": "__start_starter", "zsh": "#compdef starter"} {
		var out bytes.Buffer
		if code := run([]string{"completion", shell}, &out, &bytes.Buffer{}); code != 0 || !strings.Contains(out.String(), want) {
			t.Errorf("starter completion %s: exit %d, %d bytes; want a script with %q", shell, code, out.Len(), want)
		}
	}
	// The completion the scripts ask for names commands and flags.
	var out bytes.Buffer
	if code := run([]string{"__complete", "inter"}, &out, &bytes.Buffer{}); code != 0 || !strings.Contains(out.String(), "interrupt") {
		t.Errorf("completing inter: exit %d, %q", code, out.String())
	}
	out.Reset()
	if code := run([]string{"__complete", "status", "x", "--temporal-"}, &out, &bytes.Buffer{}); code != 0 || !strings.Contains(out.String(), "--temporal-address") {
		t.Errorf("completing status's flags: exit %d, %q", code, out.String())
	}
	// Every command completes its flags (a cobra flag with its help after
	// a tab; one that parses its own, alone on its line).
	for cmd, flags := range map[string][]string{"sim": {"--trace", "--min-nodes"}, "sim-bench": {"--traces"}, "autoscale-bench": {"--trace"}} {
		out.Reset()
		if code := run([]string{"__complete", cmd, "--"}, &out, &bytes.Buffer{}); code != 0 {
			t.Errorf("completing %s's flags: exit %d", cmd, code)
		}
		for _, f := range flags {
			if !strings.Contains(out.String(), f+"\n") && !strings.Contains(out.String(), f+"\t") {
				t.Errorf("completing %s's flags: %q lacks %s", cmd, out.String(), f)
			}
		}
	}
	// And the values of the flags that have a few: policies, tiers, files.
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"a policy":          {[]string{"sim", "--policy", "sky"}, "skynomad\n"},
		"the next policy":   {[]string{"sim", "--policy", "refuel,gre"}, "refuel,greedy\n"},
		"a tier":            {[]string{"sim", "--tier", "fl"}, "flexible\n"},
		"trace files":       {[]string{"sim", "--trace", ""}, "json\n:8\n"},
		"plot files":        {[]string{"sim", "--plot", ""}, "png\nsvg\n:8\n"},
		"folders of traces": {[]string{"sim-bench", "--traces", ""}, ":16\n"},
		"a number is typed": {[]string{"sim", "--nodes", ""}, ":4\n"},
	} {
		out.Reset()
		if code := run(append([]string{"__complete"}, tc.args...), &out, &bytes.Buffer{}); code != 0 || !strings.Contains(out.String(), tc.want) {
			t.Errorf("completing %s: exit %d, %q; want %q", name, code, out.String(), tc.want)
		}
	}
}

func TestOldCommandLinesStillParse(t *testing.T) {
	root := newRoot(&bytes.Buffer{}, &bytes.Buffer{})
	for name, tc := range map[string]struct{ in, want []string }{
		"one-dash long flag":   {[]string{"status", "x", "-json"}, []string{"status", "x", "--json"}},
		"one-dash with value":  {[]string{"wait", "x", "-timeout=2h"}, []string{"wait", "x", "--timeout=2h"}},
		"shorthand kept":       {[]string{"wait", "x", "-h"}, []string{"wait", "x", "-h"}},
		"setup --wait alone":   {[]string{"setup", "--wait"}, []string{"setup", "--wait"}},
		"setup --wait 3m":      {[]string{"setup", "--wait", "3m", "--retention", "72h"}, []string{"setup", "--wait=3m", "--retention", "72h"}},
		"after -- left alone":  {[]string{"status", "--", "-json"}, []string{"status", "--", "-json"}},
		"sim's one-dash flags": {[]string{"sim", "-trace", "f.json", "-json"}, []string{"sim", "--trace", "f.json", "--json"}},
		"sim-bench's too":      {[]string{"sim-bench", "-traces", "d", "-full"}, []string{"sim-bench", "--traces", "d", "--full"}},
		"unknown flag as is":   {[]string{"list", "-bogus"}, []string{"list", "-bogus"}},
		"one-dash help":        {[]string{"pool", "-help"}, []string{"pool", "--help"}},
	} {
		t.Run(name, func(t *testing.T) {
			got := normalizeArgs(root, tc.in)
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("normalizeArgs(%v) = %v; want %v", tc.in, got, tc.want)
			}
		})
	}
}

// scale-bench runs refuel-bench scale, passing on its arguments, output
// and exit status.
func TestScaleBenchRunsTheBenchBinary(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	var out, errs bytes.Buffer
	if code := run([]string{"scale-bench", "--runs", "5"}, &out, &errs); code != 1 || !strings.Contains(errs.String(), "make build builds both") {
		t.Errorf("without refuel-bench: exit %d, %q; want 1 saying how to build it", code, errs.String())
	}
	script := "#!/bin/sh\necho \"bench $*\"\necho 'refuel-bench scale: --runs must be 1 or more' >&2\nexit 2\n"
	if err := os.WriteFile(filepath.Join(dir, "refuel-bench"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"scale-bench", "--runs", "0", "-json"}, {"bench", "scale", "--runs", "0", "-json"}} {
		out.Reset()
		errs.Reset()
		if code := run(args, &out, &errs); code != 2 || out.String() != "bench scale --runs 0 -json\n" || errs.String() != "refuel-bench scale: --runs must be 1 or more\n" {
			t.Errorf("starter %v: exit %d, stdout %q, stderr %q; want the bench's own", args, code, out.String(), errs.String())
		}
	}
}

func TestExitCodes(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		want int
	}{
		"a usage mistake":           {usagef("give one job id"), exitUsage},
		"a bad flag value":          {&FlagError{"qps", "is negative", "give 0 or more"}, exitUsage},
		"a wrapped usage mistake":   {fmt.Errorf("sim: %w", usagef("bad")), exitUsage},
		"a run that failed":         {&jobs.EndedError{Ending: jobs.Ending{ID: "a", Result: jobs.ResultFailed}}, exitFailed},
		"a run still running":       {&jobs.StillRunningError{ID: "a", After: time.Minute}, exitFailed},
		"a cluster that won't talk": {errors.New("cannot reach Temporal"), exitFailed},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("%s: exit %d; want %d", name, got, tc.want)
		}
	}
}
