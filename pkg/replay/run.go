package replay

import (
	"fmt"
	"slices"
	"time"

	"refuel/pkg/policy"
	"refuel/pkg/spec"
)

// Decider chooses what a replayed run holds during tick t (counted from
// the run's start), as a policy would at that tick boundary; g is what an
// elastic gang knows beyond m, the zero Gang for a rigid one.
type Decider interface {
	Decide(t int, s policy.State, m policy.Market, g policy.Gang) (policy.Choice, error)
}

// Online decides with a policy of pkg/policy, from the past alone. Give
// each run its own: it remembers what the policy solved for that run.
type Online struct {
	Tier    spec.Tier
	Policy  policy.Name
	decider policy.Decider
	// nextProbe is, per zone, the tick of SkyNomad's next probe there;
	// -1 once one was taken.
	nextProbe []int
}

// NewOnline returns a decider for one run of the named policy.
func NewOnline(tier spec.Tier, name policy.Name) *Online {
	return &Online{Tier: tier, Policy: name}
}

// Decide implements Decider.
func (o *Online) Decide(_ int, s policy.State, m policy.Market, g policy.Gang) (policy.Choice, error) {
	return o.decider.DecideGang(o.Tier, o.Policy, s, m, g)
}

// Prober is a decider that also learns stock by trying spot in zones it
// does not hold (try bills what a taken try costs; see Meter.Probe), after
// choosing held for tick t.
type Prober interface {
	Probe(t int, s policy.State, held policy.Choice, m policy.Market, learns bool, try func(zone int) bool)
}

// SkyNomad's probes, as its authors' released code makes them: each zone
// but the one held is tried every hour until a try is taken, then never
// again.
const skyNomadProbeEvery = time.Hour

// ProbeBilled is what a taken try is billed, SkyNomad's or refuel's, in
// the simulator and on a market clock alike: a minute of spot, the least
// EC2 and Compute Engine bill an instance for.
const ProbeBilled = time.Minute

// Probe implements Prober: SkyNomad pays for its probes, and refuel for
// its own (policy.Probes) where the run learns stock by trying (learns).
// The baselines learn stock only from the acquisitions they make, and a
// run that may not hold spot (tier critical) makes none.
func (o *Online) Probe(t int, s policy.State, held policy.Choice, m policy.Market, learns bool, try func(zone int) bool) {
	if !o.Tier.AllowsSpot() {
		return
	}
	if o.Policy == policy.Refuel && learns {
		for _, name := range policy.Probes(s, m, held) {
			try(slices.IndexFunc(m.Zones, func(z policy.Zone) bool { return z.Name == name }))
		}
		return
	}
	if o.Policy != policy.SkyNomad {
		return
	}
	if o.nextProbe == nil {
		o.nextProbe = make([]int, len(m.Zones))
	}
	every := int((skyNomadProbeEvery + m.Step - 1) / m.Step)
	for z, zone := range m.Zones {
		if held.Holds() && zone.Name == held.Zone || o.nextProbe[z] < 0 || t < o.nextProbe[z] {
			continue
		}
		o.nextProbe[z] = t + every
		if try(z) {
			o.nextProbe[z] = -1
		}
	}
}

// Plan is a choice per tick from the start, made in advance (by Optimal);
// past its end it holds nothing.
type Plan []policy.Choice

// Decide implements Decider.
func (p Plan) Decide(t int, _ policy.State, _ policy.Market, _ policy.Gang) (policy.Choice, error) {
	if t >= len(p) {
		return policy.None, nil
	}
	return p[t], nil
}

// Step is one tick of a replayed run.
type Step struct {
	Choice    policy.Choice
	Preempted bool          // spot held into this tick was lost at its start
	Done      time.Duration // work done at the end of the tick
	Cost      float64       // spent by the end of the tick
}

