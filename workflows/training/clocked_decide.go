package training

// A clocked run's decision at each tick of its market: the policy's
// choice, tried as the product acquires it, and refuel's probes.

import (
	"fmt"
	"slices"
	"strconv"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/policy"
	"refuel/pkg/replay"
	"refuel/pkg/spec"
	"refuel/workflows/workload"
)

// decide is the policy's choice at the tick just seen, held on the
// meter's account; a paused run, or one over its budget, holds nothing.
func (m *clockedMarket) decide(ctx workflow.Context) error {
	r := m.r
	t := m.seen
	m.seen = nil
	choice := policy.None
	if r.MustStop(ctx, workload.StopYield) == workload.GoOn { // no pool: no yield
		var err error
		choice, err = m.choose(ctx, t)
		// A run that learns by trying is refused spot out of stock, for
		// nothing, and decides again on what the refusal showed (the
		// tick's market shares the meter's zones).
		for tries := 0; err == nil && tries < 2*len(m.zones) && m.meter.Try(choice); tries++ {
			choice, err = m.choose(ctx, t)
		}
		if err != nil {
			return err
		}
		m.probe(t, choice)
	} else {
		m.why = "nothing: the run is paused or over its budget"
	}
	step, err := m.meter.Hold(choice)
	if err != nil {
		return fmt.Errorf("policy %s at tick %d: %w", m.policy, m.tick, err)
	}
	m.tick++
	m.decided = &step.Choice
	return nil
}

// probe makes refuel's probes of the tick (policy.Probes) for a run that
// learns by trying: each tries spot in a zone as an acquisition would,
// answered by the market's stock at the tick (what the simulated cloud's
// acquisition answers) and billed on the run's account as the simulator
// bills it.
func (m *clockedMarket) probe(t *seenTick, held policy.Choice) {
	if m.policy != policy.Refuel || !m.job.LearnsByTrying {
		return
	}
	for _, name := range policy.Probes(t.state, t.market, held) {
		m.meter.Probe(slices.Index(m.zones, name), replay.ProbeBilled)
	}
}

// choose is the policy's choice on the tick t, with its explanation kept
// in m.why.
func (m *clockedMarket) choose(ctx workflow.Context, t *seenTick) (policy.Choice, error) {
	r := m.r
	// Only refuel's decisions solve plans; the other policies' are quick,
	// and decided here cost no event in the history.
	if m.policy != policy.Refuel || r.spec.Tier != spec.TierDeadline || !askPlans(ctx) {
		choice, err := m.decider.DecideGang(r.spec.Tier, m.policy, t.state, t.market, m.meter.Gang())
		if err != nil {
			return policy.None, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidJobSpec", nil)
		}
		m.why = policy.Explain(r.spec.Tier, m.policy, t.state, t.market, choice)
		return choice, nil
	}
	in := activities.DecisionInput{Kind: activities.DecideTick, Tier: r.spec.Tier, Policy: m.policy, State: t.state, Market: t.market}
	if g := m.meter.Gang(); g.Elastic() {
		in.Gang = &g
	}
	d, err := decide(ctx, in, "decide what to hold at tick "+strconv.Itoa(m.tick))
	if workload.FailedOn(err, "InvalidJobSpec") {
		return policy.None, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidJobSpec", nil)
	}
	if err != nil {
		return policy.None, fmt.Errorf("policy %s at tick %d: %w", m.policy, m.tick, err)
	}
	m.why = d.Explanation
	return d.Choice, nil
}
