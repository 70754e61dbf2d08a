package gce

import (
	"context"
	"path"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"
	compute "google.golang.org/api/compute/v1"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

// Offerings implements capacity.Provider. For every catalogue machine
// type that a zone's machineTypes list (and, for a type that attaches its
// GPUs, whose accelerator the zone's acceleratorTypes list) it offers
// spot and on-demand at the price table's prices; a type the table does
// not price is not offered, since it could not be compared. Calls: one
// zones.list when no zones are configured, then per zone one
// machineTypes.list and, only for attached GPUs, one
// acceleratorTypes.list.
func (c *Cloud) Offerings(ctx context.Context, r spec.Resources) ([]capacity.Offering, error) {
	if len(r.Providers) > 0 && !slices.Contains(r.Providers, c.cfg.Name) {
		return nil, nil
	}
	zones, ok := allowedZones(c.cfg.Zones, r.Zones)
	if !ok {
		return nil, nil
	}
	if len(zones) == 0 {
		var err error
		if zones, err = c.upZones(ctx); err != nil {
			return nil, err
		}
	}
	var out []capacity.Offering
	for _, zone := range zones {
		sold, err := c.zoneTypes(ctx, zone)
		if err != nil {
			return nil, err
		}
		for _, t := range c.cfg.MachineTypes {
			gpus, ok := sold[t.Name]
			if !ok {
				continue
			}
			if _, priced := c.cfg.Prices.Lookup(t.Name, RegionOf(zone)); !priced {
				c.log.Debug("machine type not priced", zap.String("machine_type", t.Name), zap.String("zone", zone))
				continue
			}
			for _, m := range []capacity.Market{capacity.Spot, capacity.OnDemand} {
				o := c.offering(t.Name, zone, m)
				o.GPUs = gpus
				out = append(out, o)
			}
		}
	}
	return capacity.Match(out, r), nil
}

// allowedZones intersects the configured zones with the job's; nil means
// any zone. ok is false when the two leave no zone at all.
func allowedZones(configured, requested []string) (zones []string, ok bool) {
	switch {
	case len(configured) == 0:
		return requested, true
	case len(requested) == 0:
		return configured, true
	}
	for _, z := range configured {
		if slices.Contains(requested, z) {
			zones = append(zones, z)
		}
	}
	return zones, len(zones) > 0
}

// upZones lists the project's zones that are UP, sorted.
func (c *Cloud) upZones(ctx context.Context) ([]string, error) {
	var zones []string
	err := c.svc.Zones.List(c.cfg.Project).Pages(ctx, func(page *compute.ZoneList) error {
		for _, z := range page.Items {
			if z.Status == "UP" {
				zones = append(zones, z.Name)
			}
		}
		return nil
	})
	if err != nil {
		return nil, c.projectError(err, "listing zones")
	}
	slices.Sort(zones)
	return zones, nil
}

// zoneTypes are the catalogue's types a zone sells, with their GPUs.
func (c *Cloud) zoneTypes(ctx context.Context, zone string) (map[string]int, error) {
	sold := map[string]int{}
	err := c.svc.MachineTypes.List(c.cfg.Project, zone).Pages(ctx, func(page *compute.MachineTypeList) error {
		for _, mt := range page.Items {
			t, ok := c.types[mt.Name]
			if !ok {
				continue
			}
			gpus := t.GPUs
			if t.Accelerator == "" {
				for _, a := range mt.Accelerators {
					gpus += int(a.GuestAcceleratorCount)
				}
			}
			if gpus > 0 {
				sold[mt.Name] = gpus
			}
		}
		return nil
	})
	if err != nil {
		return nil, c.projectError(err, "listing machine types in "+zone)
	}
	if !slices.ContainsFunc(c.cfg.MachineTypes, func(t MachineType) bool { return t.Accelerator != "" }) {
		return sold, nil
	}
	accels := map[string]int64{}
	err = c.svc.AcceleratorTypes.List(c.cfg.Project, zone).Pages(ctx, func(page *compute.AcceleratorTypeList) error {
		for _, a := range page.Items {
			accels[a.Name] = a.MaximumCardsPerInstance
		}
		return nil
	})
	if err != nil {
		return nil, c.projectError(err, "listing accelerator types in "+zone)
	}
	for _, t := range c.cfg.MachineTypes {
		if most, ok := accels[t.Accelerator]; t.Accelerator != "" && (!ok || int64(t.GPUs) > most) {
			delete(sold, t.Name)
		}
	}
	return sold, nil
}

// gpusOf reads the GPU count from an accelerator-optimized machine
// type's name (a2-highgpu-1g, a3-highgpu-8g: the count before the final
// g; g2-standard-N: one, but two at 24 vCPUs, four at 48 and eight at 96),
// for an instance described without its zone's machine types at hand.
func gpusOf(machineType string) int {
	base := path.Base(machineType)
	if strings.HasPrefix(base, "g2-standard-") {
		n, _ := strconv.Atoi(strings.TrimPrefix(base, "g2-standard-"))
		switch n {
		case 24:
			return 2
		case 48:
			return 4
		case 96:
			return 8
		}
		return 1
	}
	i := strings.LastIndexByte(base, '-')
	if i < 0 || !strings.HasSuffix(base, "g") {
		return 0
	}
	n, err := strconv.Atoi(base[i+1 : len(base)-1])
	if err != nil {
		return 0
	}
	return n
}
