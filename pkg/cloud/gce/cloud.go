package gce

import (
	"context"
	"fmt"
	"path"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"
	compute "google.golang.org/api/compute/v1"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/local"
)

// Compute Engine's instance statuses that refuel reads.
const (
	StatusProvisioning = "PROVISIONING"
	StatusStaging      = "STAGING"
	StatusRunning      = "RUNNING"
	StatusStopping     = "STOPPING"
	StatusTerminated   = "TERMINATED"
)

// Compute Engine's provisioning model and termination action of a spot VM.
const (
	ProvisioningSpot  = "SPOT"
	TerminationDelete = "DELETE"
)

// OperationPreempted is the type of the zone operation Compute Engine
// records when it preempts a spot VM.
const OperationPreempted = "compute.instances.preempted"

// Cloud is the Compute Engine provider. Safe for concurrent use: beyond
// configuration it only remembers which zone each instance it saw is in;
// Compute Engine is the record of every instance.
type Cloud struct {
	cfg   Config
	svc   *compute.Service
	log   *zap.Logger
	types map[string]MachineType

	mu    sync.Mutex
	zones map[string]string // instance name → its zone
}

var _ capacity.Provider = (*Cloud)(nil)

// New returns a Compute Engine provider. It checks the project and finds
// the credentials at once, failing with the setting to fix; it makes no
// Compute Engine call.
func New(ctx context.Context, cfg Config) (*Cloud, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("gce provider: %w", err)
	}
	svc, err := cfg.service(ctx)
	if err != nil {
		return nil, fmt.Errorf("gce provider: %w", err)
	}
	c := &Cloud{cfg: cfg, svc: svc, log: cfg.Logger.Named("gce"), types: map[string]MachineType{}, zones: map[string]string{}}
	for _, t := range cfg.MachineTypes {
		c.types[t.Name] = t
	}
	return c, nil
}

// Name implements capacity.Provider.
func (c *Cloud) Name() string { return c.cfg.Name }

// Project is the project the provider creates instances in.
func (c *Cloud) Project() string { return c.cfg.Project }

// Release implements capacity.Provider: it deletes the instance and
// waits for the deletion. One Compute Engine no longer has is a
// *capacity.NotFoundError.
func (c *Cloud) Release(ctx context.Context, id string) error {
	zone, err := c.locate(ctx, id)
	if err != nil {
		return err
	}
	op, err := c.svc.Instances.Delete(c.cfg.Project, zone, id).Context(ctx).Do()
	if isNotFound(err) {
		c.forget(id)
		return &capacity.NotFoundError{ID: id}
	}
	if err != nil {
		return c.wrap(err, "deleting %s in %s", id, zone)
	}
	op, err = c.wait(ctx, zone, op)
	if err != nil {
		return c.wrap(err, "waiting for the deletion of %s in %s", id, zone)
	}
	if code, _, msg, failed := operationError(op); failed {
		if code == CodeResourceNotFound {
			c.forget(id)
			return &capacity.NotFoundError{ID: id}
		}
		return fmt.Errorf("deleting %s in %s: %s: %s", id, zone, code, msg)
	}
	c.forget(id)
	c.log.Info("instance released", zap.String("instance", id), zap.String("zone", zone))
	return nil
}

// Describe implements capacity.Provider. A spot VM that Compute Engine
// is stopping was preempted: its notice is out. One that is gone (spot
// VMs are deleted when preempted) is StateTerminated with a
// *capacity.NotFoundError.
func (c *Cloud) Describe(ctx context.Context, id string) (capacity.Instance, capacity.State, error) {
	zone, err := c.locate(ctx, id)
	if capacity.IsNotFound(err) {
		return capacity.Instance{}, capacity.StateTerminated, err
	}
	if err != nil {
		return capacity.Instance{}, "", err
	}
	inst, err := c.svc.Instances.Get(c.cfg.Project, zone, id).Context(ctx).Do()
	if isNotFound(err) {
		c.forget(id)
		return capacity.Instance{}, capacity.StateTerminated, &capacity.NotFoundError{ID: id}
	}
	if err != nil {
		return capacity.Instance{}, "", c.wrap(err, "describing %s in %s", id, zone)
	}
	return c.instance(inst), stateOf(inst), nil
}

// stateOf maps Compute Engine's statuses onto refuel's.
func stateOf(inst *compute.Instance) capacity.State {
	switch inst.Status {
	case StatusProvisioning, StatusStaging:
		return capacity.StatePending
	case StatusRunning:
		return capacity.StateRunning
	case StatusStopping:
		// refuel deletes its instances and never stops one: a spot VM
		// stopping is being preempted.
		if isSpot(inst) {
			return capacity.StateInterrupted
		}
	}
	return capacity.StateTerminated
}

func isSpot(inst *compute.Instance) bool {
	return inst.Scheduling != nil && (inst.Scheduling.ProvisioningModel == ProvisioningSpot || inst.Scheduling.Preemptible)
}

