package gce

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"path"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
	compute "google.golang.org/api/compute/v1"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/local"
)

// Acquire implements capacity.Provider. It tries the offerings in order,
// one instances.insert each, and waits for each insert's operation; the
// first instance that runs wins.
//
// Every insert of an attempt names the same instance (InstanceName) and
// carries a requestId derived from the attempt and the offering
// (RequestID). Before inserting, Acquire looks the name up in every zone:
// a retried activity finds the instance its first try created and waits
// for it instead of creating a second. Compute Engine refuses a second
// instance of one name in a zone, and ignores an insert whose requestId
// it has seen, which covers a retry racing with the first try's insert.
// An offering is abandoned for the next only when Compute Engine answered
// definitively; after throttling, a transport or server failure it may
// have created the instance, so Acquire returns and the retry looks again.
//
// Acquire returns once the instance runs, as its node agent starts from
// the image's startup script.
func (c *Cloud) Acquire(ctx context.Context, req capacity.Request) (capacity.Instance, error) {
	name := InstanceName(req)
	offerings, skipped := c.plan(req)
	if len(offerings) > 0 {
		found, err := c.find(ctx, name)
		if len(capacity.Failures(err)) > 0 {
			return capacity.Instance{}, err // classified: a project that does not exist, credentials refused
		}
		if err != nil {
			code, class, msg := c.explain(err)
			return capacity.Instance{}, failAll(offerings, class, code, "looking for this attempt's instance "+name+": "+msg)
		}
		if found != nil {
			inst, _, err := c.ready(ctx, req, found.Name, fromZone(found), offerings)
			return inst, err
		}
	}
	var failures []error
	for _, o := range offerings {
		inst, settled, err := c.launch(ctx, req, name, o, offerings)
		if err == nil {
			return inst, nil
		}
		failures = append(failures, err)
		if !settled || ctx.Err() != nil {
			break
		}
	}
	failures = append(failures, skipped...)
	if len(failures) == 0 {
		return capacity.Instance{}, capacity.NewError(capacity.SpecMismatch, capacity.Offering{Provider: c.cfg.Name}, "", "the request named no offerings")
	}
	return capacity.Instance{}, errors.Join(failures...)
}

// plan keeps the request's offerings this provider sells, once each, in
// order; the others fail at once as spec mismatches.
func (c *Cloud) plan(req capacity.Request) (offerings []capacity.Offering, skipped []error) {
	seen := map[string]bool{}
	for _, o := range req.Offerings {
		switch {
		case o.Provider != c.cfg.Name || (o.Market != capacity.Spot && o.Market != capacity.OnDemand):
			skipped = append(skipped, capacity.NewError(capacity.SpecMismatch, o, "", "provider %q sells only its own spot and on-demand offerings", c.cfg.Name))
		case c.types[o.InstanceType].Name == "":
			skipped = append(skipped, capacity.NewError(capacity.SpecMismatch, o, "", "machine type %s is not in the catalogue (Config.MachineTypes)", o.InstanceType))
		case !seen[o.Key()]:
			seen[o.Key()] = true
			offerings = append(offerings, o)
		}
	}
	return offerings, skipped
}

// InstanceName is the name of the instance of a request's attempt: the
// same for every try of the attempt and every offering it tries, a new
// one for the next attempt. Compute Engine names are lowercase letters,
// digits and '-', at most 63 characters, starting with a letter.
func InstanceName(req capacity.Request) string {
	sum := sha256.Sum256([]byte(req.IdempotencyToken()))
	return fmt.Sprintf("refuel-%s-%d", hex.EncodeToString(sum[:])[:16], req.Attempt)
}

// requestIDSpace is the UUID namespace request IDs are derived in.
var requestIDSpace = uuid.MustParse("0e6f1f1c-54e3-4a53-9b6b-5f3c2a6f0d41")

