package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestEveryCommandsHelpHasASynopsisAndAnExampleAndExitsZero(t *testing.T) {
	for _, c := range commands() {
		for _, flag := range []string{"-h", "--help"} {
			var out, errs bytes.Buffer
			if code := run([]string{c.name, flag}, &out, &errs); code != 0 {
				t.Errorf("starter %s %s: exit %d; want 0 (stderr %q)", c.name, flag, code, errs.String())
			}
			got := out.String()
			if !strings.HasPrefix(got, "usage: starter "+c.name) || !strings.Contains(got, "\nexamples:\n  starter ") && !strings.Contains(got, "\nexamples:\n  TEMPORAL_ADDRESS=") {
				t.Errorf("starter %s %s printed\n%s\nwant a synopsis and an example", c.name, flag, got)
			}
		}
	}
	var out bytes.Buffer
	if code := run([]string{"wait", "-h"}, &out, &bytes.Buffer{}); code != 0 || !strings.Contains(out.String(), "-timeout duration") {
		t.Errorf("starter wait -h: exit %d\n%s\nwant the flags too", code, out.String())
	}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		out.Reset()
		if code := run(args, &out, &bytes.Buffer{}); code != 0 || !strings.Contains(out.String(), "usage: starter COMMAND") {
			t.Errorf("starter %v: exit %d, output %q", args, code, out.String())
		}
	}
}

func TestUsageMistakesExitTwoNamingTheFix(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no command":            {nil, "usage: starter COMMAND"},
		"unknown command":       {[]string{"launch"}, `unknown command "launch"`},
		"wait without an id":    {[]string{"wait"}, "give one run's or service's id"},
		"wait with two ids":     {[]string{"wait", "a", "b"}, "give one run's or service's id"},
		"negative wait timeout": {[]string{"wait", "a", "--timeout", "-1s"}, "--timeout -1s"},
		"cancel without an id":  {[]string{"cancel"}, "starter cancel ID"},
		"unknown flag":          {[]string{"list", "--bogus"}, "flag provided but not defined: -bogus"},
		"bad flag value":        {[]string{"list", "--limit", "many"}, "invalid value"},
		"list takes no id":      {[]string{"list", "job-1"}, "takes no arguments"},
		"json without wait":     {[]string{"submit", "job.yaml", "--json"}, "use it with --wait"},
		"short retention":       {[]string{"setup", "--retention", "1h"}, "24h or more"},
		"status without an id":  {[]string{"status"}, "give one job id"},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errs bytes.Buffer
			if code := run(tc.args, &out, &errs); code != 2 {
				t.Errorf("starter %v: exit %d; want 2", tc.args, code)
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
