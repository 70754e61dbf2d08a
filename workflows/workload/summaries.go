package workload

import (
	"strconv"
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/pkg/capacity"
)

// The Web UI shows a one-line summary beside each activity and timer of
// a workflow's history: these make a run's history read as its story.

// Titled gives the activities scheduled on ctx a summary.
func Titled(ctx workflow.Context, summary string) workflow.Context {
	o := workflow.GetActivityOptions(ctx)
	o.Summary = summary
	return workflow.WithActivityOptions(ctx, o)
}

// WaitFor waits up to d for cond, its timer summarised.
func WaitFor(ctx workflow.Context, d time.Duration, summary string, cond func() bool) (bool, error) {
	return workflow.AwaitWithOptions(ctx, workflow.AwaitOptions{Timeout: d, TimerOptions: workflow.TimerOptions{Summary: summary}}, cond)
}

// Timer is a summarised timer.
func Timer(ctx workflow.Context, d time.Duration, summary string) workflow.Future {
	return workflow.NewTimerWithOptions(ctx, d, workflow.TimerOptions{Summary: summary})
}

// OfferingName is an offering as a person reads it: spot gpu.1x in local-a.
func OfferingName(o capacity.Offering) string {
	return string(o.Market) + " " + o.InstanceType + " in " + o.Zone
}

// OfferingPlace is an offering with its cloud first, as the Web UI's
// current details name where work runs: gce spot a3-highgpu-1g in
// us-central1-a. Current details are workflow metadata, not commands, so
// they may say more than the activities' summaries (OfferingName), which
// recorded histories keep.
func OfferingPlace(o capacity.Offering) string {
	if o.Provider == "" {
		return OfferingName(o)
	}
	return o.Provider + " " + OfferingName(o)
}

// acquireSummary is an acquisition's: the first offering, and how many
// follow it.
func acquireSummary(attempt int, offerings []capacity.Offering) string {
	s := "acquire (attempt " + strconv.Itoa(attempt) + ")"
	if len(offerings) > 0 {
		s += ": " + OfferingName(offerings[0])
	}
	if n := len(offerings) - 1; n > 0 {
		s += ", then " + strconv.Itoa(n) + " more"
	}
	return s
}

// Dollars is an amount of USD to the cent, or to the tenth of a cent
// below a dollar. (Not "$": the Web UI's markdown takes a pair of them
// for a formula.)
func Dollars(usd float64) string {
	digits := 2
	if usd < 1 {
		digits = 3
	}
	return strconv.FormatFloat(usd, 'f', digits, 64) + " USD"
}
