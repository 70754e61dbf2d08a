package aws

import (
	"context"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"refuel/pkg/capacity"
)

// PlacementScores are EC2's spot placement scores, from 1 (a request for
// one instance is unlikely to succeed) to 10 (highly likely), of those of
// the spot offerings given that are this provider's, by offering key; an
// offering EC2 gave no score for is left out. One GetSpotPlacementScores
// call per instance type, for single zones of the provider's region, and
// one DescribeAvailabilityZones, as EC2 names the zones it scores by ID.
func (c *Cloud) PlacementScores(ctx context.Context, offerings []capacity.Offering) (map[string]int, error) {
	var names []string
	for _, o := range offerings {
		if o.Provider == c.cfg.Name && o.Market == capacity.Spot && !slices.Contains(names, o.InstanceType) {
			names = append(names, o.InstanceType)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	zones, err := c.ec2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	if err != nil {
		return nil, c.wrap(err, "listing the zones of %s", c.region)
	}
	zoneOf := map[string]string{} // zone ID → name
	for _, z := range zones.AvailabilityZones {
		zoneOf[aws.ToString(z.ZoneId)] = aws.ToString(z.ZoneName)
	}
	out := map[string]int{}
	for _, name := range names {
		in := &ec2.GetSpotPlacementScoresInput{
			InstanceTypes: []string{name}, TargetCapacity: aws.Int32(1),
			SingleAvailabilityZone: aws.Bool(true), RegionNames: []string{c.region},
		}
		scores := map[string]int{} // zone → score
		pages := ec2.NewGetSpotPlacementScoresPaginator(c.ec2, in)
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return nil, c.wrap(err, "reading the spot placement scores of %s in %s", name, c.region)
			}
			for _, s := range page.SpotPlacementScores {
				if zone, ok := zoneOf[aws.ToString(s.AvailabilityZoneId)]; ok && s.Score != nil {
					scores[zone] = int(*s.Score)
				}
			}
		}
		for _, o := range offerings {
			if score, ok := scores[o.Zone]; ok && o.Provider == c.cfg.Name && o.Market == capacity.Spot && o.InstanceType == name {
				out[o.Key()] = score
			}
		}
	}
	return out, nil
}
