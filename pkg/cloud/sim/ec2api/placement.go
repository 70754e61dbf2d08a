package ec2api

import (
	"context"
	"encoding/xml"
	"math"
	"slices"
	"sort"
	"time"

	"refuel/pkg/cloud/sim"
)

// placementSpan is how much of its traces' recent past the sim scores a
// spot request on: EC2 describes its scores as its view of capacity of
// late, and a day covers the flicker of the traces' spot stock.
const placementSpan = 24 * time.Hour

type spotPlacementScoreXML struct {
	Region             string `xml:"region"`
	AvailabilityZoneID string `xml:"availabilityZoneId,omitempty"`
	Score              int    `xml:"score"`
}

type getSpotPlacementScoresResponse struct {
	XMLName xml.Name `xml:"GetSpotPlacementScoresResponse"`
	meta
	Scores    []spotPlacementScoreXML `xml:"spotPlacementScoreSet>item"`
	NextToken string                  `xml:"nextToken,omitempty"`
}

// getSpotPlacementScores scores, from 1 to 10, how likely a spot request
// for TargetCapacity of InstanceType.N is to succeed in each region (or,
// with SingleAvailabilityZone, each zone, by zone ID), highest first.
// The sim scores from its traces: the share of the ticks of the last
// placementSpan in which the pools of the place together held the
// capacity, as tenths (1 at the least).
func (h *Handler) getSpotPlacementScores(_ context.Context, p *params) (response, error) {
	types := p.list("InstanceType")
	if len(types) == 0 {
		return nil, errorf("MissingParameter", "The request must contain the parameter InstanceType or InstanceRequirementsWithMetadata (the sim serves InstanceType only)")
	}
	target, set, err := p.integer("TargetCapacity")
	if err != nil {
		return nil, err
	}
	if !set || target < 1 || target > 2_000_000_000 {
		return nil, errorf(codeInvalidValue, "TargetCapacity must be given, between 1 and 2000000000.")
	}
	unit, err := p.oneOf("TargetCapacityUnitType", "units", "units", "vcpu", "memory-mib")
	if err != nil {
		return nil, err
	}
	single, err := p.boolean("SingleAvailabilityZone")
	if err != nil {
		return nil, err
	}
	regions := p.list("RegionName")
	if _, err := p.boolean("IncludeLocalZones"); err != nil {
		return nil, err
	}
	dryRun, err := p.boolean("DryRun")
	if err != nil {
		return nil, err
	}
	catalogue := map[string]sim.InstanceType{}
	for _, t := range h.cloud.Catalogue() {
		catalogue[t.Name] = t
	}
	for _, t := range types {
		if _, ok := catalogue[t]; !ok {
			return nil, errorf(codeInvalidValue, "The instance type '%s' is not sold in the simulated EC2.", t)
		}
	}
	// capacity is what one instance of a type counts towards the target.
	capacity := func(t sim.InstanceType) int {
		switch unit {
		case "vcpu":
			return t.VCPUs
		case "memory-mib":
			return t.MemoryMiB
		}
		return 1
	}
	// The stock of each place (a region, or a zone), tick by tick.
	type place struct {
		region, zone string
		held         []int
	}
	var places []*place
	for _, ps := range h.cloud.Market().Pools {
		region := regionOf(ps.Zone)
		if !ps.SellsSpot || !slices.Contains(types, ps.InstanceType) || len(regions) > 0 && !slices.Contains(regions, region) {
			continue
		}
		key := place{region: region}
		if single {
			key.zone = ps.Zone
		}
		i := slices.IndexFunc(places, func(pl *place) bool { return pl.region == key.region && pl.zone == key.zone })
		if i < 0 {
			places = append(places, &key)
			i = len(places) - 1
		}
		stock := h.cloud.SpotStockLately(ps.Pool, placementSpan)
		pl := places[i]
		if len(pl.held) < len(stock) {
			pl.held = append(pl.held, make([]int, len(stock)-len(pl.held))...)
		}
		for t, n := range stock {
			pl.held[t] += n * capacity(catalogue[ps.InstanceType])
		}
	}
	var all []spotPlacementScoreXML
	for _, pl := range places {
		x := spotPlacementScoreXML{Region: pl.region, Score: placementScore(pl.held, target)}
		if single {
			x.AvailabilityZoneID = zoneID(pl.zone)
		}
		all = append(all, x)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Score > all[j].Score })
	from, to, next, err := p.page(len(all), 10)
	if err != nil {
		return nil, err
	}
	if err := checkRequest(p, dryRun); err != nil {
		return nil, err
	}
	return &getSpotPlacementScoresResponse{Scores: all[from:to], NextToken: next}, nil
}

// placementScore is the share of ticks in which held reached target, in
// tenths from 1 to 10.
func placementScore(held []int, target int) int {
	if len(held) == 0 {
		return 1
	}
	n := 0
	for _, c := range held {
		if c >= target {
			n++
		}
	}
	return max(1, int(math.Round(10*float64(n)/float64(len(held)))))
}
