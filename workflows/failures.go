package workflows

import (
	"errors"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/capacity"
)

// Failure is one classified failure a run or service met.
type Failure struct {
	Class    string    `json:"class"`
	Offering string    `json:"offering"`
	Message  string    `json:"message"`
	Time     time.Time `json:"time"`
}

// maxFailures bounds how many failures status keeps (the newest).
const maxFailures = 20

// addFailure appends a failure to fs, keeping the newest maxFailures.
func addFailure(ctx workflow.Context, fs []Failure, class, offering, msg string) []Failure {
	fs = append(fs, Failure{Class: class, Offering: offering, Message: msg, Time: workflow.Now(ctx)})
	if n := len(fs); n > maxFailures {
		fs = fs[n-maxFailures:]
	}
	return fs
}

// failureDetails are the classified failures an Acquire error carries;
// an error without them counts as one failure of its type's class.
func failureDetails(err error) []activities.FailureDetail {
	var details []activities.FailureDetail
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.HasDetails() {
		_ = app.Details(&details)
	}
	if len(details) == 0 {
		class := capacity.Unknown
		if app != nil && app.Type() != "" {
			class = capacity.Class(app.Type())
		}
		details = []activities.FailureDetail{{Class: class, Message: err.Error()}}
	}
	return details
}

// classes are the failures' classes, for capacity's remedies.
func classes(details []activities.FailureDetail) []capacity.Class {
	out := make([]capacity.Class, len(details))
	for i, d := range details {
		out[i] = d.Class
	}
	return out
}

// permanent reports whether no offering can ever succeed.
func permanent(details []activities.FailureDetail) bool {
	return capacity.Permanent(classes(details)...)
}

// curedSoon reports whether some failure may pass within minutes (stock
// returning, an API calming down); prices move over hours.
func curedSoon(details []activities.FailureDetail) bool {
	return capacity.CuredWithin(capacity.Minutes, classes(details)...)
}

// unclassified reports whether every failure is of class unknown.
func unclassified(details []activities.FailureDetail) bool {
	for _, d := range details {
		if d.Class != capacity.Unknown {
			return false
		}
	}
	return len(details) > 0
}

// waitingOn is the class a waiting run waits on: the first failure that
// waiting can cure.
func waitingOn(details []activities.FailureDetail) capacity.Class {
	for _, d := range details {
		if d.Class.Retryable() {
			return d.Class
		}
	}
	return capacity.Unknown
}

// cannotAcquire is the error that ends a run none of whose offerings can
// ever be had: its type is the first failure's class.
func cannotAcquire(what string, details []activities.FailureDetail) error {
	return temporal.NewNonRetryableApplicationError(what+": "+describeFailures(details), string(details[0].Class), nil, details)
}

func describeFailures(details []activities.FailureDetail) string {
	parts := make([]string, len(details))
	for i, d := range details {
		parts[i] = string(d.Class) + " on " + d.Offering + ": " + d.Message
	}
	return strings.Join(parts, "; ")
}
