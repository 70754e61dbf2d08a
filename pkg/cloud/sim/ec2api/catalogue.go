package ec2api

import (
	"context"
	"encoding/xml"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"refuel/pkg/cloud/sim"
)

// regionOf is the region a zone belongs to: us-west-2a → us-west-2.
func regionOf(zone string) string {
	return strings.TrimSuffix(strings.TrimRightFunc(zone, unicode.IsLetter), "-")
}

// zoneID makes an EC2-shaped zone ID (us-west-2a → usw2-az1): the sim
// has no account mapping of names to IDs, so the ID follows the name.
func zoneID(zone string) string {
	region := regionOf(zone)
	parts := strings.Split(region, "-")
	short := parts[0]
	for i, part := range parts[1:] {
		if i < len(parts)-2 && part != "" {
			part = part[:1] // the middle words: west → w
		}
		short += part
	}
	suffix := strings.TrimPrefix(zone[len(region):], "-")
	if len(suffix) == 1 && suffix[0] >= 'a' && suffix[0] <= 'z' {
		suffix = strconv.Itoa(int(suffix[0]-'a') + 1)
	}
	return short + "-az" + suffix
}

type instanceTypeOfferingXML struct {
	InstanceType string `xml:"instanceType"`
	LocationType string `xml:"locationType"`
	Location     string `xml:"location"`
}

type describeInstanceTypeOfferingsResponse struct {
	XMLName xml.Name `xml:"DescribeInstanceTypeOfferingsResponse"`
	meta
	Offerings []instanceTypeOfferingXML `xml:"instanceTypeOfferingSet>item"`
	NextToken string                    `xml:"nextToken,omitempty"`
}

// describeInstanceTypeOfferings lists which types are sold in which zones
// (or regions): every pool of the sim.
func (h *Handler) describeInstanceTypeOfferings(_ context.Context, p *params) (response, error) {
	locType, err := p.oneOf("LocationType", "region", "region", "availability-zone", "availability-zone-id")
	if err != nil {
		return nil, err
	}
	filters, err := p.filters()
	if err != nil {
		return nil, err
	}
	if err := checkFilters(filters, func(n string) bool { return n == "instance-type" || n == "location" }); err != nil {
		return nil, err
	}
	dryRun, err := p.boolean("DryRun")
	if err != nil {
		return nil, err
	}
	var all []instanceTypeOfferingXML
	for _, ps := range h.cloud.Market().Pools {
		o := instanceTypeOfferingXML{InstanceType: ps.InstanceType, LocationType: locType, Location: ps.Zone}
		switch locType {
		case "region":
			o.Location = regionOf(ps.Zone)
		case "availability-zone-id":
			o.Location = zoneID(ps.Zone)
		}
		fields := map[string][]string{"instance-type": {o.InstanceType}, "location": {o.Location}}
		if !slices.Contains(all, o) && matchesAll(filters, func(n string) []string { return fields[n] }) {
			all = append(all, o)
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Location < all[j].Location })
	from, to, next, err := p.page(len(all), 5)
	if err != nil {
		return nil, err
	}
	if err := checkRequest(p, dryRun); err != nil {
		return nil, err
	}
	return &describeInstanceTypeOfferingsResponse{Offerings: all[from:to], NextToken: next}, nil
}

type instanceTypeXML struct {
	InstanceType          string      `xml:"instanceType"`
	CurrentGeneration     bool        `xml:"currentGeneration"`
	SupportedUsageClasses []string    `xml:"supportedUsageClasses>item"`
	VCPUs                 int         `xml:"vCpuInfo>defaultVCpus"`
	MemoryMiB             int         `xml:"memoryInfo>sizeInMiB"`
	GPU                   *gpuInfoXML `xml:"gpuInfo"`
}

type gpuInfoXML struct {
	GPUs           []gpuXML `xml:"gpus>item"`
	TotalMemoryMiB int      `xml:"totalGpuMemoryInMiB"`
}

type gpuXML struct {
	Name      string `xml:"name"`
	Count     int    `xml:"count"`
	MemoryMiB int    `xml:"memoryInfo>sizeInMiB"`
}

type describeInstanceTypesResponse struct {
	XMLName xml.Name `xml:"DescribeInstanceTypesResponse"`
	meta
	Types     []instanceTypeXML `xml:"instanceTypeSet>item"`
	NextToken string            `xml:"nextToken,omitempty"`
}

