package tests

import (
	"regexp"
	"slices"
	"testing"
)

// The flag package takes a back-quoted word in a flag's usage for the
// name of its argument: `starter sim` would show as "-sim-market-time
// starter sim". Every flag of the worker's commands shows its type, or
// nothing for a switch.
func TestWorkerHelpNamesOnlyArgumentTypes(t *testing.T) {
	parallel(t)
	worker, _ := refuelBinaries(t)
	flagLine := regexp.MustCompile(`(?m)^  -([a-z0-9-]+)(?: (.+))?$`)
	types := []string{"", "string", "duration", "float", "int", "int64", "uint", "uint64", "value"}
	for _, cmd := range [][]string{nil, {"agent"}, {"join"}, {"trainer"}, {"ec2-sim"}, {"temporal-server"}} {
		r := runCLI(t, t.TempDir(), worker, append(cmd, "-h")...)
		lines := flagLine.FindAllStringSubmatch(r.stdout+r.stderr, -1)
		if len(lines) == 0 {
			t.Errorf("worker %v -h lists no flags:\n%s%s", cmd, r.stdout, r.stderr)
		}
		for _, m := range lines {
			if !slices.Contains(types, m[2]) {
				t.Errorf("worker %v -h: -%s shows %q as its argument; want its type", cmd, m[1], m[2])
			}
		}
	}
}
