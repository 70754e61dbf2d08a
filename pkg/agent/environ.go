package agent

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// defaultPath is the trainer's PATH when neither the agent nor the job
// has one, as a login shell would set it.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// inherited reports whether a variable of the agent's environment reaches
// the trainer. Only what says where programs, home, temp space and locale
// are: the agent's environment holds secrets (cloud credentials, Temporal
// API keys and TLS settings, codec keys) that are not the job's.
func inherited(name string) bool {
	switch name {
	case "PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR":
		return true
	}
	return strings.HasPrefix(name, "LC_")
}

// trainerEnv is the trainer's whole environment, sorted by name: the
// inherited part of agentEnv, then jobEnv, then contract; a later one
// replaces an earlier one of the same name, so the job cannot override
// the contract's variables. Entries of jobEnv that no environment can
// hold are an error naming them.
func trainerEnv(agentEnv, jobEnv, contract []string) ([]string, error) {
	env := map[string]string{}
	for _, kv := range agentEnv {
		if name, value, ok := strings.Cut(kv, "="); ok && inherited(name) {
			env[name] = value
		}
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
