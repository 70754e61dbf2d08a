// Package pool holds the configuration of the capacity refuel manages:
// one dedicated base resource group (owned or reserved machines, listed
// by name or counted by instance type) that carries everyday load, and
// the public burst pools of offerings it overflows to.
package pool

import (
	"cmp"
	"fmt"
	"os"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

// Config is a pools file.
type Config struct {
	Base  BaseGroup   `json:"base"`
	Burst []BurstPool `json:"burst,omitempty"`
	// AgingPerHour is the priority a waiting request gains per hour of
	// waiting, so low priority is never starved; 0 means DefaultAgingPerHour.
	AgingPerHour float64 `json:"aging_per_hour,omitempty"`
	// PreemptGap is how far below a waiting request's priority a training
	// run's must be for the request to preempt it; 0 means 1, any lower
	// priority. A gap keeps near-equal jobs from preempting each other
	// back and forth.
	PreemptGap int `json:"preempt_gap,omitempty"`
	// PreemptAfter is how long a training run keeps what it was admitted
	// to before a higher priority may preempt it; 0 means at once. A run
	// preempted right after its start has paid a restart for nothing.
	PreemptAfter spec.Duration `json:"preempt_after,omitempty"`
	// ReserveTimeout is how long the head of the queue, when it fits
	// nowhere yet, may hold the capacity that could take it (idle
	// machines included) from the requests behind it; then it is given
	// back for as long, every request being placed where it fits, before
	// the head reserves again. 0 means DefaultReserveTimeout. It keeps a
	// gang that cannot gather its machines from holding them idle for
	// ever, and two gangs from waiting on each other.
	ReserveTimeout spec.Duration `json:"reserve_timeout,omitempty"`
	// GangTimeout is how long a gang granted burst capacity has to
	// acquire every node; a gang that has not is asked to give its grant
	// back and is requeued, so instances it cannot fill (a market out of
	// stock for all its nodes) go to others. 0 means DefaultGangTimeout.
	GangTimeout spec.Duration `json:"gang_timeout,omitempty"`
}

// Defaults of the gang knobs: long enough for a market to launch
// instances and for machines to drain, short enough that capacity held
// for nothing comes back within a coffee break (Kueue's waitForPodsReady
// waits 5 minutes by default).
const (
	DefaultReserveTimeout = 10 * time.Minute
	DefaultGangTimeout    = 10 * time.Minute
)

// DefaultHeartbeatTimeout finds a silent joined machine within a minute,
// as a run finds a silent instance.
const DefaultHeartbeatTimeout = time.Minute

// HeartbeatTimeoutOrDefault is HeartbeatTimeout, or its default when unset.
func (b BaseGroup) HeartbeatTimeoutOrDefault() time.Duration {
	return cmp.Or(b.HeartbeatTimeout.D(), DefaultHeartbeatTimeout)
}

// ReserveTimeoutOrDefault is ReserveTimeout, or its default when unset.
func (c Config) ReserveTimeoutOrDefault() time.Duration {
	return cmp.Or(c.ReserveTimeout.D(), DefaultReserveTimeout)
}

// GangTimeoutOrDefault is GangTimeout, or its default when unset.
func (c Config) GangTimeoutOrDefault() time.Duration {
	return cmp.Or(c.GangTimeout.D(), DefaultGangTimeout)
}

// DefaultAgingPerHour lets a priority-0 job waiting 5 h rank with a
// priority-50 job just submitted: slow enough that priority means
// something over a working day, fast enough that nothing waits past one.
const DefaultAgingPerHour = 10

// BaseGroup is the dedicated capacity: machines listed by name, and
// machines counted by instance type, which get names of their own.
type BaseGroup struct {
	Name     string      `json:"name"`
	Provider string      `json:"provider,omitempty"`
	Nodes    []BaseNode  `json:"nodes,omitempty"`
	Counts   []BaseCount `json:"counts,omitempty"`
	// Join makes the machines that have joined (`worker join`) base
	// machines, beside any listed or counted here.
	Join bool `json:"join,omitempty"`
	// TokenFile holds the token a joining machine must present; required
	// with Join. The control plane reads it; the pool workflow never sees
	// the token.
	TokenFile string `json:"token_file,omitempty"`
	// HeartbeatTimeout is how long a joined machine may be silent before
	// it is lost and its runs recover elsewhere; 0 means
	// DefaultHeartbeatTimeout.
	HeartbeatTimeout spec.Duration `json:"heartbeat_timeout,omitempty"`
}

// BaseNode is one named machine of the base group.
type BaseNode struct {
	Name         string `json:"name"`
	InstanceType string `json:"instance_type"`
	GPUs         int    `json:"gpus"`
	Zone         string `json:"zone,omitempty"`
	// PricePerHour is what an hour of the machine costs (amortised or
	// reserved), for cost reports; 0 when already paid for.
	PricePerHour float64 `json:"price_per_hour,omitempty"`
}

// BaseCount is Count identical machines of one instance type.
type BaseCount struct {
	InstanceType string  `json:"instance_type"`
	GPUs         int     `json:"gpus"`
	Count        int     `json:"count"`
	Zone         string  `json:"zone,omitempty"`
	PricePerHour float64 `json:"price_per_hour,omitempty"`
}

// BurstPool is a set of public offerings used only when the base is full.
type BurstPool struct {
	Name string `json:"name"`
	// MaxInstances caps the instances held in the pool at once (an
	// account quota or a budget); 0 means no cap.
	MaxInstances int                 `json:"max_instances,omitempty"`
	Offerings    []capacity.Offering `json:"offerings"`
}

// Node is one machine of the base inventory.
type Node struct {
	Name         string  `json:"name"`
	InstanceType string  `json:"instance_type"`
	GPUs         int     `json:"gpus"`
	Zone         string  `json:"zone,omitempty"`
	PricePerHour float64 `json:"price_per_hour,omitempty"`
}

// Inventory lists the base machines: the named ones in order, then the
// counted ones named <group>-<instance type>-<n>, n from 1 and going on
// through every count of the same instance type (one in each zone, say).
func (b BaseGroup) Inventory() []Node {
	var out []Node
	for _, n := range b.Nodes {
		out = append(out, Node(n))
	}
	return append(out, b.counted()...)
}

func (b BaseGroup) counted() []Node {
	var out []Node
	numbered := map[string]int{}
	for _, c := range b.Counts {
		for range c.Count {
			numbered[c.InstanceType]++
			out = append(out, Node{Name: fmt.Sprintf("%s-%s-%d", b.Name, c.InstanceType, numbered[c.InstanceType]), InstanceType: c.InstanceType, GPUs: c.GPUs, Zone: c.Zone, PricePerHour: c.PricePerHour})
		}
	}
	return out
}

// Offering is the node as an offering on the base market, for matching
// against a request's resources and for the cost ledger.
func (n Node) Offering(provider string) capacity.Offering {
	return capacity.Offering{Provider: provider, InstanceType: n.InstanceType, Zone: n.Zone, Market: capacity.Base, GPUs: n.GPUs, PricePerHour: n.PricePerHour}
}

// Normalize fills defaults for fields left out.
func (c *Config) Normalize() {
	if c.AgingPerHour == 0 {
		c.AgingPerHour = DefaultAgingPerHour
	}
	if c.Base.Provider == "" {
		c.Base.Provider = "base"
	}
}

// ParseConfig reads a pools file from YAML or JSON, rejecting unknown
// fields, fills defaults and validates it.
func ParseConfig(data []byte) (Config, error) {
	var c Config
	if err := spec.DecodeStrict(data, &c, "pool config", MaxDocumentBytes); err != nil {
		return Config{}, err
	}
	c.Normalize()
	return c, c.Validate()
}

// ReadConfig reads and parses a pools file.
func ReadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	c, err := ParseConfig(data)
	if err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}