// Result is how a replayed run went.
type Result struct {
	Start       int           // tick of the market the run started at
	Cost        float64       // USD
	Finish      time.Duration // from start to the end of the work, or to where the replay stopped
	Finished    bool
	DeadlineMet bool
	Spot        time.Duration // time held on spot, overheads included (a gang's nodes at once)
	Shrunk      time.Duration // of Spot, the time an elastic gang held fewer than all its nodes
	OnDemand    time.Duration // time held on on-demand, overheads included
	Preemptions int
	// Changeovers counts moves from one held instance straight to another
	// (market or zone changed); Starts counts every start that paid the
	// restart overhead: the first, after a preemption or pause, and each
	// changeover.
	Changeovers int
	Starts      int
	// Transfers counts starts that moved the checkpoint to another
	// region, and EgressUSD what they cost (included in Cost).
	Transfers int
	EgressUSD float64
	// CloudMoves counts the Transfers that moved the checkpoint to
	// another cloud.
	CloudMoves int
	// ProbeUSD is what trying spot to learn a zone's stock cost
	// (included in Cost): see Job.ProbeTime.
	ProbeUSD float64
	// Probes counts the probes that had the stock and were billed.
	Probes int
	Steps  []Step
}

// ChoiceError is a decider's choice the model does not allow.
type ChoiceError struct {
	Tick   int
	Choice policy.Choice
	Reason string
}

func (e *ChoiceError) Error() string {
	return fmt.Sprintf("tick %d: choice %s %s", e.Tick, e.Choice, e.Reason)
}

// Run replays a job started at tick start of m, deciding with d. Before
// its start the run's market history is the market's own past, as a
// scheduler watching the pools would have seen it. Past the end of the
// market spot is out of stock. A job of several nodes sees how many of
// its nodes are in stock (Market.CountsAt): a rigid gang has spot only
// where all of them are. The replay stops when the work is done; or,
// unfinished, past the end of the market when a run that may not use
// on-demand holds nothing, or when a run has gone twice its work past it.
func Run(m *Market, job Job, start int, d Decider) (Result, error) {
	if err := job.Validate(); err != nil {
		return Result{}, err
	}
	if start < 0 || start >= m.ticks {
		return Result{}, &MarketError{Problem: fmt.Sprintf("start tick %d is outside the traces' %d ticks", start, m.ticks), Fix: "start within the traces"}
	}
	if _, ok := d.(Plan); ok {
		job.LearnsByTrying = false // the optimum knows the whole market
	}
	meter, err := NewMeter(job, m.Zones, m.Gap)
	if err != nil {
		return Result{}, err
	}
	for i := range start {
		if err := meter.WitnessCounts(m.CountsAt(i, job.nodes())); err != nil {
			return Result{}, err
		}
	}
	giveUp := m.ticks + 2*m.ticksIn(job.Work+job.RestartOverhead)
	for t := 0; ; t++ {
		tick := start + t
		s, view, _, err := meter.BeginCounts(m.CountsAt(tick, job.nodes()))
		if err != nil {
			return meter.Result(), err
		}
		c, err := d.Decide(t, s, view, meter.Gang())
		// A run that learns by trying decides again on what its tries
		// showed (Meter.Try; view shares the meter's zones), at most twice
		// per zone: a refusal, and a probe before it lets go to wait.
		for tries := 0; err == nil && tries < 2*len(m.Zones) && meter.Try(c); tries++ {
			c, err = d.Decide(t, s, view, meter.Gang())
		}
		if err != nil {
			return meter.Result(), err
		}
		if p, ok := d.(Prober); ok {
			p.Probe(t, s, c, view, job.LearnsByTrying, func(z int) bool { return meter.Probe(z, ProbeBilled) })
		}
		step, err := meter.Hold(c)
		if err != nil {
			return meter.Result(), err
		}
		if meter.Finished() || tick >= giveUp || (!step.Choice.Holds() && tick >= m.ticks && !job.Tier.AllowsOnDemand()) {
			break
		}
	}
	res := meter.Result()
	res.Start = start
	return res, nil
}

// CountsAt is how many of a gang of nodes spot has in stock during tick
// i, one entry per zone (see Count).
func (m *Market) CountsAt(i, nodes int) []int {
	out := make([]int, len(m.Zones))
	for z := range out {
		out[z] = m.Count(z, i, nodes)
	}
	return out
}

func (m *Market) zoneIndex(name string) int {
	for i, z := range m.Zones {
		if z == name {
			return i
		}
	}
	return -1
}
