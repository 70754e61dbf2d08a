package gceapi

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"

	compute "google.golang.org/api/compute/v1"

	"refuel/pkg/cloud/gce"
	"refuel/pkg/cloud/metadata"
	"refuel/pkg/cloud/sim"
)

// Zones, machine types and accelerator types: the catalogue the simulated
// market's instance types make, as Compute Engine lists them.

// zoneTypes are the Compute Engine machine types each zone sells.
func (h *Handler) zoneTypes() map[string][]sim.InstanceType {
	types := map[string]sim.InstanceType{}
	for _, t := range h.cloud.Catalogue() {
		if t.Cloud == sim.CloudGCE {
			types[t.Name] = t
		}
	}
	out := map[string][]sim.InstanceType{}
	for _, ps := range h.cloud.Market().Pools {
		if t, ok := types[ps.InstanceType]; ok {
			out[ps.Zone] = append(out[ps.Zone], t)
		}
	}
	return out
}

func (h *Handler) getProject(c call) {
	n, _ := strconv.ParseUint(metadata.GCEProjectNumber, 10, 64)
	writeJSON(c.w, &compute.Project{Kind: "compute#project", Name: c.project, Id: n, SelfLink: c.base + "projects/" + c.project})
}

func (h *Handler) zoneView(c call, name string) *compute.Zone {
	return &compute.Zone{Kind: "compute#zone", Name: name, Status: "UP", Id: metadata.GCEInstanceID(name) % 10000,
		Region: c.link("regions", gce.RegionOf(name)), SelfLink: c.link("zones", name)}
}

func (h *Handler) listZones(c call) {
	names := make([]string, 0)
	for z := range h.zoneTypes() {
		names = append(names, z)
	}
	sort.Strings(names)
	list := &compute.ZoneList{Kind: "compute#zoneList", Id: "projects/" + c.project + "/zones", SelfLink: c.link("zones")}
	for _, z := range names {
		list.Items = append(list.Items, h.zoneView(c, z))
	}
	writeJSON(c.w, list)
}

func (h *Handler) getZone(c call) { writeJSON(c.w, h.zoneView(c, c.zone)) }

func (h *Handler) machineTypeView(c call, t sim.InstanceType) *compute.MachineType {
	accel, _ := acceleratorOf(t.Name)
	return &compute.MachineType{Kind: "compute#machineType", Name: t.Name, Zone: c.zone, Id: metadata.GCEInstanceID(t.Name) % 100000000,
		GuestCpus: int64(t.VCPUs), MemoryMb: int64(t.MemoryMiB), Description: fmt.Sprintf("%d vCPUs, %d GB RAM, %d %s", t.VCPUs, t.MemoryMiB/1024, t.GPUs, t.GPU),
		Accelerators: []*compute.MachineTypeAccelerators{{GuestAcceleratorType: accel, GuestAcceleratorCount: int64(t.GPUs)}},
		SelfLink:     c.link("zones", c.zone, "machineTypes", t.Name)}
}

func (h *Handler) listMachineTypes(c call) {
	list := &compute.MachineTypeList{Kind: "compute#machineTypeList", SelfLink: c.link("zones", c.zone, "machineTypes")}
	for _, t := range h.zoneTypes()[c.zone] {
		list.Items = append(list.Items, h.machineTypeView(c, t))
	}
	writeJSON(c.w, list)
}

func (h *Handler) getMachineType(c call) {
	for _, t := range h.zoneTypes()[c.zone] {
		if t.Name == c.r.PathValue("name") {
			writeJSON(c.w, h.machineTypeView(c, t))
			return
		}
	}
	writeError(c.w, http.StatusNotFound, gce.ReasonNotFound, "The resource 'projects/%s/zones/%s/machineTypes/%s' was not found", c.project, c.zone, c.r.PathValue("name"))
}

// acceleratorTypes are the zone's GPU models, as acceleratorTypes names
// them.
func (h *Handler) acceleratorTypes(c call) []*compute.AcceleratorType {
	var out []*compute.AcceleratorType
	seen := map[string]bool{}
	for _, t := range h.zoneTypes()[c.zone] {
		name, _ := acceleratorOf(t.Name)
		if seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, &compute.AcceleratorType{Kind: "compute#acceleratorType", Name: name, Zone: c.link("zones", c.zone),
			Description: "NVIDIA " + t.GPU, MaximumCardsPerInstance: 8, Id: metadata.GCEInstanceID(name) % 100000000,
			SelfLink: c.link("zones", c.zone, "acceleratorTypes", name)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (h *Handler) listAcceleratorTypes(c call) {
	writeJSON(c.w, &compute.AcceleratorTypeList{Kind: "compute#acceleratorTypeList", Items: h.acceleratorTypes(c), SelfLink: c.link("zones", c.zone, "acceleratorTypes")})
}

func (h *Handler) getAcceleratorType(c call) {
	for _, a := range h.acceleratorTypes(c) {
		if a.Name == c.r.PathValue("name") {
			writeJSON(c.w, a)
			return
		}
	}
	writeError(c.w, http.StatusNotFound, gce.ReasonNotFound, "The resource 'projects/%s/zones/%s/acceleratorTypes/%s' was not found", c.project, c.zone, c.r.PathValue("name"))
}
