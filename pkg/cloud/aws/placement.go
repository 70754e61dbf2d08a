package aws

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"refuel/pkg/capacity"
)

// placementScoresFresh is how long the provider reuses the scores of an
// instance type: every deciding run asks at every step, and EC2 limits
// how often one account may ask for scores.
const placementScoresFresh = 10 * time.Minute

// placementScores are the scores of an instance type's zones, by zone
// name, as read at a time.
type placementScores struct {
	at     time.Time
	byZone map[string]int
}

// PlacementScores are EC2's spot placement scores, from 1 (a request for
// one instance is unlikely to succeed) to 10 (highly likely), of those of
// the spot offerings given that are this provider's, by offering key; an
// offering EC2 gave no score for is left out. One GetSpotPlacementScores
// call per instance type, for single zones of the provider's region, and
// one DescribeAvailabilityZones, as EC2 names the zones it scores by ID;
// an instance type's scores are reused for placementScoresFresh.
func (c *Cloud) PlacementScores(ctx context.Context, offerings []capacity.Offering) (map[string]int, error) {
	out := map[string]int{}
	for _, o := range offerings {
		if o.Provider != c.cfg.Name || o.Market != capacity.Spot {
			continue
		}
		scores, err := c.placementScores(ctx, o.InstanceType)
		if err != nil {
			return nil, err
		}
		if score, ok := scores[o.Zone]; ok {
			out[o.Key()] = score
		}
	}
	return out, nil
}

// placementScores are the scores of an instance type's zones, by name,
// read afresh once those held are placementScoresFresh old.
func (c *Cloud) placementScores(ctx context.Context, name string) (map[string]int, error) {
	now := c.cfg.Clock()
	c.mu.Lock()
	held, ok := c.scores[name]
	c.mu.Unlock()
	if ok && now.Sub(held.at) < placementScoresFresh {
		return held.byZone, nil
	}
	zones, err := c.ec2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	if err != nil {
		return nil, c.wrap(err, "listing the zones of %s", c.region)
	}
	zoneOf := map[string]string{} // zone ID → name
	for _, z := range zones.AvailabilityZones {
		zoneOf[aws.ToString(z.ZoneId)] = aws.ToString(z.ZoneName)
	}
	in := &ec2.GetSpotPlacementScoresInput{
		InstanceTypes: []string{name}, TargetCapacity: aws.Int32(1),
		SingleAvailabilityZone: aws.Bool(true), RegionNames: []string{c.region},
	}
	byZone := map[string]int{}
	pages := ec2.NewGetSpotPlacementScoresPaginator(c.ec2, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, c.wrap(err, "reading the spot placement scores of %s in %s", name, c.region)
		}
		for _, s := range page.SpotPlacementScores {
			if zone, ok := zoneOf[aws.ToString(s.AvailabilityZoneId)]; ok && s.Score != nil {
				byZone[zone] = int(*s.Score)
			}
		}
	}
	c.mu.Lock()
	c.scores[name] = placementScores{at: now, byZone: byZone}
	c.mu.Unlock()
	return byZone, nil
}
