package agent

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"refuel/pkg/jobenv"
)

// defaultPath is the trainer's PATH when neither the agent nor the job
// has one, as a login shell would set it.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// TrainerEnv is the environment the agent gives a trainer, a development
// environment's command or a model server on a machine whose environment
// is machine, for a job whose env is jobEnv (NAME=value entries) and the
// contract's variables: the same computation as the agent's, for what
// must match it (a reference run beside an agent's).
func TrainerEnv(machine, jobEnv, contract []string) ([]string, error) {
	return trainerEnv(machine, jobEnv, contract)
}

// trainerEnv is the trainer's whole environment, sorted by name: the
// machine's (agentEnv less what refuel withholds: package jobenv), then
// jobEnv, then contract; a later one replaces an earlier one of the same
// name, so the job overrides the machine and cannot override the
// contract's variables. Entries of jobEnv that no environment can hold
// are an error naming them.
func trainerEnv(agentEnv, jobEnv, contract []string) ([]string, error) {
	env := map[string]string{}
	for _, kv := range jobenv.Machine(agentEnv) {
		name, value, _ := strings.Cut(kv, "=")
		env[name] = value
	}
	var bad []string
	for _, kv := range jobEnv {
		name, value, _ := strings.Cut(kv, "=")
		if name == "" || strings.ContainsRune(kv, 0) {
			bad = append(bad, fmt.Sprintf("%q", kv))
			continue
		}
		env[name] = value
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("env: %s: a variable needs a name without '=' and no NUL bytes in name or value", strings.Join(bad, ", "))
	}
	for _, kv := range contract {
		name, value, _ := strings.Cut(kv, "=")
		env[name] = value
	}
	if _, ok := env["PATH"]; !ok {
		env["PATH"] = defaultPath
	}
	out := make([]string, 0, len(env))
	for _, name := range slices.Sorted(maps.Keys(env)) {
		out = append(out, name+"="+env[name])
	}
	return out, nil
}

// lookupEnv returns the value of name in env.
func lookupEnv(env []string, name string) string {
	for _, kv := range env {
		if n, v, _ := strings.Cut(kv, "="); n == name {
			return v
		}
	}
	return ""
}

// environmentLine tells an operator, in the attempt's output, which
// variables the program got and which of the machine's refuel withheld:
// names only, never values (`starter logs` shows it).
func environmentLine(env, machine []string) string {
	var withheld []string
	for _, name := range jobenv.Names(machine) {
		if jobenv.Withheld(name) {
			withheld = append(withheld, name)
		}
	}
	line := fmt.Sprintf("environment: %d variables: %s", len(env), strings.Join(jobenv.Names(env), " "))
	if len(withheld) > 0 {
		line += fmt.Sprintf("; withheld from the machine's: %s", strings.Join(withheld, " "))
	}
	return line
}
