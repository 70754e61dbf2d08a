package sim

import "strings"

// InstanceType is one machine shape the simulated cloud sells, with its
// list prices.
type InstanceType struct {
	Name string
	// GPU is the accelerator model, such as "V100"; with GPUs it is how a
	// trace file named ZONE_GPU_COUNT finds its instance type.
	GPU          string
	GPUs         int
	GPUMemoryMiB int // per GPU
	VCPUs        int
	MemoryMiB    int
	// OnDemandPrice is the hourly on-demand price; it is also the default
	// most a spot request pays, as on EC2.
	OnDemandPrice float64
	// SpotPrice is the hourly spot price a pool starts at.
	SpotPrice float64
	// Cloud is the cloud that sells the type: "" for EC2, CloudGCE for
	// Compute Engine, whose instances' agents are pointed at their
	// metadata endpoint as a GCE VM's (GCE_METADATA_HOST).
	Cloud string
}

// CloudGCE marks Compute Engine's machine types in a catalogue.
const CloudGCE = "gce"

// DefaultCatalogue is a few GPU instance types at us-east-1 Linux list
// prices, with spot at about 30% of on-demand (p3.2xlarge at the $0.9701
// the traces' paper uses). At most one type per GPU model and count, so the
// trace mapping is unambiguous.
func DefaultCatalogue() []InstanceType {
	return []InstanceType{
		{Name: "p2.xlarge", GPU: "K80", GPUs: 1, GPUMemoryMiB: 12288, VCPUs: 4, MemoryMiB: 62464, OnDemandPrice: 0.90, SpotPrice: 0.27},
		{Name: "p2.8xlarge", GPU: "K80", GPUs: 8, GPUMemoryMiB: 12288, VCPUs: 32, MemoryMiB: 499712, OnDemandPrice: 7.20, SpotPrice: 2.16},
		{Name: "p2.16xlarge", GPU: "K80", GPUs: 16, GPUMemoryMiB: 12288, VCPUs: 64, MemoryMiB: 749568, OnDemandPrice: 14.40, SpotPrice: 4.32},
		{Name: "p3.2xlarge", GPU: "V100", GPUs: 1, GPUMemoryMiB: 16384, VCPUs: 8, MemoryMiB: 62464, OnDemandPrice: 3.06, SpotPrice: 0.9701},
		{Name: "p3.8xlarge", GPU: "V100", GPUs: 4, GPUMemoryMiB: 16384, VCPUs: 32, MemoryMiB: 249856, OnDemandPrice: 12.24, SpotPrice: 3.672},
		{Name: "p3.16xlarge", GPU: "V100", GPUs: 8, GPUMemoryMiB: 16384, VCPUs: 64, MemoryMiB: 499712, OnDemandPrice: 24.48, SpotPrice: 7.344},
		{Name: "g4dn.xlarge", GPU: "T4", GPUs: 1, GPUMemoryMiB: 16384, VCPUs: 4, MemoryMiB: 16384, OnDemandPrice: 0.526, SpotPrice: 0.1578},
		{Name: "g5.xlarge", GPU: "A10G", GPUs: 1, GPUMemoryMiB: 24576, VCPUs: 4, MemoryMiB: 16384, OnDemandPrice: 1.006, SpotPrice: 0.3018},
		{Name: "p4d.24xlarge", GPU: "A100", GPUs: 8, GPUMemoryMiB: 40960, VCPUs: 96, MemoryMiB: 1179648, OnDemandPrice: 32.7726, SpotPrice: 9.8318},
	}
}

// typeForTrace finds the instance type a trace file's name stands for.
// This is the one mapping from trace names to machines:
//
//   - ZONE_GPU_COUNT (us-west-2a_v100_8) is the type with that GPU model
//     (case-insensitive) and count: v100_1 → p3.2xlarge, v100_8 →
//     p3.16xlarge, k80_1 → p2.xlarge, k80_8 → p2.8xlarge in the default
//     catalogue;
//   - ZONE_TYPE (us-west-2a_p3.2xlarge) names the type itself.
func typeForTrace(catalogue []InstanceType, instance string, count int) (InstanceType, bool) {
	for _, t := range catalogue {
		if count > 0 && t.GPU != "" && strings.EqualFold(t.GPU, instance) && t.GPUs == count {
			return t, true
		}
		if count == 0 && t.Name == instance {
			return t, true
		}
	}
	return InstanceType{}, false
}
