package capacity

import (
	"errors"
	"fmt"
	"strings"
)

// Class is why a provider could not deliver capacity. What each class
// allows (a retry, a wait) is decided in one place, Remedy, which the
// Acquire activity, training runs and services all ask.
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
	// Config: refuel's own configuration is wrong (credentials refused, an
	// action not permitted, a launch template or instance type that does
	// not exist); someone must fix it, no retry cures it.
	Config Class = "config"
	// Unknown: anything the provider did not classify.
	Unknown Class = "unknown"
)

// Classes lists every class, in the order the docs present them.
var Classes = []Class{NoCapacity, SpecMismatch, Quota, Price, Throttled, InitFailure, Config, Unknown}

// Wait is how long waiting takes to cure a failure.
type Wait int

const (
	// Never: waiting cures nothing; something must change first.
	Never Wait = iota
	// Minutes: stock comes back and APIs calm down within minutes.
	Minutes
	// Hours: prices move over hours.
	Hours
)

// Remedy says what may cure one class of failure.
type Remedy struct {
	// Retry: asking again at once may succeed, so the Acquire activity
	// leaves it to Temporal's retry policy (which bounds the attempts).
	Retry bool
	// Wait: how long waiting takes to cure it.
	Wait Wait
	// Account: the failure is the account's rather than the offering's:
	// every offering of the provider fails alike, so the Acquire activity
	// tries none of the provider's other offerings in the same call.
	// Only throttling is: EC2 counts API calls per account and region,
	// while its quotas are per market and instance family (a spot quota
	// spent leaves on-demand), and Config covers an instance type or a
	// subnet that does not exist as well as credentials refused.
	Account bool
}

// remedies is the one table of what each class allows.
var remedies = map[Class]Remedy{
	NoCapacity:   {Wait: Minutes},
	SpecMismatch: {Wait: Never},
	Quota:        {Wait: Never},
	Price:        {Wait: Hours},
	Throttled:    {Retry: true, Wait: Minutes, Account: true},
	InitFailure:  {Wait: Minutes},
	Config:       {Wait: Never},
	Unknown:      {Retry: true, Wait: Minutes},
}

// Remedy is what may cure a failure of class c. A class this build does
// not know is handled as Unknown.
func (c Class) Remedy() Remedy {
	if r, ok := remedies[c]; ok {
		return r
	}
	return remedies[Unknown]
}

// Retryable reports whether waiting, however long, may cure c.
func (c Class) Retryable() bool { return c.Remedy().Wait != Never }

// CuredWithin reports whether some failure among classes may pass by
// waiting at most w: with Minutes, whether a run should wait for stock
// rather than give up on the offerings; with Hours, whether waiting can
// help at all.
func CuredWithin(w Wait, classes ...Class) bool {
	for _, c := range classes {
		if r := c.Remedy(); r.Wait != Never && r.Wait <= w {
			return true
		}
	}
	return false
}

// Permanent reports whether no failure among classes can pass by
// waiting: some must be fixed first. An empty list is not permanent.
func Permanent(classes ...Class) bool {
	return len(classes) > 0 && !CuredWithin(Hours, classes...)
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
