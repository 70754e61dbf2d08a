package tests

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"refuel/deploy"
)

// TestDeployFilesPassOnlyFlagsAndVariablesTheBinariesHave holds every flag
// and environment variable the compose file and the Kubernetes manifests
// give refuel's binaries against the binaries' own -h: no Docker engine
// runs here, so this is what keeps those files honest.
func TestDeployFilesPassOnlyFlagsAndVariablesTheBinariesHave(t *testing.T) {
	parallel(t)
	worker, starter := refuelBinaries(t)
	invs, err := deploy.Invocations(filepath.Join("..", "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	// A flag line of the flag package's help (  -name) or cobra's
	// (  -h, --name or       --name).
	flagLine := regexp.MustCompile(`(?m)^\s+(?:-[a-z], )?--?([a-z0-9-]+)`)
	help := map[string]string{}
	helpOf := func(bin string, args ...string) string {
		key := bin + " " + strings.Join(args, " ")
		if h, ok := help[key]; ok {
			return h
		}
		r := runCLI(t, t.TempDir(), bin, append(args, "-h")...)
		help[key] = r.stdout + r.stderr
		return help[key]
	}
	// The standard Temporal client environment every binary reads.
	temporalEnv := []string{"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_API_KEY", "TEMPORAL_TLS", "TEMPORAL_PROFILE"}
	// What the NVIDIA container runtime reads, for the trainers of joined machines.
	runtimeEnv := []string{"NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"}
	for _, inv := range invs {
		var h string
		switch inv.Binary {
		case "worker":
			if len(inv.Args) > 0 && inv.Args[0] == "join" {
				h = helpOf(worker, "join")
			} else {
				h = helpOf(worker)
			}
		case "starter":
			if len(inv.Args) == 0 {
				t.Errorf("%s: starter without a command", inv.Where)
				continue
			}
			h = helpOf(starter, inv.Args[0])
		default:
			t.Errorf("%s: unknown binary %s", inv.Where, inv.Binary)
			continue
		}
		var known []string
		for _, m := range flagLine.FindAllStringSubmatch(h, -1) {
			known = append(known, m[1])
		}
		if len(known) == 0 {
			t.Fatalf("%s -h lists no flags:\n%s", inv.Binary, h)
		}
		for _, f := range deploy.Flags(inv.Args) {
			if !slices.Contains(known, f) {
				t.Errorf("%s passes --%s, which %s does not have", inv.Where, f, inv.Binary)
			}
		}
		args := strings.Join(inv.Args, " ")
		for _, e := range inv.Env {
			switch {
			case slices.Contains(temporalEnv, e):
			case slices.Contains(runtimeEnv, e):
			case strings.Contains(args, "$("+e+")"): // Kubernetes expands it into the arguments
			case strings.HasPrefix(e, "REFUEL_") && strings.Contains(h, "env "+e+")"):
			default:
				t.Errorf("%s sets %s, which %s does not read", inv.Where, e, inv.Binary)
			}
		}
	}
}
