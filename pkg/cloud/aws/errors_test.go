package aws

import (
	"context"
	"errors"
	"strings"
	"testing"

	"refuel/pkg/capacity"
)

// everyCode is issue 3's mapping of EC2 error codes to classes.
var everyCode = map[string]capacity.Class{
	"InsufficientInstanceCapacity":                capacity.NoCapacity,
	"InsufficientHostCapacity":                    capacity.NoCapacity,
	"InsufficientCapacity":                        capacity.NoCapacity,
	"UnfulfillableCapacity":                       capacity.NoCapacity,
	"SpotMaxPriceTooLow":                          capacity.Price,
	"MaxSpotInstanceCountExceeded":                capacity.Quota,
	"VcpuLimitExceeded":                           capacity.Quota,
	"InstanceLimitExceeded":                       capacity.Quota,
	"Unsupported":                                 capacity.SpecMismatch,
	"InvalidParameterCombination":                 capacity.SpecMismatch,
	"RequestLimitExceeded":                        capacity.Throttled,
	"AuthFailure":                                 capacity.Config,
	"UnauthorizedOperation":                       capacity.Config,
	"OptInRequired":                               capacity.Config,
	"InvalidInstanceType":                         capacity.Config,
	"InvalidAMIID.NotFound":                       capacity.Config,
	"InvalidSubnetID.NotFound":                    capacity.Config,
	"InvalidLaunchTemplateName.NotFoundException": capacity.Config,
	"InvalidLaunchTemplateId.NotFound":            capacity.Config,
	"InvalidLaunchTemplateId.Malformed":           capacity.Config,
	"InvalidLaunchTemplateId.VersionNotFound":     capacity.Config,
	"InvalidParameterValue":                       capacity.Unknown, // what was invalid is in the message
	"SomethingNewFromEC2":                         capacity.Unknown,
	"":                                            capacity.Unknown,
}

func TestClassOfCode(t *testing.T) {
	for code, want := range everyCode {
		t.Run(code, func(t *testing.T) {
			if got := ClassOfCode(code); got != want {
				t.Errorf("ClassOfCode(%q) = %s; want %s", code, got, want)
			}
		})
	}
}

// TestAcquireClassifiesEveryCode checks each code both where an instant
// fleet reports it (the call succeeds, the override failed) and as the
// call's own error.
func TestAcquireClassifiesEveryCode(t *testing.T) {
	for code, want := range everyCode {
		if code == "" {
			continue
		}
		for _, where := range []string{"fleet error", "call error"} {
			t.Run(where+"/"+code, func(t *testing.T) {
				f := &fakeEC2{}
				if where == "fleet error" {
					f.LaunchErrors = map[string]string{launchKey(spotP3a): code}
				} else {
					f.CallErrors = map[string][]string{"CreateFleet": {code, code, code}}
				}
				c := newTestCloud(t, f, nil)
				_, err := c.Acquire(context.Background(), capacity.Request{RunID: "run-1", Attempt: 1, Offerings: []capacity.Offering{spotP3a}})
				var ce *capacity.Error
				if !errors.As(err, &ce) {
					t.Fatalf("Acquire = %v; want a *capacity.Error", err)
				}
				if ce.Class != want || ce.Code != code || ce.Offering != spotP3a {
					t.Errorf("got %s %s on %s; want %s %s on %s", ce.Class, ce.Code, ce.Offering.Key(), want, code, spotP3a.Key())
				}
			})
		}
	}
}

// InvalidParameterValue is many things; its message says which.
func TestClassOfReadsTheMessage(t *testing.T) {
	cases := map[string]capacity.Class{
		"Invalid value 'p9.mega' for InstanceType.":                          capacity.Config,
		"The instance type 'p9.mega' does not exist":                         capacity.Config,
		"Invalid availability zone: [us-east-1z]":                            capacity.SpecMismatch,
		"Value (abc) for parameter MaxPrice is invalid.":                     capacity.Unknown,
		"Value () for parameter ClientToken is invalid. It must be at most…": capacity.Unknown,
	}
	for msg, want := range cases {
		if got := ClassOf("InvalidParameterValue", msg); got != want {
			t.Errorf("ClassOf(InvalidParameterValue, %q) = %s; want %s", msg, got, want)
		}
	}
	if got := ClassOf("InsufficientInstanceCapacity", "instance type p3.2xlarge"); got != capacity.NoCapacity {
		t.Errorf("a code with a meaning of its own is classified by it, not by its message: got %s", got)
	}
}

func TestFailuresSayWhatToFix(t *testing.T) {
	cases := map[string]string{
		"InvalidLaunchTemplateName.NotFoundException": `check Config.LaunchTemplate (worker --aws-launch-template): "refuel-node" version 3 must exist in region us-east-1`,
		"AuthFailure":         "check the access key",
		"OptInRequired":       "opt in to the region",
		"InvalidInstanceType": "fix resources.instance_types, the pools file or Config.InstanceTypes",
		"InvalidLaunchTemplateId.VersionNotFound": "check Config.LaunchTemplate",
		"UnauthorizedOperation":                   "deploy/iam-policy.json",
		"VcpuLimitExceeded":                       "raise the account's EC2 quota",
	}
	for code, want := range cases {
		t.Run(code, func(t *testing.T) {
			f := &fakeEC2{CallErrors: map[string][]string{"CreateFleet": {code}}}
			c := newTestCloud(t, f, nil)
			_, err := c.Acquire(context.Background(), capacity.Request{RunID: "run-1", Attempt: 1, Offerings: []capacity.Offering{odP3a}})
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Acquire = %v; want it to say %q", err, want)
			}
		})
	}
}
