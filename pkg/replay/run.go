package replay

import (
	"fmt"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/policy"
	"refuel/pkg/spec"
)

// Decider chooses what a replayed run holds during tick t (counted from
// the run's start), as a policy would at that tick boundary.
type Decider interface {
	Decide(t int, s policy.State, m policy.Market) (policy.Choice, error)
}

// Online decides with a policy of pkg/policy, from the past alone. Give
// each run its own: it remembers what the policy solved for that run.
type Online struct {
	Tier    spec.Tier
	Policy  policy.Name
	decider policy.Decider
}

// NewOnline returns a decider for one run of the named policy.
func NewOnline(tier spec.Tier, name policy.Name) *Online {
	return &Online{Tier: tier, Policy: name}
}

// Decide implements Decider.
func (o *Online) Decide(_ int, s policy.State, m policy.Market) (policy.Choice, error) {
	return o.decider.Decide(o.Tier, o.Policy, s, m)
}

// Plan is a choice per tick from the start, made in advance (by Optimal);
// past its end it holds nothing.
type Plan []policy.Choice

// Decide implements Decider.
func (p Plan) Decide(t int, _ policy.State, _ policy.Market) (policy.Choice, error) {
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
	Spot        time.Duration // time held on spot, overheads included
	OnDemand    time.Duration // time held on on-demand, overheads included
	Preemptions int
	// Changeovers counts moves from one held instance straight to another
	// (market or zone changed); Starts counts every start that paid the
	// restart overhead: the first, after a preemption or pause, and each
	// changeover.
	Changeovers int
	Starts      int
	Steps       []Step
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
// market spot is out of stock. The replay stops when the work is done; or,
// unfinished, past the end of the market when a run that may not use
// on-demand holds nothing, or when a run has gone twice its work past it.
func Run(m *Market, job Job, start int, d Decider) (Result, error) {
	if err := job.Validate(); err != nil {
		return Result{}, err
	}
	if start < 0 || start >= m.ticks {
		return Result{}, &MarketError{Problem: fmt.Sprintf("start tick %d is outside the traces' %d ticks", start, m.ticks), Fix: "start within the traces"}
	}
	g, o := m.Gap, job.RestartOverhead
	history := make([]policy.Availability, len(m.Zones))
	view := policy.Market{Step: g, OnDemandPrice: job.OnDemandPrice, Zones: make([]policy.Zone, len(m.Zones))}
	see := func(tick int) {
		for z := range view.Zones {
			view.Zones[z] = policy.Zone{Name: m.Zones[z], SpotAvailable: m.Available(z, tick), SpotPrice: job.SpotPrice, History: history[z]}
		}
	}
	observe := func(tick int) {
		view.Roaming.Observe(view.Zones, g)
		for z := range history {
			history[z].Observe(m.Available(z, tick), g)
		}
	}
	for i := range start {
		see(i)
		observe(i)
	}
	giveUp := m.ticks + 2*m.ticksIn(job.Work+o)

	res := Result{Start: start}
	var (
		cur          policy.Choice
		curZone      = -1
		done         time.Duration
		overheadLeft time.Duration
	)
	cost := func() float64 { return res.Spot.Hours()*job.SpotPrice + res.OnDemand.Hours()*job.OnDemandPrice }
	for t := 0; ; t++ {
		tick := start + t
		elapsed := time.Duration(t) * g
		step := Step{}
		if cur.Market == capacity.Spot && !m.Available(curZone, tick) {
			res.Preemptions++
			step.Preempted = true
			cur, curZone, overheadLeft = policy.None, -1, 0
		}
		see(tick)
		s := policy.State{
			Elapsed: elapsed, TimeLeft: job.Deadline - elapsed,
			Done: done, Remaining: job.Work - done,
			RestartOverhead: o, OverheadLeft: overheadLeft,
			Current: cur,
		}
		c, err := d.Decide(t, s, view)
		if err != nil {
			return res, err
		}
		zone, err := m.resolve(c, cur, tick)
		if err != nil {
			return res, &ChoiceError{Tick: t, Choice: c, Reason: err.Error()}
		}
		if zone >= 0 {
			c.Zone = m.Zones[zone]
		}
		observe(tick)
		step.Choice = c
		if !c.Holds() {
			cur, curZone, overheadLeft = policy.None, -1, 0
			step.Done, step.Cost = done, cost()
			res.Steps = append(res.Steps, step)
			if (tick >= m.ticks && !job.Tier.AllowsOnDemand()) || tick >= giveUp {
				res.Finish = elapsed + g
				break
			}
			continue
		}
		if c != cur {
			if cur.Holds() {
				res.Changeovers++
			}
			res.Starts++
			overheadLeft = o
		}
		cur, curZone = c, zone
		held := g
		finished := false
		if overheadLeft >= g {
			overheadLeft -= g
		} else {
			work := g - overheadLeft
			if done+work >= job.Work {
				held = overheadLeft + job.Work - done
				done, finished = job.Work, true
			} else {
				done += work
			}
			overheadLeft = 0
		}
		if c.Market == capacity.Spot {
			res.Spot += held
		} else {
			res.OnDemand += held
		}
		step.Done, step.Cost = done, cost()
		res.Steps = append(res.Steps, step)
		if finished {
			res.Finish, res.Finished = elapsed+held, true
			break
		}
		if tick >= giveUp {
			res.Finish = elapsed + g
			break
		}
	}
	res.Cost = cost()
	res.DeadlineMet = res.Finished && res.Finish <= job.Deadline
	return res, nil
}

// resolve checks a choice against the model and returns its zone index:
// -1 for none; on-demand without a zone stays in the current zone, or
// takes the first.
func (m *Market) resolve(c, cur policy.Choice, tick int) (int, error) {
	switch c.Market {
	case "":
		return -1, nil
	case capacity.OnDemand:
		if c.Zone == "" {
			if z := m.zoneIndex(cur.Zone); z >= 0 {
				return z, nil
			}
			return 0, nil
		}
	case capacity.Spot:
	default:
		return 0, fmt.Errorf("is on market %q, which the replay does not have", c.Market)
	}
	z := m.zoneIndex(c.Zone)
	if z < 0 {
		return 0, fmt.Errorf("names zone %q, which is not one of the traces", c.Zone)
	}
	if c.Market == capacity.Spot && !m.Available(z, tick) {
		return 0, fmt.Errorf("takes spot out of stock")
	}
	return z, nil
}

func (m *Market) zoneIndex(name string) int {
	for i, z := range m.Zones {
		if z == name {
			return i
		}
	}
	return -1
}