// describeInstanceTypes describes the types the sim sells: vCPUs, memory
// and GPUs, which a provider needs to match a job's resources.
func (h *Handler) describeInstanceTypes(_ context.Context, p *params) (response, error) {
	names := p.list("InstanceType")
	filters, err := p.filters()
	if err != nil {
		return nil, err
	}
	if err := checkFilters(filters, func(n string) bool { return n == "instance-type" }); err != nil {
		return nil, err
	}
	dryRun, err := p.boolean("DryRun")
	if err != nil {
		return nil, err
	}
	sold := map[string]sim.InstanceType{}
	for _, t := range h.cloud.Catalogue() {
		sold[t.Name] = t
	}
	var unknown []string
	for _, n := range names {
		if _, ok := sold[n]; !ok {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return nil, errorf("InvalidInstanceType", "The following supplied instance types do not exist: [%s]", strings.Join(unknown, ", "))
	}
	var all []instanceTypeXML
	for _, t := range h.cloud.Catalogue() {
		if len(names) > 0 && !slices.Contains(names, t.Name) || !matchesAll(filters, func(string) []string { return []string{t.Name} }) {
			continue
		}
		x := instanceTypeXML{InstanceType: t.Name, CurrentGeneration: true, SupportedUsageClasses: []string{"on-demand", "spot"}, VCPUs: t.VCPUs, MemoryMiB: t.MemoryMiB}
		if t.GPUs > 0 {
			x.GPU = &gpuInfoXML{GPUs: []gpuXML{{Name: t.GPU, Count: t.GPUs, MemoryMiB: t.GPUMemoryMiB}}, TotalMemoryMiB: t.GPUs * t.GPUMemoryMiB}
		}
		all = append(all, x)
	}
	from, to, next, err := p.page(len(all), 5)
	if err != nil {
		return nil, err
	}
	if err := checkRequest(p, dryRun); err != nil {
		return nil, err
	}
	return &describeInstanceTypesResponse{Types: all[from:to], NextToken: next}, nil
}

type availabilityZoneXML struct {
	ZoneName           string `xml:"zoneName"`
	ZoneID             string `xml:"zoneId"`
	State              string `xml:"zoneState"`
	RegionName         string `xml:"regionName"`
	GroupName          string `xml:"groupName"`
	NetworkBorderGroup string `xml:"networkBorderGroup"`
	OptInStatus        string `xml:"optInStatus"`
	ZoneType           string `xml:"zoneType"`
}

type describeAvailabilityZonesResponse struct {
	XMLName xml.Name `xml:"DescribeAvailabilityZonesResponse"`
	meta
	Zones []availabilityZoneXML `xml:"availabilityZoneInfo>item"`
}

// describeAvailabilityZones lists the zones of the sim's pools.
func (h *Handler) describeAvailabilityZones(_ context.Context, p *params) (response, error) {
	names := p.list("ZoneName")
	ids := p.list("ZoneId")
	filters, err := p.filters()
	if err != nil {
		return nil, err
	}
	known := []string{"zone-name", "zone-id", "region-name", "state", "zone-type"}
	if err := checkFilters(filters, func(n string) bool { return slices.Contains(known, n) }); err != nil {
		return nil, err
	}
	if _, err := p.boolean("AllAvailabilityZones"); err != nil {
		return nil, err
	}
	dryRun, err := p.boolean("DryRun")
	if err != nil {
		return nil, err
	}
	var zones []string
	for _, ps := range h.cloud.Market().Pools {
		if !slices.Contains(zones, ps.Zone) {
			zones = append(zones, ps.Zone)
		}
	}
	for _, n := range names {
		if !slices.Contains(zones, n) {
			return nil, errorf(codeInvalidValue, "The zone '%s' does not exist in the simulated EC2.", n)
		}
	}
	if err := checkRequest(p, dryRun); err != nil {
		return nil, err
	}
	resp := &describeAvailabilityZonesResponse{}
	for _, z := range zones {
		region := regionOf(z)
		x := availabilityZoneXML{ZoneName: z, ZoneID: zoneID(z), State: "available", RegionName: region, GroupName: region,
			NetworkBorderGroup: region, OptInStatus: "opt-in-not-required", ZoneType: "availability-zone"}
		fields := map[string][]string{"zone-name": {x.ZoneName}, "zone-id": {x.ZoneID}, "region-name": {region}, "state": {x.State}, "zone-type": {x.ZoneType}}
		switch {
		case len(names) > 0 && !slices.Contains(names, z):
		case len(ids) > 0 && !slices.Contains(ids, x.ZoneID):
		case matchesAll(filters, func(n string) []string { return fields[n] }):
			resp.Zones = append(resp.Zones, x)
		}
	}
	return resp, nil
}

type spotPriceXML struct {
	AvailabilityZone   string `xml:"availabilityZone"`
	InstanceType       string `xml:"instanceType"`
	ProductDescription string `xml:"productDescription"`
	SpotPrice          string `xml:"spotPrice"`
	Timestamp          string `xml:"timestamp"`
}

type describeSpotPriceHistoryResponse struct {
	XMLName xml.Name `xml:"DescribeSpotPriceHistoryResponse"`
	meta
	Prices    []spotPriceXML `xml:"spotPriceHistorySet>item"`
	NextToken string         `xml:"nextToken,omitempty"`
}

// The product descriptions the sim's prices are for: it runs Linux.
var linuxProducts = []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"}

// describeSpotPriceHistory lists, per pool selling spot, the prices in
// effect between StartTime and EndTime (both default to now, which asks
// for today's price), newest first.
func (h *Handler) describeSpotPriceHistory(_ context.Context, p *params) (response, error) {
	types := p.list("InstanceType")
	zone := p.str("AvailabilityZone")
	products := p.list("ProductDescription")
	start, startSet, err := p.timestamp("StartTime")
	if err != nil {
		return nil, err
	}
	end, endSet, err := p.timestamp("EndTime")
	if err != nil {
		return nil, err
	}
	filters, err := p.filters()
	if err != nil {
		return nil, err
	}
	known := []string{"availability-zone", "instance-type", "product-description"}
	if err := checkFilters(filters, func(n string) bool { return slices.Contains(known, n) }); err != nil {
		return nil, err
	}
	dryRun, err := p.boolean("DryRun")
	if err != nil {
		return nil, err
	}
	if !endSet {
		end = h.cloud.Now()
	}
	if !startSet {
		start = end
	}
	if end.Before(start) {
		return nil, errorf(codeInvalidValue, "The end time (%s) must not be before the start time (%s).", ec2Time(end), ec2Time(start))
	}
	if len(products) == 0 {
		products = linuxProducts[:1]
	}
	type row struct {
		x  spotPriceXML
		at time.Time
	}
	var rows []row
	for _, ps := range h.cloud.Market().Pools {
		if !ps.SellsSpot || zone != "" && ps.Zone != zone || len(types) > 0 && !slices.Contains(types, ps.InstanceType) {
			continue
		}
		history := h.cloud.SpotPriceHistory(ps.Pool)
		for i, pp := range history {
			// In effect during [start, end]: set by end, and not replaced
			// by start.
			if pp.Time.After(end) || i+1 < len(history) && !history[i+1].Time.After(start) {
				continue
			}
			for _, product := range products {
				x := spotPriceXML{AvailabilityZone: ps.Zone, InstanceType: ps.InstanceType, ProductDescription: product,
					SpotPrice: strconv.FormatFloat(pp.Price, 'f', 6, 64), Timestamp: ec2Time(pp.Time)}
				fields := map[string][]string{"availability-zone": {x.AvailabilityZone}, "instance-type": {x.InstanceType}, "product-description": {product}}
				if slices.Contains(linuxProducts, product) && matchesAll(filters, func(n string) []string { return fields[n] }) {
					rows = append(rows, row{x, pp.Time})
				}
			}
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].at.After(rows[j].at) })
	sorted := make([]spotPriceXML, len(rows))
	for i, r := range rows {
		sorted[i] = r.x
	}
	from, to, next, err := p.page(len(sorted), 1)
	if err != nil {
		return nil, err
	}
	if err := checkRequest(p, dryRun); err != nil {
		return nil, err
	}
	return &describeSpotPriceHistoryResponse{Prices: sorted[from:to], NextToken: next}, nil
}
