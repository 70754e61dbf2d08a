package activities

import (
	"context"
	"fmt"
	"slices"

	"go.temporal.io/sdk/temporal"

	"refuel/pkg/policy"
	"refuel/pkg/spec"
)

// DecideMarketName is the local activity in which a run that chooses its
// market asks refuel's plans what to do. The plans are large (an outlook
// is tens of megabytes for a long run with much slack) and slow to solve,
// so they are solved here, in the worker's shared and bounded Plans,
// rather than in workflow code: the answer is recorded in the run's
// history, and a replay reads it instead of solving again.
const DecideMarketName = "DecideMarket"

// DecisionKind is the question a run asks.
type DecisionKind string

const (
	// DecideWaitForSpot: about to acquire with spot out of stock, wait
	// for spot rather than take on-demand? (policy.WaitForSpot)
	DecideWaitForSpot DecisionKind = "wait-for-spot"
	// DecideBackToSpot: training on on-demand, try spot now, and where?
	// (policy.Decider.TrySpot)
	DecideBackToSpot DecisionKind = "back-to-spot"
	// DecideTick: what to hold for the market's next tick. (policy.Decide)
	DecideTick DecisionKind = "tick"
)

// DecisionInput is the run and its market as the policy sees them.
type DecisionInput struct {
	Kind   DecisionKind  `json:"kind"`
	Tier   spec.Tier     `json:"tier,omitempty"`   // for DecideTick
	Policy policy.Name   `json:"policy,omitempty"` // for DecideTick
	State  policy.State  `json:"state"`
	Market policy.Market `json:"market"`
	// NotFirst, for DecideWaitForSpot, names zones of Market not to try
	// first: those of the zone that just preempted the run, tried last.
	NotFirst []string `json:"not_first,omitempty"`
	// Gang, for DecideTick, is what an elastic gang knows beyond Market.
	Gang *policy.Gang `json:"gang,omitempty"`
}

// Decision is the policy's answer: Wait for DecideWaitForSpot, with
// Choice where to try first while waiting (policy.SpotToTryFirst; none
// when refuel would not start on spot); Choice for the others, with Try
// saying whether DecideBackToSpot found a zone worth trying now.
type Decision struct {
	Wait   bool          `json:"wait,omitempty"`
	Try    bool          `json:"try,omitempty"`
	Choice policy.Choice `json:"choice"`
	// Explanation says why, in a line a person reads (status.market.why).
	Explanation string `json:"explanation,omitempty"`
}

// DecideMarket answers a run's question with the worker's plans (a
// Decider of its own when the worker keeps none).
func (a *Capacity) DecideMarket(_ context.Context, in DecisionInput) (Decision, error) {
	d := new(policy.Decider)
	if a.Plans != nil {
		d = a.Plans.Decider()
	}
	switch in.Kind {
	case DecideWaitForSpot:
		wait := d.WaitForSpot(in.State, in.Market)
		out := Decision{Wait: wait, Explanation: policy.ExplainWaitForSpot(in.State, in.Market, wait)}
		if wait {
			m := in.Market
			m.Zones = slices.DeleteFunc(slices.Clone(m.Zones), func(z policy.Zone) bool { return slices.Contains(in.NotFirst, z.Name) })
			if first, ok := d.SpotToTryFirst(in.State, m); ok {
				out.Choice = first
			}
		}
		return out, nil
	case DecideBackToSpot:
		c, try := d.TrySpot(in.State, in.Market)
		return Decision{Choice: c, Try: try, Explanation: policy.ExplainBackToSpot(in.State, in.Market, c, try)}, nil
	case DecideTick:
		var g policy.Gang
		if in.Gang != nil {
			g = *in.Gang
		}
		c, err := d.DecideGang(in.Tier, in.Policy, in.State, in.Market, g)
		if err != nil {
			return Decision{}, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidJobSpec", nil)
		}
		return Decision{Choice: c, Explanation: policy.Explain(in.Tier, in.Policy, in.State, in.Market, c)}, nil
	}
	return Decision{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("unknown decision kind %q", in.Kind), "BadRequest", nil)
}
