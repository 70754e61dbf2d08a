package ec2api

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestGetSpotPlacementScores(t *testing.T) {
	// Over ticks 0..5 smallA holds 1,0,2,1,0,2 and smallB 0,1,0,1,0,1;
	// us-west-2 holds their sums, 1,1,2,2,0,3.
	tests := map[string]struct {
		in   ec2.GetSpotPlacementScoresInput
		want []types.SpotPlacementScore
	}{
		"zones, one instance": {
			in: ec2.GetSpotPlacementScoresInput{InstanceTypes: []string{small}, TargetCapacity: aws.Int32(1), SingleAvailabilityZone: aws.Bool(true)},
			want: []types.SpotPlacementScore{
				{Region: aws.String("us-west-2"), AvailabilityZoneId: aws.String("usw2-az1"), Score: aws.Int32(7)},
				{Region: aws.String("us-west-2"), AvailabilityZoneId: aws.String("usw2-az2"), Score: aws.Int32(5)},
			},
		},
		"zones, two instances": {
			in: ec2.GetSpotPlacementScoresInput{InstanceTypes: []string{small}, TargetCapacity: aws.Int32(2), SingleAvailabilityZone: aws.Bool(true)},
			want: []types.SpotPlacementScore{
				{Region: aws.String("us-west-2"), AvailabilityZoneId: aws.String("usw2-az1"), Score: aws.Int32(3)},
				{Region: aws.String("us-west-2"), AvailabilityZoneId: aws.String("usw2-az2"), Score: aws.Int32(1)},
			},
		},
		"region, two instances": {
			in:   ec2.GetSpotPlacementScoresInput{InstanceTypes: []string{small}, TargetCapacity: aws.Int32(2), RegionNames: []string{"us-west-2"}},
			want: []types.SpotPlacementScore{{Region: aws.String("us-west-2"), Score: aws.Int32(5)}},
		},
		"in vCPUs": {
			in:   ec2.GetSpotPlacementScoresInput{InstanceTypes: []string{small}, TargetCapacity: aws.Int32(9), TargetCapacityUnitType: types.TargetCapacityUnitTypeVcpu},
			want: []types.SpotPlacementScore{{Region: aws.String("us-west-2"), Score: aws.Int32(5)}},
		},
		"another region": {
			in: ec2.GetSpotPlacementScoresInput{InstanceTypes: []string{small}, TargetCapacity: aws.Int32(1), RegionNames: []string{"us-east-1"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, nil, nil)
			e.cloud.Advance(5)
			out, err := e.client.GetSpotPlacementScores(context.Background(), &tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(out.SpotPlacementScores, tc.want, cmp.AllowUnexported(types.SpotPlacementScore{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("scores got(-), want(+):\n%s", diff)
			}
		})
	}
}

func TestGetSpotPlacementScoresErrors(t *testing.T) {
	tests := map[string]struct {
		in   ec2.GetSpotPlacementScoresInput
		code string
	}{
		"no instance type": {ec2.GetSpotPlacementScoresInput{TargetCapacity: aws.Int32(1)}, "MissingParameter"},
		"no capacity":      {ec2.GetSpotPlacementScoresInput{InstanceTypes: []string{small}, TargetCapacity: aws.Int32(0)}, codeInvalidValue},
		"unknown type":     {ec2.GetSpotPlacementScoresInput{InstanceTypes: []string{"x9.huge"}, TargetCapacity: aws.Int32(1)}, codeInvalidValue},
		"too few results":  {ec2.GetSpotPlacementScoresInput{InstanceTypes: []string{small}, TargetCapacity: aws.Int32(1), MaxResults: aws.Int32(3)}, codeInvalidValue},
		"dry run":          {ec2.GetSpotPlacementScoresInput{InstanceTypes: []string{small}, TargetCapacity: aws.Int32(1), DryRun: aws.Bool(true)}, "DryRunOperation"},
		"unknown unit":     {ec2.GetSpotPlacementScoresInput{InstanceTypes: []string{small}, TargetCapacity: aws.Int32(1), TargetCapacityUnitType: "gpus"}, codeInvalidValue},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, nil, nil)
			_, err := e.client.GetSpotPlacementScores(context.Background(), &tc.in)
			code, _ := errorOf(t, err)
			if code != tc.code {
				t.Errorf("error %s (%v); want %s", code, err, tc.code)
			}
		})
	}
}