// RequestID is the requestId of the insert of a request's attempt on one
// offering: a UUID (what Compute Engine requires) derived from the
// attempt's idempotency token and the offering, so a retry resends the
// same one.
func RequestID(req capacity.Request, o capacity.Offering) string {
	return uuid.NewSHA1(requestIDSpace, []byte(req.IdempotencyToken()+"/"+o.Key())).String()
}

// launch inserts the attempt's instance on one offering and waits for it.
// settled is false when the outcome is uncertain and no further offering
// may be tried (see Acquire).
func (c *Cloud) launch(ctx context.Context, req capacity.Request, name string, o capacity.Offering, choices []capacity.Offering) (capacity.Instance, bool, error) {
	fail := func(class capacity.Class, code, format string, args ...any) error {
		return capacity.NewError(class, o, code, format, args...)
	}
	op, err := c.svc.Instances.Insert(c.cfg.Project, o.Zone, c.instanceBody(req, name, o)).RequestId(RequestID(req, o)).Context(ctx).Do()
	if err != nil {
		code, class, msg := c.explain(err)
		if code == ReasonAlreadyExists {
			return c.ready(ctx, req, name, o.Zone, choices)
		}
		if code == "" {
			msg = "instances.insert failed: " + msg
		}
		return capacity.Instance{}, definitive(err) && class != capacity.Throttled, fail(class, code, "%s", msg)
	}
	c.remember(name, o.Zone)
	op, err = c.wait(ctx, o.Zone, op)
	if err != nil {
		code, class, msg := c.explain(err)
		return capacity.Instance{}, false, fail(class, code, "inserting %s: waiting for its operation: %s", name, msg)
	}
	if code, class, msg, failed := operationError(op); failed {
		if code == CodeAlreadyExists {
			return c.ready(ctx, req, name, o.Zone, choices)
		}
		c.forget(name)
		if h := c.hint(code, class, 0); h != "" {
			msg += " (" + h + ")"
		}
		return capacity.Instance{}, true, fail(class, code, "%s", msg)
	}
	return c.ready(ctx, req, name, o.Zone, choices)
}

// instanceBody is the instance an offering inserts: the machine type in
// the zone, the labels and exact tags of the request, a boot disk from
// Config.Image, and for spot the SPOT provisioning model with DELETE on
// preemption, so a preempted VM leaves nothing to pay for. GPUs need
// TERMINATE on host maintenance, on either market.
func (c *Cloud) instanceBody(req capacity.Request, name string, o capacity.Offering) *compute.Instance {
	tags := local.RequestTags(req)
	items := []*compute.MetadataItems{tagsMetadata(tags)}
	if c.cfg.StartupScript != "" {
		script := c.cfg.StartupScript
		items = append(items, &compute.MetadataItems{Key: "startup-script", Value: &script})
	}
	restart := o.Market != capacity.Spot
	inst := &compute.Instance{
		Name:        name,
		MachineType: fmt.Sprintf("zones/%s/machineTypes/%s", o.Zone, o.InstanceType),
		Labels:      Labels(tags),
		Metadata:    &compute.Metadata{Items: items},
		Disks: []*compute.AttachedDisk{{
			Boot: true, AutoDelete: true,
			InitializeParams: &compute.AttachedDiskInitializeParams{SourceImage: c.cfg.Image, DiskSizeGb: c.cfg.BootDiskGB},
		}},
		NetworkInterfaces: []*compute.NetworkInterface{{Network: c.cfg.Network, Subnetwork: c.cfg.Subnetworks[RegionOf(o.Zone)]}},
		Scheduling:        &compute.Scheduling{OnHostMaintenance: "TERMINATE", AutomaticRestart: &restart},
	}
	if t := c.types[o.InstanceType]; t.Accelerator != "" {
		inst.GuestAccelerators = []*compute.AcceleratorConfig{{
			AcceleratorType:  fmt.Sprintf("zones/%s/acceleratorTypes/%s", o.Zone, t.Accelerator),
			AcceleratorCount: int64(t.GPUs),
		}}
	}
	if o.Market == capacity.Spot {
		inst.Scheduling.ProvisioningModel = ProvisioningSpot
		inst.Scheduling.InstanceTerminationAction = TerminationDelete
	}
	if c.cfg.ServiceAccount != "" {
		inst.ServiceAccounts = []*compute.ServiceAccount{{Email: c.cfg.ServiceAccount, Scopes: []string{compute.CloudPlatformScope}}}
	}
	return inst
}

