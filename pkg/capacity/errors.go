package capacity

import (
	"errors"
	"fmt"
	"strings"
)

// Class is why a provider could not deliver capacity. Each class has its
// own handling: see Retryable and the workflow's failover.
type Class string

const (
	// NoCapacity: the offering is out of stock now; try another, or later.
	NoCapacity Class = "no-capacity"
	// SpecMismatch: the offering cannot exist (type not sold in that zone,
	// bad parameter combination); retrying never helps.
	SpecMismatch Class = "spec-mismatch"
	// Quota: the account may not have more of this; retrying never helps
	// until the quota is raised.
	Quota Class = "quota"
	// Price: the market price is above the job's max_price_per_hour.
	Price Class = "price"
	// Throttled: the provider's API asked us to slow down; retry with backoff.
	Throttled Class = "throttled"
	// InitFailure: the instance launched but never became ready.
	InitFailure Class = "init-failure"
	// Unknown: anything the provider did not classify.
	Unknown Class = "unknown"
)

// Retryable reports whether the same request may succeed later.
func (c Class) Retryable() bool {
	switch c {
	case SpecMismatch, Quota:
		return false
	}
	return true
}

// Error is one classified failure to acquire an offering.
type Error struct {
	Class    Class
	Offering Offering
	// Code is the provider's own error code, such as EC2's
	// InsufficientInstanceCapacity, when there is one.
	Code    string
	Message string
}

func (e *Error) Error() string {
	code := ""
	if e.Code != "" {
		code = " (" + e.Code + ")"
	}
	return fmt.Sprintf("%s on %s%s: %s", e.Class, e.Offering.Key(), code, e.Message)
}

// NewError returns a classified failure for an offering.
func NewError(c Class, o Offering, code, format string, args ...any) *Error {
	return &Error{Class: c, Offering: o, Code: code, Message: fmt.Sprintf(format, args...)}
}

// ClassOf returns the class of a failure. For several joined failures it
// returns the most actionable one: a retryable class wins over a permanent
// one, since some offering may still come through; Unknown when err holds
// no *Error.
func ClassOf(err error) Class {
	fs := Failures(err)
	if len(fs) == 0 {
		return Unknown
	}
	best := fs[0].Class
	for _, f := range fs[1:] {
		if !best.Retryable() && f.Class.Retryable() {
			best = f.Class
		}
	}
	return best
}

// Failures unpacks every *Error in err, including those joined with
// errors.Join or wrapped with %w.
func Failures(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if e, ok := err.(*Error); ok {
			out = append(out, e)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, inner := range u.Unwrap() {
				walk(inner)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// Summary lists failures one per line for logs and error messages.
func Summary(err error) string {
	fs := Failures(err)
	lines := make([]string, len(fs))
	for i, f := range fs {
		lines[i] = f.Error()
	}
	return strings.Join(lines, "; ")
}

// NotFoundError says an instance does not exist (any more).
type NotFoundError struct{ ID string }

func (e *NotFoundError) Error() string { return fmt.Sprintf("instance %s not found", e.ID) }

// IsNotFound reports whether err says an instance does not exist.
func IsNotFound(err error) bool {
	var nf *NotFoundError
	return errors.As(err, &nf)
}