// List implements capacity.Provider: the provisioning, staging and
// running instances whose labels and tags include every given tag, or
// every instance refuel manages when tags is empty. One aggregatedList
// call (a page per 500 instances) filtered by label; the exact tags kept
// in each instance's metadata settle what sanitizing the labels merged.
func (c *Cloud) List(ctx context.Context, tags map[string]string) ([]capacity.Instance, error) {
	if len(tags) == 0 {
		tags = map[string]string{capacity.TagManagedBy: capacity.ManagedBy}
	}
	var out []capacity.Instance
	err := c.svc.Instances.AggregatedList(c.cfg.Project).Filter(labelFilter(tags)).ReturnPartialSuccess(true).
		Pages(ctx, func(page *compute.InstanceAggregatedList) error {
			for _, scoped := range page.Items {
				for _, inst := range scoped.Instances {
					switch inst.Status {
					case StatusProvisioning, StatusStaging, StatusRunning:
					default:
						continue
					}
					if i := c.instance(inst); local.HasTags(i.Tags, tags) {
						out = append(out, i)
					}
				}
			}
			return nil
		})
	if err != nil {
		return nil, c.projectError(err, "listing instances")
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// locate is the zone of an instance: remembered, or found with one
// aggregatedList call by its name.
func (c *Cloud) locate(ctx context.Context, name string) (string, error) {
	c.mu.Lock()
	zone, ok := c.zones[name]
	c.mu.Unlock()
	if ok {
		return zone, nil
	}
	inst, err := c.find(ctx, name)
	if err != nil {
		return "", err
	}
	if inst == nil {
		return "", &capacity.NotFoundError{ID: name}
	}
	return path.Base(inst.Zone), nil
}

// find looks for an instance by name in every zone; nil when there is
// none.
func (c *Cloud) find(ctx context.Context, name string) (*compute.Instance, error) {
	var found *compute.Instance
	err := c.svc.Instances.AggregatedList(c.cfg.Project).Filter(fmt.Sprintf("name = %q", name)).ReturnPartialSuccess(true).
		Pages(ctx, func(page *compute.InstanceAggregatedList) error {
			for _, scoped := range page.Items {
				for _, inst := range scoped.Instances {
					if inst.Name == name && found == nil {
						found = inst
					}
				}
			}
			return nil
		})
	if err != nil {
		return nil, c.projectError(err, "looking for instance "+name)
	}
	if found != nil {
		c.remember(name, path.Base(found.Zone))
	}
	return found, nil
}

func (c *Cloud) remember(name, zone string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.zones[name] = zone
}

func (c *Cloud) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.zones, name)
}

// wait waits until an operation is done: zoneOperations.wait returns
// after at most two minutes, done or not, so it is asked again.
func (c *Cloud) wait(ctx context.Context, zone string, op *compute.Operation) (*compute.Operation, error) {
	for op.Status != "DONE" {
		var err error
		op, err = c.svc.ZoneOperations.Wait(c.cfg.Project, zone, op.Name).Context(ctx).Do()
		if err != nil {
			return nil, err
		}
	}
	return op, nil
}

// instance turns a Compute Engine instance into refuel's: its ID is its
// name, which its node agent reads from the metadata server (instance/
// name) to serve its task queue, and its address its internal IP.
func (c *Cloud) instance(inst *compute.Instance) capacity.Instance {
	zone := path.Base(inst.Zone)
	c.remember(inst.Name, zone)
	m := capacity.OnDemand
	if isSpot(inst) {
		m = capacity.Spot
	}
	o := c.offering(path.Base(inst.MachineType), zone, m)
	var addr string
	if len(inst.NetworkInterfaces) > 0 && inst.NetworkInterfaces[0] != nil {
		addr = inst.NetworkInterfaces[0].NetworkIP
	}
	launched, _ := time.Parse(time.RFC3339, inst.CreationTimestamp)
	return capacity.Instance{
		ID: inst.Name, Offering: o, TaskQueue: local.TaskQueueFor(inst.Name),
		Address: addr, LaunchedAt: launched, Tags: tagsOf(inst),
	}
}

// offering is the catalogue's offering of a machine type in a zone on a
// market, priced from the price table (0 when it has no price); its GPUs
// are the catalogue's when it attaches them, otherwise gpus.
func (c *Cloud) offering(machineType, zone string, m capacity.Market) capacity.Offering {
	o := capacity.Offering{Provider: c.cfg.Name, InstanceType: machineType, Zone: zone, Market: m, GPUs: c.types[machineType].GPUs}
	if p, ok := c.cfg.Prices.Lookup(machineType, RegionOf(zone)); ok {
		o.PricePerHour = p.OnDemand
		if m == capacity.Spot {
			o.PricePerHour = p.Spot
		}
	}
	if o.GPUs == 0 {
		o.GPUs = gpusOf(machineType)
	}
	return o
}

// Preemption is one spot VM Compute Engine preempted.
type Preemption struct {
	Instance string // its name, the capacity.Instance ID
	Zone     string
	At       time.Time
}

// Preemptions lists the spot VMs preempted in zones since a time, from
// the zones' compute.instances.preempted operations: how the control
// plane learns of a preemption whose notice no agent heard. zones nil
// means the configured zones, or every zone of the project.
func (c *Cloud) Preemptions(ctx context.Context, zones []string, since time.Time) ([]Preemption, error) {
	if zones == nil {
		zones = c.cfg.Zones
	}
	if len(zones) == 0 {
		var err error
		if zones, err = c.upZones(ctx); err != nil {
			return nil, err
		}
	}
	var out []Preemption
	for _, zone := range zones {
		err := c.svc.ZoneOperations.List(c.cfg.Project, zone).Filter(fmt.Sprintf("operationType = %q", OperationPreempted)).
			Pages(ctx, func(page *compute.OperationList) error {
				for _, op := range page.Items {
					at, _ := time.Parse(time.RFC3339Nano, op.InsertTime)
					if op.OperationType == OperationPreempted && !at.Before(since) {
						out = append(out, Preemption{Instance: path.Base(op.TargetLink), Zone: zone, At: at})
					}
				}
				return nil
			})
		if err != nil {
			return nil, c.projectError(err, "listing the preemptions in "+zone)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, nil
}
