package main

import (
	"bytes"
	"strings"
	"testing"
)

// Mistakes of the same kind exit alike whatever the command: a usage
// mistake 2, naming the fix, before anything is asked of the cluster; a
// failure 1. Each row has a peer that already did.
func TestMistakesOfAKindExitAlike(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		code int
		want string
	}{
		"a ServiceSpec to submit":     {[]string{"submit", "../examples/service.yaml"}, exitUsage, "start it with starter serve ../examples/service.yaml"},
		"a JobSpec to serve":          {[]string{"serve", "../examples/job.yaml"}, exitUsage, "start it with starter submit ../examples/job.yaml"},
		"a priority not a number":     {[]string{"priority", "llama", "high"}, exitUsage, `priority "high" is not an integer`},
		"a priority out of range":     {[]string{"priority", "llama", "140"}, exitUsage, "priority 140 is out of range: use an integer from 0 (lowest) to 100 (highest)"},
		"a negative priority":         {[]string{"priority", "llama", "-1"}, exitUsage, "priority -1 is out of range"},
		"a budget not money":          {[]string{"budget", "llama", "lots"}, exitUsage, `budget "lots" is not a sum of money`},
		"a negative budget":           {[]string{"budget", "llama", "-5"}, exitUsage, "budget -5 is negative: a budget must be positive"},
		"a negative budget, flagged":  {[]string{"budget", "llama", "-2.5", "--namespace", "ml"}, exitUsage, "budget -2.5 is negative"},
		"a JobSpec that is not there": {[]string{"submit", "../examples/none.yaml"}, exitFailed, "no such file"},
		"a ServiceSpec not there":     {[]string{"serve", "../examples/none.yaml"}, exitFailed, "no such file"},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errs bytes.Buffer
			if code := run(tc.args, &out, &errs); code != tc.code {
				t.Errorf("starter %v: exit %d; want %d (stderr %q)", tc.args, code, tc.code, errs.String())
			}
			if !strings.Contains(errs.String(), tc.want) {
				t.Errorf("starter %v: stderr %q; want it to say %q", tc.args, errs.String(), tc.want)
			}
			if strings.Contains(errs.String(), "unknown shorthand flag") {
				t.Errorf("starter %v: stderr %q reads a value as a flag", tc.args, errs.String())
			}
		})
	}
}
