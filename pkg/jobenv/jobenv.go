// Package jobenv says what of a machine's environment reaches the programs
// refuel runs for a job there: a trainer, a development environment's
// command, a model server. They keep the machine's environment, as Slurm
// and SkyPilot pass a node's on: a deep learning image sets what its
// drivers, fabrics and math libraries need (LD_LIBRARY_PATH, CUDA_*,
// NCCL_*, NVIDIA_*, FI_*, OPENBLAS_*), and a job that loses it runs without
// its interconnect or computes differently. What refuel itself holds there
// stays out: the worker's and the agent's settings and secrets, which are
// not the job's. docs/security.md lists them.
package jobenv

import (
	"slices"
	"strings"
)

// WithheldPrefixes are the prefixes of the variables refuel withholds from
// a job, whatever follows them:
//   - REFUEL_: refuel's own settings, among them codec keys, API key, TLS
//     and join token files, the sim's control token; the contract's
//     REFUEL_* variables are set afresh for each program;
//   - TEMPORAL_: the cluster's address, namespace, API key, TLS settings,
//     codec endpoint and profile (the SDK's environment configuration);
//   - AWS_, GOOGLE_, CLOUDSDK_, AZURE_: the clouds' credentials, profiles,
//     roles and tokens, with the settings that choose them.
var WithheldPrefixes = []string{"REFUEL_", "TEMPORAL_", "AWS_", "GOOGLE_", "CLOUDSDK_", "AZURE_"}

// Withheld reports whether the machine's variable name is kept from a job.
func Withheld(name string) bool {
	return slices.ContainsFunc(WithheldPrefixes, func(p string) bool { return strings.HasPrefix(name, p) })
}

// Machine is environ (NAME=value entries, as os.Environ gives them) less
// what refuel withholds, in its order. Entries without a name are dropped.
func Machine(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		if name, _, ok := strings.Cut(kv, "="); ok && name != "" && !Withheld(name) {
			out = append(out, kv)
		}
	}
	return out
}

// Names are the names of env's NAME=value entries, sorted: what an
// operator is shown of an environment, never its values.
func Names(env []string) []string {
	names := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		names = append(names, name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}
