package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestUsageMistakesExitTwo(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no runs":       {[]string{"scale", "--runs", "0"}, "--runs must be 1 or more"},
		"a large storm": {[]string{"scale", "--storm", "1"}, "from 0 to 0.9"},
		"an argument":   {[]string{"scale", "many"}, "takes no arguments"},
		"unknown flag":  {[]string{"scale", "--bogus"}, "unknown flag: --bogus"},
		"unknown bench": {[]string{"pool"}, `unknown benchmark "pool"`},
		"no bench":      {nil, "give a benchmark"},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errs bytes.Buffer
			if code := run(tc.args, &out, &errs); code != 2 || !strings.Contains(errs.String(), tc.want) {
				t.Errorf("refuel-bench %v: exit %d, stderr %q; want 2 naming %q", tc.args, code, errs.String(), tc.want)
			}
		})
	}
	var out bytes.Buffer
	if code := run([]string{"scale", "-h"}, &out, &bytes.Buffer{}); code != 0 || !strings.Contains(out.String(), "--storm") {
		t.Errorf("refuel-bench scale -h: exit %d\n%s", code, out.String())
	}
}
