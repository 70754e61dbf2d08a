package activities

import (
	"fmt"
	"maps"
	"regexp"

	"refuel/pkg/capacity"
)

// DefaultDeployment is the deployment of a worker that names none.
const DefaultDeployment = "default"

// A deployment is one refuel control plane (one Temporal namespace or
// cluster). Each tags its instances with its name, so several can share
// one cloud account and a janitor releases only its own.
var deploymentPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,62}[a-z0-9])?$`)

// CheckDeployment says what is wrong with a deployment name, or nil. The
// name is a tag value on every instance.
func CheckDeployment(name string) error {
	if !deploymentPattern.MatchString(name) {
		return fmt.Errorf("deployment %q is not a valid name: use 1-64 lower-case letters, digits, '.', '_' or '-', starting and ending with a letter or digit, e.g. prod-us", name)
	}
	return nil
}

// deploymentOf is the deployment a worker's activities act for.
func deploymentOf(name string) string {
	if name == "" {
		return DefaultDeployment
	}
	return name
}

// withDeployment returns tags plus the deployment's tag, leaving tags as
// they were: the request's map belongs to the caller.
func withDeployment(tags map[string]string, deployment string) map[string]string {
	out := maps.Clone(tags)
	if out == nil {
		out = map[string]string{}
	}
	out[capacity.TagDeployment] = deploymentOf(deployment)
	return out
}
