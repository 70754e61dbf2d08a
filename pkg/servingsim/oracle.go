package servingsim

import (
	"math"
	"time"

	"refuel/pkg/autoscale"
)

// Oracle knows the future: the demand of every second ahead and the
// start-up of every replica it will ask for, on whichever path the fleet
// gives it (warm pool, a machine from lower-priority work, cold). It is a
// greedy plan with hindsight, not an optimum:
//
//   - The k-th replica beyond those it has, on the k-th fastest path
//     there is (the warm pool's entries first), is asked for now if
//     Headroom times the demand, anywhere between now and the moment it
//     would serve plus one decision interval, needs it; so each serves
//     just before it is needed, and a replica needed later than a cold
//     start-up starts cold now rather than take a warm entry early.
//   - A replica is released when none of the demand within the start-up
//     that getting it back would pay needs it: keeping it idle for longer
//     costs more than starting one again (the ski-rental rule, with the
//     start-up known instead of guessed). Getting it back costs a warm
//     start where releasing it stops it into a short pool, and a cold one
//     where the pool is full (a warm entry taken is refilled cold). None
//     is released while one it asked for is starting.
//
// Headroom is the one thing it does not know: how many replicas above
// the demand (work over the trailing minute) keep requests within the
// SLO. The bench runs it at several and keeps the cheapest that meets the
// target: the best any forecaster could do with the same options.
type Oracle struct {
	Demand   *Demand
	Headroom float64
	Every    time.Duration
	Max      int
	fleet    *fleet
}

func (*Oracle) Observe(autoscale.Metrics) {}
func (*Oracle) Started(autoscale.Startup) {}

// Decide plans from the fleet Run showed it.
func (o *Oracle) Decide(now time.Time, fl autoscale.Fleet) autoscale.Decision {
	have := fl.Replicas()
	need := func(ahead time.Duration) int {
		return int(math.Ceil(o.Headroom*o.Demand.Peak(now, now.Add(ahead)) - 1e-9))
	}
	want := min(have, need(o.fleet.restart()+o.Every))
	if fl.Starting > 0 {
		// Each was asked for a need ahead, maybe beyond a faster path's
		// start-up; the fleet would release it before a serving one.
		want = have
	}
	// Demand needs at most its peak ahead: no replica beyond it.
	ceiling := min(o.Max, need(time.Duration(len(o.Demand.Replicas))*time.Second))
	o.fleet.paths = o.fleet.paths[:0]
	for k := 0; have+k < ceiling; k++ {
		if need(o.fleet.start(k)+o.Every) > have+k {
			path, _ := o.fleet.nextPath(k)
			o.fleet.paths = append(o.fleet.paths, path)
		}
	}
	if len(o.fleet.paths) > 0 {
		want = have + len(o.fleet.paths)
	}
	return autoscale.Decision{Replicas: want, Reason: "oracle"}
}

// Hindsight is the simplest forecaster, with its one parameter chosen in
// hindsight: it keeps Headroom times the highest demand of the last Hold
// (the demand a balancer measured, nothing ahead), so a replica idle for
// less than Hold is kept (ski rental). Run at several headrooms, the
// cheapest that meets the SLO target is the best a policy without
// foresight and with the same start-up paths reaches on a trace: what
// bounds a forecaster where the oracle, which knows the future, is out of
// reach.
type Hindsight struct {
	Demand   *Demand
	Headroom float64
	Hold     time.Duration
	Max      int
}

func (Hindsight) Observe(autoscale.Metrics) {}
func (Hindsight) Started(autoscale.Startup) {}

// Decide keeps Headroom times the recent peak.
func (h Hindsight) Decide(now time.Time, _ autoscale.Fleet) autoscale.Decision {
	n := int(math.Ceil(h.Headroom*h.Demand.Peak(now.Add(-h.Hold), now.Add(-time.Second)) - 1e-9))
	return autoscale.Decision{Replicas: min(max(1, n), h.Max), Reason: "hindsight"}
}
