package aws

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

// spotProduct is the product whose spot prices refuel reads: the node
// agent runs on Linux.
const spotProduct = types.RIProductDescriptionLinuxUnix

// Offerings implements capacity.Provider. For every catalogue type EC2
// sells in an allowed zone it offers on-demand at the catalogue's price
// and, where EC2 quotes a current spot price, spot at that price. Two
// calls: DescribeInstanceTypeOfferings and DescribeSpotPriceHistory.
func (c *Cloud) Offerings(ctx context.Context, r spec.Resources) ([]capacity.Offering, error) {
	if len(r.Providers) > 0 && !slices.Contains(r.Providers, c.cfg.Name) {
		return nil, nil
	}
	names := c.candidateTypes(r)
	zones, ok := allowedZones(c.cfg.Zones, r.Zones)
	if len(names) == 0 || !ok {
		return nil, nil
	}
	placed, err := c.typeZones(ctx, names, zones)
	if err != nil {
		return nil, err
	}
	if len(placed) == 0 {
		return nil, nil
	}
	prices, err := c.spotPrices(ctx, names, zones)
	if err != nil {
		return nil, err
	}
	var out []capacity.Offering
	for _, p := range placed {
		if price, ok := prices[p]; ok {
			o := c.offering(p.instanceType, p.zone, capacity.Spot)
			o.PricePerHour = price
			out = append(out, o)
		}
		out = append(out, c.offering(p.instanceType, p.zone, capacity.OnDemand))
	}
	return capacity.Match(out, r), nil
}

// candidateTypes are the catalogue types the resources could accept, in
// catalogue order.
func (c *Cloud) candidateTypes(r spec.Resources) []string {
	var out []string
	for _, t := range c.cfg.InstanceTypes {
		if t.GPUs >= r.GPUs && (len(r.InstanceTypes) == 0 || slices.Contains(r.InstanceTypes, t.Name)) {
			out = append(out, t.Name)
		}
	}
	return out
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

// placement is an instance type in a zone.
type placement struct{ instanceType, zone string }

// typeZones lists where EC2 sells each type, ordered by catalogue then zone.
func (c *Cloud) typeZones(ctx context.Context, names, zones []string) ([]placement, error) {
	in := &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: types.LocationTypeAvailabilityZone,
		Filters:      []types.Filter{{Name: aws.String("instance-type"), Values: names}},
		MaxResults:   aws.Int32(1000),
	}
	if len(zones) > 0 {
		in.Filters = append(in.Filters, types.Filter{Name: aws.String("location"), Values: zones})
	}
	var out []placement
	pages := ec2.NewDescribeInstanceTypeOfferingsPaginator(c.ec2, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, c.wrap(err, "listing instance type offerings in %s", c.region)
		}
		for _, o := range page.InstanceTypeOfferings {
			p := placement{string(o.InstanceType), aws.ToString(o.Location)}
			// Filters are EC2's to honour; a type or zone it returns
			// anyway is not one refuel was asked about.
			if slices.Contains(names, p.instanceType) && (len(zones) == 0 || slices.Contains(zones, p.zone)) {
				out = append(out, p)
			}
		}
	}
	slices.SortFunc(out, func(a, b placement) int {
		if d := slices.Index(names, a.instanceType) - slices.Index(names, b.instanceType); d != 0 {
			return d
		}
		switch {
		case a.zone < b.zone:
			return -1
		case a.zone > b.zone:
			return 1
		}
		return 0
	})
	return slices.Compact(out), nil
}

// spotPrices returns the current spot price of each type in each zone:
// the latest record at or before now, which EC2 includes when asked from
// now on.
func (c *Cloud) spotPrices(ctx context.Context, names, zones []string) (map[placement]float64, error) {
	in := &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes:       make([]types.InstanceType, len(names)),
		ProductDescriptions: []string{string(spotProduct)},
		StartTime:           aws.Time(c.cfg.Clock()),
		MaxResults:          aws.Int32(1000),
	}
	for i, n := range names {
		in.InstanceTypes[i] = types.InstanceType(n)
	}
	if len(zones) > 0 {
		in.Filters = []types.Filter{{Name: aws.String("availability-zone"), Values: zones}}
	}
	prices := map[placement]float64{}
	latest := map[placement]time.Time{}
	pages := ec2.NewDescribeSpotPriceHistoryPaginator(c.ec2, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, c.wrap(err, "reading spot prices in %s", c.region)
		}
		for _, sp := range page.SpotPriceHistory {
			p := placement{string(sp.InstanceType), aws.ToString(sp.AvailabilityZone)}
			price, err := strconv.ParseFloat(aws.ToString(sp.SpotPrice), 64)
			if err != nil {
				return nil, fmt.Errorf("spot price %q of %s in %s: %w", aws.ToString(sp.SpotPrice), p.instanceType, p.zone, err)
			}
			at := aws.ToTime(sp.Timestamp)
			if t, seen := latest[p]; !seen || at.After(t) {
				prices[p], latest[p] = price, at
			}
		}
	}
	return prices, nil
}