// ready waits until the named instance runs and returns it on the
// offering of choices it was created on. One that ends instead never
// ran: a spot VM preempted at once had no capacity, anything else failed
// to start (and is deleted, so nothing is left). settled is then true.
func (c *Cloud) ready(ctx context.Context, req capacity.Request, name, zone string, choices []capacity.Offering) (capacity.Instance, bool, error) {
	o := choices[0]
	for _, ch := range choices {
		if ch.Zone == zone {
			o = ch
			break
		}
	}
	wait := time.NewTimer(0)
	defer wait.Stop()
	for {
		select {
		case <-ctx.Done():
			return capacity.Instance{}, false, capacity.NewError(capacity.Unknown, o, "", "instance %s was created but was not running yet: %v", name, ctx.Err())
		case <-wait.C:
		}
		gi, err := c.svc.Instances.Get(c.cfg.Project, zone, name).Context(ctx).Do()
		switch {
		case isNotFound(err):
			c.forget(name)
			class := capacity.InitFailure
			if o.Market == capacity.Spot {
				class = capacity.NoCapacity
			}
			return capacity.Instance{}, true, capacity.NewError(class, o, ReasonNotFound, "instance %s was created in %s but is gone before it ran (a spot VM preempted at once)", name, zone)
		case err != nil:
			code, class, msg := c.explain(err)
			return capacity.Instance{}, false, capacity.NewError(class, o, code, "instance %s was created but could not be read: %s", name, msg)
		}
		inst := c.instance(gi)
		inst.Offering = chosen(choices, inst.Offering)
		tags := local.RequestTags(req)
		maps.Copy(tags, inst.Tags)
		inst.Tags = tags
		if inst.LaunchedAt.IsZero() {
			inst.LaunchedAt = c.cfg.Clock()
		}
		switch stateOf(gi) {
		case capacity.StateRunning:
			c.log.Info("instance launched", zap.String("instance", name), zap.String("offering", inst.Offering.Key()),
				zap.String("run", req.RunID), zap.Int("attempt", req.Attempt))
			return inst, true, nil
		case capacity.StatePending:
		default:
			class := capacity.InitFailure
			if isSpot(gi) {
				class = capacity.NoCapacity
			}
			if err := c.Release(ctx, name); err != nil && !capacity.IsNotFound(err) {
				c.log.Warn("cannot delete an instance that never ran", zap.String("instance", name), zap.Error(err))
			}
			return capacity.Instance{}, true, capacity.NewError(class, inst.Offering, gi.Status, "instance %s ended before it ran: %s %s", name, gi.Status, gi.StatusMessage)
		}
		wait.Reset(c.cfg.PollInterval)
	}
}

// chosen is the offering of choices an instance was created on, with the
// price it was chosen at; one outside them keeps what the instance says.
func chosen(choices []capacity.Offering, actual capacity.Offering) capacity.Offering {
	for _, o := range choices {
		if o.InstanceType == actual.InstanceType && o.Zone == actual.Zone && o.Market == actual.Market {
			return o
		}
	}
	return actual
}

func failAll(offerings []capacity.Offering, class capacity.Class, code, msg string) error {
	out := make([]error, len(offerings))
	for i, o := range offerings {
		out[i] = capacity.NewError(class, o, code, "%s", msg)
	}
	return errors.Join(out...)
}

func fromZone(inst *compute.Instance) string { return path.Base(inst.Zone) }
