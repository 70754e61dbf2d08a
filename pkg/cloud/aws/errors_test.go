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
	"InsufficientInstanceCapacity": capacity.NoCapacity,
	"InsufficientHostCapacity":     capacity.NoCapacity,
	"InsufficientCapacity":         capacity.NoCapacity,
	"UnfulfillableCapacity":        capacity.NoCapacity,
	"SpotMaxPriceTooLow":           capacity.Price,
	"MaxSpotInstanceCountExceeded": capacity.Quota,
	"VcpuLimitExceeded":            capacity.Quota,
	"InstanceLimitExceeded":        capacity.Quota,
	"Unsupported":                  capacity.SpecMismatch,
	"InvalidParameterCombination":  capacity.SpecMismatch,
	"RequestLimitExceeded":         capacity.Throttled,
	"SomethingNewFromEC2":          capacity.Unknown,
	"":                             capacity.Unknown,
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

func TestFailuresSayWhatToFix(t *testing.T) {
	cases := map[string]string{
		"InvalidLaunchTemplateName.NotFoundException": `check Config.LaunchTemplate: "refuel-node" version 3 must exist in region us-east-1`,
		"InvalidLaunchTemplateId.VersionNotFound":     "check Config.LaunchTemplate",
		"UnauthorizedOperation":                       "deploy/iam-policy.json",
		"VcpuLimitExceeded":                           "raise the account's EC2 quota",
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
