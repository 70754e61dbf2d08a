package aws

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/smithy-go"

	"refuel/pkg/capacity"
)

// ClassOfCode maps an EC2 error code, from a failed call or from an
// instant fleet's per-override Errors list, to the class refuel acts on.
// Codes it does not know are Unknown: the failure is reported with its
// code, and retried, rather than guessed at.
func ClassOfCode(code string) capacity.Class {
	switch code {
	case "InsufficientInstanceCapacity", "InsufficientHostCapacity", "InsufficientCapacity", "UnfulfillableCapacity":
		return capacity.NoCapacity
	case "SpotMaxPriceTooLow":
		return capacity.Price
	case "MaxSpotInstanceCountExceeded", "VcpuLimitExceeded", "InstanceLimitExceeded":
		return capacity.Quota
	case "Unsupported", "InvalidParameterCombination":
		return capacity.SpecMismatch
	case "RequestLimitExceeded":
		return capacity.Throttled
	case codeAuthFailure, codeUnauthorized, codeOptInRequired, codeInvalidInstanceType,
		"InvalidAMIID.NotFound", "InvalidAMIID.Malformed", "InvalidSubnetID.NotFound", "InvalidGroup.NotFound", "InvalidKeyPair.NotFound":
		return capacity.Config
	}
	if strings.HasPrefix(code, codeLaunchTemplate) {
		// InvalidLaunchTemplateName.NotFoundException, …Id.NotFound,
		// …Id.Malformed, …Id.VersionNotFound and the like.
		return capacity.Config
	}
	return capacity.Unknown
}

// ClassOf is ClassOfCode refined by the message, for the codes whose
// meaning lies in it: InvalidParameterValue naming the instance type is a
// type EC2 does not have (configuration, like InvalidInstanceType); one
// naming the zone is an offering that cannot exist.
func ClassOf(code, message string) capacity.Class {
	if code == codeInvalidValue {
		switch m := strings.ToLower(message); {
		case strings.Contains(m, "instancetype") || strings.Contains(m, "instance type"):
			return capacity.Config
		case strings.Contains(m, "availability zone") || strings.Contains(m, "availabilityzone"):
			return capacity.SpecMismatch
		}
	}
	return ClassOfCode(code)
}

// Codes refuel's own configuration causes: no retry cures them.
const (
	codeAuthFailure         = "AuthFailure"
	codeUnauthorized        = "UnauthorizedOperation"
	codeOptInRequired       = "OptInRequired"
	codeInvalidInstanceType = "InvalidInstanceType"
	codeLaunchTemplate      = "InvalidLaunchTemplate"
	codeInvalidValue        = "InvalidParameterValue"
)

// Codes EC2 gives for an instance ID that does not exist (any more) or
// cannot exist; both mean the instance is not there.
const (
	codeInstanceNotFound  = "InvalidInstanceID.NotFound"
	codeInstanceMalformed = "InvalidInstanceID.Malformed"
	// codeTokenReused says a ClientToken was used before with other
	// parameters: something was already launched, or tried, under it.
	codeTokenReused = "IdempotentParameterMismatch"
)

// apiCode returns the EC2 error code in err, or "" when err is no API
// error (a network failure, a cancelled context).
func apiCode(err error) (code, message string) {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode(), apiErr.ErrorMessage()
	}
	return "", ""
}

func isInstanceNotFound(err error) bool {
	code, _ := apiCode(err)
	return code == codeInstanceNotFound || code == codeInstanceMalformed
}

// hint says what to fix for the codes that come from refuel's own
// configuration rather than from the market.
func (c *Cloud) hint(code, message string) string {
	switch {
	case strings.HasPrefix(code, codeLaunchTemplate):
		return fmt.Sprintf("check Config.LaunchTemplate (worker --aws-launch-template): %s must exist in region %s", c.cfg.LaunchTemplate, c.region)
	case code == codeAuthFailure:
		return "EC2 does not accept the credentials: check the access key, its secret and session token, or the profile"
	case code == codeUnauthorized:
		return "the credentials may not do this: grant the actions in deploy/iam-policy.json (and iam:PassRole for the launch template's instance profile)"
	case code == codeOptInRequired:
		return fmt.Sprintf("the account is not subscribed to EC2 in region %s: opt in to the region or choose another", c.region)
	case code == codeInvalidInstanceType || code == codeInvalidValue && ClassOf(code, message) == capacity.Config:
		return fmt.Sprintf("EC2 has no such instance type in region %s: fix resources.instance_types, the pools file or Config.InstanceTypes", c.region)
	case strings.HasPrefix(code, "InvalidAMIID"), code == "InvalidGroup.NotFound", code == "InvalidKeyPair.NotFound":
		return fmt.Sprintf("the launch template %s names an image, security group or key pair that does not exist in region %s", c.cfg.LaunchTemplate, c.region)
	case code == "InvalidSubnetID.NotFound":
		return fmt.Sprintf("check Config.Subnets: a subnet named there does not exist in region %s", c.region)
	case ClassOfCode(code) == capacity.Quota:
		return "raise the account's EC2 quota (Service Quotas) or allow other instance types"
	}
	return ""
}

// wrap says what failed and, when refuel's configuration is the cause,
// what to fix; err stays reachable through errors.As.
// A failure of refuel's own configuration (credentials, permissions)
// comes back classified config, so whoever asked fails at once saying
// what to fix rather than retrying.
func (c *Cloud) wrap(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	code, message := apiCode(err)
	h := c.hint(code, message)
	if ClassOf(code, message) == capacity.Config {
		return errors.Join(capacity.NewError(capacity.Config, capacity.Offering{Provider: c.Name()}, code, "%s: %s (%s)", what, message, h), err)
	}
	if h != "" {
		return fmt.Errorf("%s: %w (%s)", what, err, h)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// explain is a failed call's code, class and message for a classified
// failure, with what to fix when refuel's configuration is the cause.
func (c *Cloud) explain(err error) (code string, class capacity.Class, message string) {
	code, message = apiCode(err)
	if code == "" {
		return "", capacity.Unknown, err.Error()
	}
	class = ClassOf(code, message)
	if h := c.hint(code, message); h != "" {
		message += " (" + h + ")"
	}
	return code, class, message
}
