package pool

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

// namePattern keeps pool and node names usable as tags and metric labels.
var namePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,62}[a-z0-9])?$`)

const nameFix = "use 1-64 lower-case letters, digits, '.', '_' or '-', starting and ending with a letter or digit"

// Limits of a pools file, far above any real one; they keep the
// CapacityPool workflow's input and state small (README, "Capacity pools
// and admission").
const (
	MaxDocumentBytes = 1 << 20
	MaxBaseNodes     = 1024 // base.nodes entries
	MaxBaseCounts    = 256  // base.counts entries
	MaxBaseMachines  = 4096 // machines of the base group, listed and counted
	MaxBurstPools    = 64
	MaxOfferings     = 256 // offerings of one burst pool
	MaxInstances     = 10000
	MaxAgingPerHour  = 1000
	MaxPreemptAfter  = 7 * 24 * time.Hour
	MaxTimeout       = 24 * time.Hour // reserve_timeout, gang_timeout and base.heartbeat_timeout
	MaxPath          = 4096           // base.token_file
)

// Validate checks a normalised config and returns a *spec.ValidationError
// listing every problem, or nil.
func (c *Config) Validate() error {
	ve := &spec.ValidationError{Kind: "pool config"}
	machines := c.validateBase(ve)
	if len(c.Burst) > MaxBurstPools {
		ve.Add("burst", fmt.Sprintf("lists %d pools", len(c.Burst)), fmt.Sprintf("list at most %d; one pool may hold many offerings", MaxBurstPools))
	} else {
		c.validateBurst(ve)
	}
	if machines == 0 && len(c.Burst) == 0 && !c.Base.Join {
		ve.Add("base", "has no machines and there are no burst pools", "list base nodes or counts, or add a burst pool")
	}
	if c.PreemptGap < 0 || c.PreemptGap > spec.MaxPriority {
		ve.Add("preempt_gap", fmt.Sprintf("%d is outside 0..%d", c.PreemptGap, spec.MaxPriority), "give how many priority points below a waiting request a run must be to be preempted, e.g. 10; 0 lets any lower priority be")
	}
	switch {
	case c.PreemptAfter < 0:
		ve.Add("preempt_after", fmt.Sprintf("%s is negative", c.PreemptAfter), "give how long a run keeps its capacity before a higher priority may take it, e.g. 10m, or leave it out")
	case c.PreemptAfter.D() > MaxPreemptAfter:
		ve.Add("preempt_after", fmt.Sprintf("%s is more than a week", c.PreemptAfter), "give at most 168h, e.g. 10m, or leave it out")
	}
	checkTimeout(ve, "reserve_timeout", c.ReserveTimeout, "how long the head of the queue may hold idle capacity for itself", DefaultReserveTimeout)
	checkTimeout(ve, "gang_timeout", c.GangTimeout, "how long a gang granted burst capacity has to acquire every node", DefaultGangTimeout)
	if c.AgingPerHour < 0 || c.AgingPerHour > MaxAgingPerHour {
		ve.Add("aging_per_hour", fmt.Sprintf("%g is outside 0..%d", c.AgingPerHour, MaxAgingPerHour), fmt.Sprintf("give the priority gained per hour of waiting, e.g. %d", DefaultAgingPerHour))
	}
	return ve.Err()
}

func checkTimeout(ve *spec.ValidationError, field string, d spec.Duration, what string, def time.Duration) {
	short := strings.TrimSuffix(def.String(), "0s") // 10m, not 10m0s
	switch {
	case d < 0:
		ve.Add(field, fmt.Sprintf("%s is negative", d), fmt.Sprintf("give %s, e.g. %s, or leave it out for %s", what, short, short))
	case d.D() > MaxTimeout:
		ve.Add(field, fmt.Sprintf("%s is more than a day", d), fmt.Sprintf("give at most 24h, e.g. %s, or leave it out for %s", short, short))
	}
}

func (c *Config) validateBurst(ve *spec.ValidationError) {
	pools := map[string]string{}
	offerings := map[string]string{}
	for i, p := range c.Burst {
		at := fmt.Sprintf("burst[%d]", i)
		checkName(ve, at+".name", p.Name, "name the pool, e.g. aws-us-east-1")
		if prev, ok := pools[p.Name]; ok && p.Name != "" {
			ve.Add(at+".name", fmt.Sprintf("%q is also %s", p.Name, prev), "give each pool its own name")
		}
		pools[p.Name] = at + ".name"
		if p.MaxInstances < 0 || p.MaxInstances > MaxInstances {
			ve.Add(at+".max_instances", fmt.Sprintf("%d is outside 0..%d", p.MaxInstances, MaxInstances), "give the most instances to hold at once, or leave it out for no cap")
		}
		switch {
		case len(p.Offerings) == 0:
			ve.Add(at+".offerings", "is empty", "list the offerings the pool may buy")
		case len(p.Offerings) > MaxOfferings:
			ve.Add(at+".offerings", fmt.Sprintf("lists %d", len(p.Offerings)), fmt.Sprintf("list at most %d offerings in one pool", MaxOfferings))
		default:
			for j, o := range p.Offerings {
				validateOffering(ve, fmt.Sprintf("%s.offerings[%d]", at, j), o, offerings)
			}
		}
	}
}

// validateBase checks the base group and returns how many machines it
// has, counting rather than listing them: a count is the user's number.
func (c *Config) validateBase(ve *spec.ValidationError) int {
	b := c.Base
	if len(b.Nodes) > 0 || len(b.Counts) > 0 || b.Name != "" || b.Join {
		checkName(ve, "base.name", b.Name, "name the base group, e.g. dc1-a100")
	}
	switch {
	case b.Join && b.TokenFile == "":
		ve.Add("base.token_file", "is missing", "name the file holding the token a joining machine must present (base.join is set)")
	case !b.Join && b.TokenFile != "":
		ve.Add("base.token_file", "is set but base.join is not", "set base.join: true to let machines join, or drop token_file")
	case len(b.TokenFile) > MaxPath:
		ve.Add("base.token_file", fmt.Sprintf("is %d bytes long", len(b.TokenFile)), fmt.Sprintf("give a path of at most %d bytes", MaxPath))
	}
	checkTimeout(ve, "base.heartbeat_timeout", b.HeartbeatTimeout, "how long a joined machine may be silent before it is lost", DefaultHeartbeatTimeout)
	if b.Provider != "" && !spec.ValidName(b.Provider) {
		ve.Add("base.provider", fmt.Sprintf("%q is not a valid provider name", clip(b.Provider)), spec.NameFix)
	}
	if len(b.Nodes) > MaxBaseNodes || len(b.Counts) > MaxBaseCounts {
		ve.Add("base", fmt.Sprintf("lists %d nodes and %d counts", len(b.Nodes), len(b.Counts)), fmt.Sprintf("list at most %d nodes and %d counts", MaxBaseNodes, MaxBaseCounts))
		return len(b.Nodes) + len(b.Counts)
	}
	names := map[string]string{}
	for i, n := range b.Nodes {
		at := fmt.Sprintf("base.nodes[%d]", i)
		checkName(ve, at+".name", n.Name, "name the machine as the data centre does, e.g. gpu-node-01")
		if prev, ok := names[n.Name]; ok && n.Name != "" {
			ve.Add(at+".name", fmt.Sprintf("%q is also %s", n.Name, prev), "give each machine its own name")
		}
		names[n.Name] = at + ".name"
		checkMachine(ve, at, n.InstanceType, n.Zone, n.GPUs, n.PricePerHour)
	}
	machines := len(b.Nodes)
	for i, cnt := range b.Counts {
		at := fmt.Sprintf("base.counts[%d]", i)
		checkMachine(ve, at, cnt.InstanceType, cnt.Zone, cnt.GPUs, cnt.PricePerHour)
		switch {
		case cnt.Count < 1:
			ve.Add(at+".count", fmt.Sprintf("%d is below 1", cnt.Count), "give how many machines of this type the group has")
		case cnt.Count > MaxBaseMachines:
			ve.Add(at+".count", fmt.Sprintf("%d is above %d", cnt.Count, MaxBaseMachines), fmt.Sprintf("a base group has at most %d machines", MaxBaseMachines))
		default:
			machines += cnt.Count
		}
	}
	if machines > MaxBaseMachines {
		ve.Add("base", fmt.Sprintf("has %d machines", machines), fmt.Sprintf("a base group has at most %d machines; split it into burst pools or several deployments", MaxBaseMachines))
		return machines
	}
	// Counted machines are named after the group; a listed node must not
	// take one of those names.
	valid := b
	valid.Counts = slices.DeleteFunc(slices.Clone(b.Counts), func(c BaseCount) bool { return c.Count < 1 || c.Count > MaxBaseMachines })
	for _, n := range valid.counted() {
		if at, ok := names[n.Name]; ok {
			ve.Add(at, fmt.Sprintf("%q is also the name of a counted machine", n.Name), "rename the node")
		}
	}
	return machines
}

func checkMachine(ve *spec.ValidationError, at, instanceType, zone string, gpus int, price float64) {
	checkOfferingName(ve, at+".instance_type", instanceType, true, "name the instance type, e.g. p4d.24xlarge or a100-8x")
	checkOfferingName(ve, at+".zone", zone, false, "")
	if gpus < 1 || gpus > spec.MaxGPUs {
		ve.Add(at+".gpus", fmt.Sprintf("%d is outside 1..%d", gpus, spec.MaxGPUs), "give the GPUs one machine has")
	}
	checkPrice(ve, at+".price_per_hour", price, false)
}

// checkOfferingName checks an instance type, zone or provider name.
func checkOfferingName(ve *spec.ValidationError, field, name string, required bool, fix string) {
	switch {
	case strings.TrimSpace(name) == "":
		if required {
			ve.Add(field, "is required", fix)
		}
	case !spec.ValidName(name):
		ve.Add(field, fmt.Sprintf("%q is not a valid name", clip(name)), spec.NameFix)
	}
}

func checkPrice(ve *spec.ValidationError, field string, price float64, required bool) {
	switch {
	case required && price <= 0:
		ve.Add(field, "must be positive", "give the USD per instance-hour")
	case price < 0:
		ve.Add(field, "is negative", "give the amortised USD per hour, or leave it out")
	case price > spec.MaxPricePerHour:
		ve.Add(field, fmt.Sprintf("%g is above %d", price, spec.MaxPricePerHour), fmt.Sprintf("give at most %d USD per instance-hour", spec.MaxPricePerHour))
	}
}

func validateOffering(ve *spec.ValidationError, at string, o capacity.Offering, seen map[string]string) {
	checkOfferingName(ve, at+".provider", o.Provider, true, "name the provider, e.g. aws")
	checkOfferingName(ve, at+".instance_type", o.InstanceType, true, "name the instance type, e.g. p3.2xlarge")
	checkOfferingName(ve, at+".zone", o.Zone, true, "name the zone, e.g. us-east-1a")
	if o.Market != capacity.Spot && o.Market != capacity.OnDemand {
		ve.Add(at+".market", fmt.Sprintf("%q is not a burst market", clip(string(o.Market))), "use spot or on-demand; base capacity goes under base")
	}
	if o.GPUs < 1 || o.GPUs > spec.MaxGPUs {
		ve.Add(at+".gpus", fmt.Sprintf("%d is outside 1..%d", o.GPUs, spec.MaxGPUs), "give the GPUs one instance has")
	}
	checkPrice(ve, at+".price_per_hour", o.PricePerHour, true)
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
		ve.Add(field, fmt.Sprintf("%q is not a valid name", clip(name)), nameFix)
	}
}

// clip shortens a value quoted in an error.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return strings.ToValidUTF8(s[:64], "") + "…"
}
