package workload

import (
	"errors"
	"strconv"
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

// MaxFailures bounds how many failures status keeps (the newest).
const MaxFailures = 20

// AddFailure appends a failure to fs, keeping MaxFailures: past them the
// oldest stock-out goes first, so a wait through a long stock-out does not
// push the failures that are failures out of status (StockOuts counts
// them all).
func AddFailure(ctx workflow.Context, fs []Failure, class, offering, msg string) []Failure {
	fs = append(fs, Failure{Class: class, Offering: offering, Message: msg, Time: workflow.Now(ctx)})
	if len(fs) <= MaxFailures {
		return fs
	}
	for i, f := range fs {
		if f.Class == string(capacity.NoCapacity) {
			return append(fs[:i], fs[i+1:]...)
		}
	}
	return fs[1:]
}

// StockOuts folds the stock-outs a run or service met (failures of class
// no-capacity: the market's ordinary answer, which it waits out) into a
// count and the latest, which status shows in one line.
type StockOuts struct {
	Count    int       `json:"count"`
	Last     time.Time `json:"last"`
	Offering string    `json:"offering"`
	Zone     string    `json:"zone"`
}

// AddStockOut counts a failure of class no-capacity on offering (a key
// provider/type/zone/market) into so; any other class leaves so as it is.
func AddStockOut(ctx workflow.Context, so *StockOuts, class, offering string) *StockOuts {
	if class != string(capacity.NoCapacity) {
		return so
	}
	next := StockOuts{Last: workflow.Now(ctx), Offering: offering}
	if so != nil {
		next.Count = so.Count
	}
	next.Count++
	next.Zone = zoneOf(offering)
	return &next
}

// zoneOf is the zone of an offering key (provider/type/zone/market).
func zoneOf(key string) string {
	if parts := strings.Split(key, "/"); len(parts) == 4 {
		return parts[2]
	}
	return ""
}

// String is the stock-outs in a line: "stock-outs: 18, last 18:27:34 in
// us-west-2a", the time in Last's location.
func (so StockOuts) String() string { return so.Line("") }

// Line is String with tz after the time, for details read in UTC.
func (so StockOuts) Line(tz string) string {
	where := so.Zone
	if where == "" {
		where = so.Offering
	}
	return "stock-outs: " + strconv.Itoa(so.Count) + ", last " + so.Last.Format(time.TimeOnly) + tz + " in " + where
}

// FoldStockOuts is status's failures without the stock-outs, and the
// stock-outs counted: so when the status has it, else those the failures
// list (a status recorded before stock-outs were counted).
func FoldStockOuts(fs []Failure, so *StockOuts) ([]Failure, *StockOuts) {
	var rest []Failure
	var listed *StockOuts
	for _, f := range fs {
		if f.Class != string(capacity.NoCapacity) {
			rest = append(rest, f)
			continue
		}
		n := 1
		if listed != nil {
			n = listed.Count + 1
		}
		listed = &StockOuts{Count: n, Last: f.Time, Offering: f.Offering, Zone: zoneOf(f.Offering)}
	}
	if so != nil {
		return rest, so
	}
	return rest, listed
}

// FailureDetails are the classified failures an Acquire error carries;
// an error without them counts as one failure of its type's class.
func FailureDetails(err error) []activities.FailureDetail {
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

// Permanent reports whether no offering can ever succeed.
func Permanent(details []activities.FailureDetail) bool {
	return capacity.Permanent(classes(details)...)
}

// CuredSoon reports whether some failure may pass within minutes (stock
// returning, an API calming down); prices move over hours.
func CuredSoon(details []activities.FailureDetail) bool {
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

// CannotAcquire is the error that ends a run none of whose offerings can
// ever be had: its type is the first failure's class.
func CannotAcquire(what string, details []activities.FailureDetail) error {
	return temporal.NewNonRetryableApplicationError(what+": "+DescribeFailures(details), string(details[0].Class), nil, details)
}

func DescribeFailures(details []activities.FailureDetail) string {
	parts := make([]string, len(details))
	for i, d := range details {
		parts[i] = string(d.Class) + " on " + d.Offering + ": " + d.Message
	}
	return strings.Join(parts, "; ")
}
