package pool

import (
	"fmt"
	"regexp"
	"strings"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

// namePattern keeps pool and node names usable as tags and metric labels.
var namePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,62}[a-z0-9])?$`)

const nameFix = "use 1-64 lower-case letters, digits, '.', '_' or '-', starting and ending with a letter or digit"

// Validate checks a normalised config and returns a *spec.ValidationError
// listing every problem, or nil.
func (c *Config) Validate() error {
	ve := &spec.ValidationError{Kind: "pool config"}
	c.validateBase(ve)
	pools := map[string]string{}
	offerings := map[string]string{}
	for i, p := range c.Burst {
		at := fmt.Sprintf("burst[%d]", i)
		checkName(ve, at+".name", p.Name, "name the pool, e.g. aws-us-east-1")
		if prev, ok := pools[p.Name]; ok && p.Name != "" {
			ve.Add(at+".name", fmt.Sprintf("%q is also %s", p.Name, prev), "give each pool its own name")
		}
		pools[p.Name] = at + ".name"
		if p.MaxInstances < 0 {
			ve.Add(at+".max_instances", fmt.Sprintf("%d is negative", p.MaxInstances), "give the most instances to hold at once, or leave it out for no cap")
		}
		if len(p.Offerings) == 0 {
			ve.Add(at+".offerings", "is empty", "list the offerings the pool may buy")
		}
		for j, o := range p.Offerings {
			validateOffering(ve, fmt.Sprintf("%s.offerings[%d]", at, j), o, offerings)
		}
	}
	if len(c.Base.Inventory()) == 0 && len(c.Burst) == 0 {
		ve.Add("base", "has no machines and there are no burst pools", "list base nodes or counts, or add a burst pool")
	}
	if c.PreemptGap < 0 || c.PreemptGap > spec.MaxPriority {
		ve.Add("preempt_gap", fmt.Sprintf("%d is outside 0..%d", c.PreemptGap, spec.MaxPriority), "give how many priority points below a waiting request a run must be to be preempted, e.g. 10; 0 lets any lower priority be")
	}
	if c.PreemptAfter < 0 {
		ve.Add("preempt_after", fmt.Sprintf("%s is negative", c.PreemptAfter), "give how long a run keeps its capacity before a higher priority may take it, e.g. 10m, or leave it out")
	}
	if c.AgingPerHour < 0 {
		ve.Add("aging_per_hour", fmt.Sprintf("%g is negative", c.AgingPerHour), fmt.Sprintf("give the priority gained per hour of waiting, e.g. %d", DefaultAgingPerHour))
	}
	return ve.Err()
}

func (c *Config) validateBase(ve *spec.ValidationError) {
	b := c.Base
	if len(b.Nodes) > 0 || len(b.Counts) > 0 || b.Name != "" {
		checkName(ve, "base.name", b.Name, "name the base group, e.g. dc1-a100")
	}
	names := map[string]string{}
	for i, n := range b.Nodes {
		at := fmt.Sprintf("base.nodes[%d]", i)
		checkName(ve, at+".name", n.Name, "name the machine as the data centre does, e.g. gpu-node-01")
		if prev, ok := names[n.Name]; ok && n.Name != "" {
			ve.Add(at+".name", fmt.Sprintf("%q is also %s", n.Name, prev), "give each machine its own name")
		}
		names[n.Name] = at + ".name"
		checkMachine(ve, at, n.InstanceType, n.GPUs, n.PricePerHour)
	}
	for i, cnt := range b.Counts {
		at := fmt.Sprintf("base.counts[%d]", i)
		checkMachine(ve, at, cnt.InstanceType, cnt.GPUs, cnt.PricePerHour)
		if cnt.Count < 1 {
			ve.Add(at+".count", fmt.Sprintf("%d is below 1", cnt.Count), "give how many machines of this type the group has")
		}
	}
	// Counted machines are named after the group; a listed node must not
	// take one of those names.
	for _, n := range b.Inventory()[len(b.Nodes):] {
		if prev, ok := names[n.Name]; ok {
			ve.Add(prev, fmt.Sprintf("%q is also the name of a counted machine", n.Name), "rename the node")
		}
	}
}

func checkMachine(ve *spec.ValidationError, at, instanceType string, gpus int, price float64) {
	if strings.TrimSpace(instanceType) == "" {
		ve.Add(at+".instance_type", "is required", "name the instance type, e.g. p4d.24xlarge or a100-8x")
	}
	if gpus < 1 {
		ve.Add(at+".gpus", fmt.Sprintf("%d is below 1", gpus), "give the GPUs one machine has")
	}
	if price < 0 {
		ve.Add(at+".price_per_hour", "is negative", "give the amortised USD per hour, or leave it out")
	}
}

func validateOffering(ve *spec.ValidationError, at string, o capacity.Offering, seen map[string]string) {
	for _, f := range []struct{ field, value, fix string }{
		{"provider", o.Provider, "name the provider, e.g. aws"},
		{"instance_type", o.InstanceType, "name the instance type, e.g. p3.2xlarge"},
		{"zone", o.Zone, "name the zone, e.g. us-east-1a"},
	} {
		if strings.TrimSpace(f.value) == "" {
			ve.Add(at+"."+f.field, "is required", f.fix)
		}
	}
	if o.Market != capacity.Spot && o.Market != capacity.OnDemand {
		ve.Add(at+".market", fmt.Sprintf("%q is not a burst market", o.Market), "use spot or on-demand; base capacity goes under base")
	}
	if o.GPUs < 1 {
		ve.Add(at+".gpus", fmt.Sprintf("%d is below 1", o.GPUs), "give the GPUs one instance has")
	}
	if o.PricePerHour <= 0 {
		ve.Add(at+".price_per_hour", "must be positive", "give the USD per instance-hour")
	}
	if prev, ok := seen[o.Key()]; ok {
		ve.Add(at, fmt.Sprintf("%s is also %s", o.Key(), prev), "list each offering once")
	}
	seen[o.Key()] = at
}

func checkName(ve *spec.ValidationError, field, name, fix string) {
	switch {
	case name == "":
		ve.Add(field, "is required", fix)
	case !namePattern.MatchString(name):
		ve.Add(field, fmt.Sprintf("%q is not a valid name", name), nameFix)
	}
}
