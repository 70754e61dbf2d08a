// Package aws rents GPU instances from Amazon EC2 through aws-sdk-go-v2.
//
// Every instance is launched by an instant EC2 Fleet from one launch
// template, with an override per instance type and zone the request
// accepts: spot on price-capacity-optimized, on-demand in the request's
// order. The provider calls seven EC2 actions: CreateFleet,
// DescribeInstances, TerminateInstances, DescribeInstanceTypeOfferings,
// DescribeSpotPriceHistory, and for the spot placement scores refuel plans
// with (PlacementScores) GetSpotPlacementScores and
// DescribeAvailabilityZones. IAM must also allow the RunInstances and
// CreateTags that CreateFleet is authorised as (see deploy/iam-policy.json),
// and iam:PassRole when the template names an instance profile.
//
// EC2's error codes are mapped to refuel's classes by ClassOfCode (and
// ClassOf, for InvalidParameterValue, whose message says what was
// invalid), so a failed launch says whether it was stock, price, quota, a
// spec mismatch, throttling or refuel's own configuration (credentials,
// permissions, launch template, instance type), with what to fix; see
// capacity.Class for how each is handled.
//
// # The launch template
//
// The provider chooses only instance type, zone and market; everything
// else (AMI, network, instance profile, disks) comes from the template in
// Config.LaunchTemplate. Its user data must start the node agent serving
// the instance's own task queue, "refuel-node-" followed by the instance
// ID, or the run that acquired the instance will never reach it. For
// example, with the worker binary baked into the AMI:
//
//	#!/bin/bash
//	set -euo pipefail
//	imds=http://169.254.169.254
//	token=$(curl -fsS -X PUT $imds/latest/api/token -H 'X-aws-ec2-metadata-token-ttl-seconds: 21600')
//	id=$(curl -fsS -H "X-aws-ec2-metadata-token: $token" $imds/latest/meta-data/instance-id)
//	mkdir -p /var/lib/refuel
//	exec /usr/local/bin/worker agent \
//	  --instance-id "$id" --task-queue "refuel-node-$id" \
//	  --metadata-endpoint $imds --dir /var/lib/refuel \
//	  --temporal-address temporal.example.internal:7233 --namespace default \
//	  --checkpoint-url s3://example-bucket/checkpoints
//
// The --metadata-endpoint lets the agent see the two-minute spot
// interruption notice and rebalance recommendations. The template must not
// set a market (InstanceMarketOptions) or pin a subnet: the fleet chooses
// the market and the zone, and Config.Subnets the subnet in each zone.
//
// # Against the simulated cloud
//
// refuel's simulated EC2 endpoint speaks the same API subset. Point the
// provider at it with Config.Endpoint, Config.Region and any static
// credentials (Config.AccessKeyID and Config.SecretAccessKey).
package aws
