package gceapi

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"refuel/pkg/cloud/gce"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/trace"
)

// NoticeWindow is the time between a spot VM's preemption notice and its
// end on Compute Engine: about 30 seconds.
const NoticeWindow = 30 * time.Second

// BuiltInMarket names the Compute Engine market built into the binary:
// 14 days of H100 spot availability in 13 zones (traces/README.md).
const BuiltInMarket = "gcp-10-04-2025"

//go:embed traces
var embeddedTraces embed.FS

// machineType is one Compute Engine machine type the sim sells.
type machineType struct {
	sim.InstanceType
	// Accelerator is the acceleratorTypes name of its GPU model.
	Accelerator string
}

// machineTypes are the GPU machine types the sim's Compute Engine sells,
// priced at us-central1 from gce's price table.
var machineTypes = []machineType{
	{sim.InstanceType{Name: "g2-standard-4", GPU: "L4", GPUs: 1, GPUMemoryMiB: 24576, VCPUs: 4, MemoryMiB: 16384, Cloud: sim.CloudGCE}, "nvidia-l4"},
	{sim.InstanceType{Name: "a2-highgpu-1g", GPU: "A100", GPUs: 1, GPUMemoryMiB: 40960, VCPUs: 12, MemoryMiB: 87040, Cloud: sim.CloudGCE}, "nvidia-tesla-a100"},
	{sim.InstanceType{Name: "a3-highgpu-1g", GPU: "H100", GPUs: 1, GPUMemoryMiB: 81920, VCPUs: 26, MemoryMiB: 239616, Cloud: sim.CloudGCE}, "nvidia-h100-80gb"},
	{sim.InstanceType{Name: "a3-highgpu-8g", GPU: "H100", GPUs: 8, GPUMemoryMiB: 81920, VCPUs: 208, MemoryMiB: 1916928, Cloud: sim.CloudGCE}, "nvidia-h100-80gb"},
}

// Catalogue is the Compute Engine machine types the sim sells, to add to
// a sim.Config's catalogue beside EC2's.
func Catalogue() []sim.InstanceType {
	prices := gce.DefaultPrices()
	out := make([]sim.InstanceType, len(machineTypes))
	for i, mt := range machineTypes {
		out[i] = mt.InstanceType
		if p, ok := prices.Lookup(mt.Name, gce.DefaultRegion); ok {
			out[i].OnDemandPrice, out[i].SpotPrice = p.OnDemand, p.Spot
		}
	}
	return out
}

func acceleratorOf(instanceType string) (name string, ok bool) {
	for _, mt := range machineTypes {
		if mt.Name == instanceType {
			return mt.Accelerator, true
		}
	}
	return "", false
}

// AddMarket adds a Compute Engine market to cfg over the same stock,
// prices, quotas and notices as its EC2 one: the machine types of
// Catalogue, and a pool per trace at where ("" or "builtin:gcp-10-04-2025"
// the market built in; otherwise a directory of ZONE_GPU_COUNT.json
// traces, such as us-central1-a_h100_1.json), priced per region from
// gce's price table, with Compute Engine's 30-second notices. Besides the
// traced pools, each us-central1 zone of the market sells a2-highgpu-1g
// and g2-standard-4, with no trace: 16 spot VMs in stock at every tick.
// skipped lists trace files no machine type stands for.
func AddMarket(cfg sim.Config, where string) (out sim.Config, skipped []string, err error) {
	traces, skipped, err := loadTraces(where)
	if err != nil {
		return sim.Config{}, nil, err
	}
	prices := gce.DefaultPrices()
	pool := func(zone, instanceType string, t *trace.Trace) sim.PoolConfig {
		pc := sim.PoolConfig{Pool: sim.Pool{Zone: zone, InstanceType: instanceType}, Spot: t, NoticeWindow: NoticeWindow}
		if p, ok := prices.Lookup(instanceType, gce.RegionOf(zone)); ok {
			pc.SpotPrice, pc.OnDemandPrice = p.Spot, p.OnDemand
		}
		return pc
	}
	var pools []sim.PoolConfig
	var zones []string
	gap := 10 * time.Minute
	for _, t := range traces {
		mt, ok := typeForTrace(t.Instance, t.Count)
		if !ok {
			skipped = append(skipped, fmt.Sprintf("%s: no Compute Engine machine type for %q", t.File, t.Name))
			continue
		}
		pools = append(pools, pool(t.Zone, mt, t))
		if !slices.Contains(zones, t.Zone) {
			zones = append(zones, t.Zone)
		}
		gap = t.Gap
	}
	if len(pools) == 0 {
		return sim.Config{}, skipped, fmt.Errorf("no trace at %s names a zone and a GPU of a Compute Engine machine type (ZONE_GPU_COUNT.json, such as us-central1-a_h100_1.json)", where)
	}
	for _, zone := range zones {
		if gce.RegionOf(zone) != gce.DefaultRegion {
			continue
		}
		for _, mt := range []string{"a2-highgpu-1g", "g2-standard-4"} {
			pools = append(pools, pool(zone, mt, &trace.Trace{Name: zone + "_" + mt, Zone: zone, Instance: mt, Gap: gap, Points: []int{16}}))
		}
	}
	if cfg.Catalogue == nil {
		cfg.Catalogue = sim.DefaultCatalogue() // the EC2 pools' types
	}
	for _, it := range Catalogue() {
		if !slices.ContainsFunc(cfg.Catalogue, func(t sim.InstanceType) bool { return t.Name == it.Name }) {
			cfg.Catalogue = append(cfg.Catalogue, it)
		}
	}
	cfg.Pools = append(cfg.Pools, pools...)
	return cfg, skipped, nil
}

// MachineTypeOf is the machine type a trace stands for (see
// typeForTrace), to name and price its zone's offering.
func MachineTypeOf(t *trace.Trace) (string, bool) { return typeForTrace(t.Instance, t.Count) }

// typeForTrace is the machine type a trace's name (ZONE_GPU_COUNT, or
// ZONE_TYPE) stands for: h100_1 is a3-highgpu-1g, a100_1 a2-highgpu-1g,
// l4_1 g2-standard-4.
func typeForTrace(instance string, count int) (string, bool) {
	for _, mt := range machineTypes {
		if count > 0 && strings.EqualFold(mt.GPU, instance) && mt.GPUs == count || count == 0 && mt.Name == instance {
			return mt.Name, true
		}
	}
	return "", false
}

// loadTraces reads the traces at where: built in, or a directory.
func loadTraces(where string) (traces []*trace.Trace, skipped []string, err error) {
	if where != "" && !strings.HasPrefix(where, sim.BuiltIn) {
		paths, err := trace.Find(where)
		if err != nil {
			return nil, nil, err
		}
		ts, err := trace.LoadAll(paths)
		return ts, nil, err
	}
	name := strings.TrimPrefix(where, sim.BuiltIn)
	if name == "" {
		name = BuiltInMarket
	}
	if name != BuiltInMarket {
		return nil, nil, fmt.Errorf("no built-in Compute Engine market %q: the binary has %s%s", name, sim.BuiltIn, BuiltInMarket)
	}
	var paths []string
	err = fs.WalkDir(embeddedTraces, "traces/"+name, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.EqualFold(path.Ext(p), ".json") {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	sort.Strings(paths)
	for _, p := range paths {
		b, err := embeddedTraces.ReadFile(p)
		if err != nil {
			return nil, nil, err
		}
		t, err := trace.Parse(p, b)
		if err != nil {
			return nil, nil, err
		}
		traces = append(traces, t)
	}
	return traces, nil, nil
}
