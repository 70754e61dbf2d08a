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
	}
	return capacity.Unknown
}

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
func (c *Cloud) hint(code string) string {
	switch {
	case strings.HasPrefix(code, "InvalidLaunchTemplate"):
		return fmt.Sprintf("check Config.LaunchTemplate: %s must exist in region %s", c.cfg.LaunchTemplate, c.region)
	case code == "AuthFailure":
		return "EC2 does not accept the credentials: check the access key, its secret and session token, or the profile"
	case code == "UnauthorizedOperation":
		return "the credentials may not do this: grant the actions in deploy/iam-policy.json (and iam:PassRole for the launch template's instance profile)"
	case ClassOfCode(code) == capacity.Quota:
		return "raise the account's EC2 quota (Service Quotas) or allow other instance types"
	}
	return ""
}

// wrap says what failed and, when refuel's configuration is the cause,
// what to fix; err stays reachable through errors.As.
func (c *Cloud) wrap(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	code, _ := apiCode(err)
	if h := c.hint(code); h != "" {
		return fmt.Errorf("%s: %w (%s)", what, err, h)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// explain is a failed call's code and message for a classified failure,
// with what to fix when refuel's configuration is the cause.
func (c *Cloud) explain(err error) (code, message string) {
	code, message = apiCode(err)
	if code == "" {
		return "", err.Error()
	}
	if h := c.hint(code); h != "" {
		message += " (" + h + ")"
	}
	return code, message
}
