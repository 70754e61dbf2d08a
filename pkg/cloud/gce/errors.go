package gce

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/googleapi"

	"refuel/pkg/capacity"
)

// Compute Engine's error codes: an operation's error codes (upper case)
// and the reasons of a refused call (camel case).
const (
	CodeResourcePoolExhausted            = "ZONE_RESOURCE_POOL_EXHAUSTED"
	CodeResourcePoolExhaustedWithDetails = "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
	CodeQuotaExceeded                    = "QUOTA_EXCEEDED"
	CodeUnsupportedOperation             = "UNSUPPORTED_OPERATION"
	CodeResourceNotFound                 = "RESOURCE_NOT_FOUND"
	CodeAlreadyExists                    = "RESOURCE_ALREADY_EXISTS"
	ReasonQuotaExceeded                  = "quotaExceeded"
	ReasonRateLimitExceeded              = "rateLimitExceeded"
	ReasonUserRateLimitExceeded          = "userRateLimitExceeded"
	ReasonForbidden                      = "forbidden"
	ReasonAccessNotConfigured            = "accessNotConfigured"
	ReasonInsufficientPermissions        = "insufficientPermissions"
	ReasonAuthError                      = "authError"
	ReasonNotFound                       = "notFound"
	ReasonAlreadyExists                  = "alreadyExists"
	reasonInvalid                        = "invalid"
)

// ClassOfCode maps a Compute Engine error code or reason to the class
// refuel acts on. A code it does not know is Unknown: reported with its
// code and retried, never taken for a stock-out.
func ClassOfCode(code string) capacity.Class {
	switch code {
	case CodeResourcePoolExhausted, CodeResourcePoolExhaustedWithDetails, "STOCKOUT":
		return capacity.NoCapacity
	case CodeQuotaExceeded, ReasonQuotaExceeded:
		return capacity.Quota
	case ReasonRateLimitExceeded, ReasonUserRateLimitExceeded, "RATE_LIMIT_EXCEEDED":
		return capacity.Throttled
	case CodeUnsupportedOperation:
		return capacity.SpecMismatch
	case ReasonForbidden, ReasonAccessNotConfigured, ReasonInsufficientPermissions, ReasonAuthError:
		return capacity.Config
	}
	return capacity.Unknown
}

// apiError is a refused call's code (its first reason, or its HTTP status
// when it gives none), class and message; ok is false for an error that
// is no API answer (a network failure, a cancelled context).
func apiError(err error) (code string, class capacity.Class, message string, ok bool) {
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		return "", capacity.Unknown, "", false
	}
	message = ge.Message
	for _, item := range ge.Errors {
		if item.Reason != "" {
			code = item.Reason
			if message == "" {
				message = item.Message
			}
			break
		}
	}
	class = ClassOfCode(code)
	if code == reasonInvalid && strings.Contains(message, "does not exist in zone") {
		class = capacity.SpecMismatch // a machine type the zone does not sell
	}
	if class == capacity.Unknown {
		switch ge.Code {
		case http.StatusUnauthorized, http.StatusForbidden:
			class = capacity.Config
		case http.StatusTooManyRequests:
			class = capacity.Throttled
		}
	}
	if code == "" {
		code = fmt.Sprintf("HTTP %d", ge.Code)
	}
	if message == "" {
		message = http.StatusText(ge.Code)
	}
	return code, class, message, true
}

func httpStatus(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}

func isNotFound(err error) bool { return httpStatus(err) == http.StatusNotFound }

// definitive reports whether a failed call was refused (a client error),
// after which nothing was done, rather than lost on the way or failed
// inside Google, after which something may have been.
func definitive(err error) bool {
	s := httpStatus(err)
	return s >= 400 && s < 500
}

// operationError is a finished operation's first error, classified; nil
// when it succeeded.
func operationError(op *compute.Operation) (code string, class capacity.Class, message string, failed bool) {
	if op.Error == nil || len(op.Error.Errors) == 0 {
		return "", "", "", false
	}
	e := op.Error.Errors[0]
	return e.Code, ClassOfCode(e.Code), e.Message, true
}

// hint says what to fix for the failures refuel's configuration causes.
func (c *Cloud) hint(code string, class capacity.Class, status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "Compute Engine refused the credentials: check GOOGLE_APPLICATION_CREDENTIALS or `gcloud auth application-default login`"
	case code == ReasonAccessNotConfigured:
		return fmt.Sprintf("enable the Compute Engine API in project %s, or fix --gce-project", c.cfg.Project)
	case class == capacity.Config:
		return fmt.Sprintf("the credentials may not do this in project %s: grant roles/compute.instanceAdmin.v1 (and roles/iam.serviceAccountUser for Config.ServiceAccount), or fix --gce-project", c.cfg.Project)
	case class == capacity.Quota:
		return fmt.Sprintf("raise the project's GPU quota (IAM & Admin > Quotas) in project %s, or allow other machine types or regions", c.cfg.Project)
	}
	return ""
}

// wrap says what failed and, when refuel's configuration is the cause,
// what to fix; a project Compute Engine does not know names
// --gce-project. A configuration failure comes back classified config,
// so whoever asked fails at once rather than retrying.
func (c *Cloud) wrap(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	code, class, msg, ok := apiError(err)
	if !ok {
		return fmt.Errorf("%s: %w", what, err)
	}
	h := c.hint(code, class, httpStatus(err))
	if class == capacity.Config {
		return errors.Join(capacity.NewError(capacity.Config, capacity.Offering{Provider: c.Name()}, code, "%s: %s (%s)", what, msg, h), err)
	}
	if h != "" {
		return fmt.Errorf("%s: %w (%s)", what, err, h)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// projectError explains a 404 on a project-wide call: the project does
// not exist, or the credentials cannot see it.
func (c *Cloud) projectError(err error, what string) error {
	if isNotFound(err) {
		return errors.Join(capacity.NewError(capacity.Config, capacity.Offering{Provider: c.Name()}, ReasonNotFound,
			"%s: Compute Engine knows no project %q (set --gce-project, env %s, to a project whose Compute Engine API is enabled)", what, c.cfg.Project, EnvProject), err)
	}
	return c.wrap(err, "%s", what)
}

// explain is a failed call's code, class and message for a classified
// failure, with what to fix when refuel's configuration is the cause.
func (c *Cloud) explain(err error) (code string, class capacity.Class, message string) {
	code, class, message, ok := apiError(err)
	if !ok {
		return "", capacity.Unknown, err.Error()
	}
	if h := c.hint(code, class, httpStatus(err)); h != "" {
		message += " (" + h + ")"
	}
	return code, class, message
}
