package gce

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
)

// DefaultRegion is the region whose price stands in for a region the
// table does not list.
const DefaultRegion = "us-central1"

// PriceTable holds on-demand and spot prices per machine type and region.
// GCE publishes no spot price through the Compute API (spot prices move
// at most once a month, in the Billing Catalog), so refuel reads both
// from a table: the one built in (DefaultPrices) or the operator's.
type PriceTable struct {
	// Source says where the prices come from; Date when they were read.
	Source string  `json:"source"`
	Date   string  `json:"date"`
	Prices []Price `json:"prices"`
}

// Price is one machine type's hourly prices in USD in one region.
type Price struct {
	MachineType string  `json:"machine_type"`
	Region      string  `json:"region"`
	OnDemand    float64 `json:"on_demand"`
	Spot        float64 `json:"spot"`
}

//go:embed prices.json
var defaultPrices []byte

// DefaultPrices is the table built into refuel (prices.json; its source
// and date are in it).
func DefaultPrices() *PriceTable {
	t, err := ParsePrices(defaultPrices)
	if err != nil {
		panic("gce: the built-in price table does not parse: " + err.Error())
	}
	return t
}

// ParsePrices reads a price table in prices.json's format and rejects a
// row without a machine type or region, a negative price or a row given
// twice.
func ParsePrices(b []byte) (*PriceTable, error) {
	var t PriceTable
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("price table: %w", err)
	}
	seen := map[string]bool{}
	for i, p := range t.Prices {
		key := p.MachineType + "/" + p.Region
		switch {
		case p.MachineType == "" || p.Region == "":
			return nil, fmt.Errorf("price table: prices[%d] needs machine_type and region", i)
		case p.OnDemand < 0 || p.Spot < 0:
			return nil, fmt.Errorf("price table: %s has a negative price", key)
		case seen[key]:
			return nil, fmt.Errorf("price table: %s is listed twice", key)
		}
		seen[key] = true
	}
	return &t, nil
}

// Lookup is a machine type's prices in region, or in DefaultRegion when
// the table lacks the region; ok is false when it knows neither.
func (t *PriceTable) Lookup(machineType, region string) (p Price, ok bool) {
	var fallback *Price
	for i := range t.Prices {
		switch q := &t.Prices[i]; {
		case q.MachineType != machineType:
		case q.Region == region:
			return *q, true
		case q.Region == DefaultRegion:
			fallback = q
		}
	}
	if fallback != nil {
		return *fallback, true
	}
	return Price{}, false
}

// RegionOf is a zone's region: us-central1-a is in us-central1.
func RegionOf(zone string) string {
	if i := strings.LastIndexByte(zone, '-'); i > 0 {
		return zone[:i]
	}
	return zone
}
