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
	"refuel/pkg/capacity"
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
		if err := m.probe(ctx, t, choice); err != nil {
			return err
		}
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
// learns by trying: each tries spot in a zone as the run acquires it,
// through its provider (acquiresProbesVersion), for the gang's nodes, and
// lets go at once; what it had is what the run knows of the zone for the
// rest of the tick, and a probe that had them all is billed on the run's
// account as the simulator bills it. Runs recorded before that version
// answered their probes from the market's stock at the tick.
func (m *clockedMarket) probe(ctx workflow.Context, t *seenTick, held policy.Choice) error {
	if m.policy != policy.Refuel || !m.job.LearnsByTrying {
		return nil
	}
	names := policy.Probes(t.state, t.market, held)
	if !m.acquiresProbes {
		for _, name := range names {
			m.meter.Probe(slices.Index(m.zones, name), replay.ProbeBilled)
		}
		return nil
	}
	var zones []int
	in := activities.ProbeInput{Nodes: m.nodes, Name: "p" + strconv.Itoa(m.tick)}
	for _, name := range names {
		z := slices.Index(m.zones, name)
		if z < 0 || m.spot[z] == nil {
			continue
		}
		zones = append(zones, z)
		in.Probes = append(in.Probes, *m.spot[z])
	}
	if len(zones) == 0 {
		return nil
	}
	r := m.r
	who := r.Owner()
	ask := r.AskFor(nil)
	in.Request = capacity.Request{RunID: who.WorkflowID, Identity: who.Identity, Tags: ask.Tags(), MaxPricePerHour: ask.MaxPrice}
	var res activities.ProbeResult
	actx := workload.Titled(workload.ProbeOptions(ctx), fmt.Sprintf("probe spot in %d zone(s) at tick %d", len(zones), m.tick))
	if err := workflow.ExecuteActivity(actx, activities.ProbeSpotName, in).Get(ctx, &res); err != nil {
		return fmt.Errorf("probes at tick %d: %w", m.tick, err)
	}
	for i, z := range zones {
		if i < len(res.Taken) {
			m.meter.Probed(z, res.Taken[i], replay.ProbeBilled)
		}
	}
	return nil
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
