package servingsim

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"refuel/pkg/autoscale"
	"refuel/pkg/traffic"
)

// Config is the simulated service.
type Config struct {
	Model   Model
	Startup Startup
	// Warm is how a prepared instance from the warm pool starts: Provision
	// is resuming it, Load is loading the model from its own disk.
	Warm Startup
	// Every is how often the fleet reports metrics and the policy decides.
	Every time.Duration
	// PricePerHour is paid per replica from the moment it is requested
	// until it is released, and while a warm-pool instance is prepared.
	PricePerHour float64
	// WarmPricePerHour is paid per prepared instance waiting in the warm
	// pool: it is stopped, so only its disk is paid.
	WarmPricePerHour float64
	// Seed draws the start-up times; the n-th replica requested takes the
	// same time under every policy, so policies meet the same clouds.
	Seed uint64
	// Timeline keeps a Sample per decision in the Result.
	Timeline bool
}

// Result is what one policy achieved on one trace.
type Result struct {
	// Attainment is the share of seconds in which the ready replicas
	// were at least the demand.
	Attainment   float64 `json:"slo_attainment"`
	ReplicaHours float64 `json:"replica_hours"`
	WarmHours    float64 `json:"warm_hours"`
	CostUSD      float64 `json:"cost_usd"`
	MeanReady    float64 `json:"mean_ready"`
	PeakReplicas int     `json:"peak_replicas"`
	// Requested counts replicas asked for after the start.
	Requested int `json:"replicas_requested"`
	// P99Wait is the 99th percentile of the time requests waited in the
	// queue before a replica took them up, in seconds.
	P99Wait float64 `json:"p99_wait_seconds"`
	// Timeline is the run decision by decision, when Config.Timeline.
	Timeline []Sample `json:"-"`
}

// Sample is one interval between decisions, and the decision ending it.
type Sample struct {
	// At is the decision's time, from the start of the trace.
	At time.Duration
	// Demand is the highest demand of the interval; Ready the fewest
	// replicas serving in it, and Missed its seconds with fewer serving
	// than demand.
	Demand float64
	Ready  int
	Missed int
	// Metrics is what the fleet reported, and Decision what the policy
	// made of it.
	Metrics  autoscale.Metrics
	Decision autoscale.Decision
}

// tick is the virtual clock's step.
const tick = time.Second

// Run replays tr against policy p. The service starts with initial
// replicas serving, as if it had been running before the trace began.
func Run(tr *traffic.Trace, demand *Demand, p autoscale.Policy, initial int, c Config) Result {
	f := &fleet{c: c, policy: p, demand: demand, sample: Sample{Ready: math.MaxInt},
		cold: rand.New(rand.NewPCG(c.Seed, 0x636f6c64)), warm: rand.New(rand.NewPCG(c.Seed, 0x7761726d))}
	for range initial {
		f.ready = append(f.ready, &replica{})
	}
	ticks := int((tr.Span + tick - 1) / tick)
	next := 0 // the next request of tr to arrive
	for i := range ticks {
		now := time.Duration(i) * tick
		f.progress(now)
		for ; next < len(tr.Requests) && tr.Requests[next].At < now+tick; next++ {
			f.queue = append(f.queue, &job{arrived: tr.Requests[next].At, left: c.Model.Work(tr.Requests[next]).Seconds()})
			f.arrivals++
		}
		f.serve(now)
		if (i+1)%int(c.Every/tick) == 0 {
			f.decide(now + tick)
		}
	}
	return f.result(time.Duration(ticks) * tick)
}

// replica is a replica or a warm-pool instance.
type replica struct {
	// since is when the current payment started: the request, or the
	// stop into the warm pool.
	since   time.Duration
	ready   time.Duration // serving, or for the warm pool prepared
	startup autoscale.Startup
}

type job struct {
	arrived time.Duration
	left    float64 // replica-seconds of work still to do
	started bool
}

// fleet is one run's replicas, queue and tally.
type fleet struct {
	c          Config
	policy     autoscale.Policy
	demand     *Demand
	cold, warm *rand.Rand

	ready, starting []*replica
	preparing, pool []*replica // the warm pool
	paid, warmPaid  time.Duration
	queue           []*job

	waits             []float64
	served, readySecs int // seconds: SLO met, and replica-seconds ready
	requested, peak   int
	// Since the last report.
	arrivals     int
	busy, offers float64
	sample       Sample
	timeline     []Sample
}

// progress moves instances whose start-up or preparation is over.
func (f *fleet) progress(now time.Duration) {
	for len(f.preparing) > 0 && f.preparing[0].ready <= now {
		r := f.preparing[0]
		f.preparing = f.preparing[1:]
		f.paid += r.ready - r.since
		r.since = r.ready
		f.pool = append(f.pool, r)
	}
	for len(f.starting) > 0 && f.starting[0].ready <= now {
		r := f.starting[0]
		f.starting = f.starting[1:]
		f.ready = append(f.ready, r)
		f.policy.Started(r.startup)
	}
}

// serve lets the ready replicas work through the queue for one tick, in
// arrival order, each request at most one replica's worth per second,
// and scores the tick against demand.
func (f *fleet) serve(now time.Duration) {
	budget := float64(len(f.ready)) * tick.Seconds()
	f.offers += budget
	for _, j := range f.queue {
		if budget <= 0 {
			break
		}
		if !j.started {
			j.started = true
			f.waits = append(f.waits, max(0, now-j.arrived).Seconds())
		}
		g := min(j.left, tick.Seconds(), budget)
		j.left -= g
		budget -= g
		f.busy += g
	}
	f.queue = slices.DeleteFunc(f.queue, func(j *job) bool { return j.left <= 1e-12 })
	f.readySecs += len(f.ready)
	d := f.demand.At(f.demand.Start.Add(now))
	if float64(len(f.ready)) >= d-1e-9 {
		f.served++
	} else {
		f.sample.Missed++
	}
	f.sample.Demand = max(f.sample.Demand, d)
	f.sample.Ready = min(f.sample.Ready, len(f.ready))
	f.peak = max(f.peak, len(f.ready)+len(f.starting))
}

// decide reports metrics to the policy and carries out its decision.
func (f *fleet) decide(at time.Duration) {
	waiting := 0
	for _, j := range f.queue {
		if !j.started {
			waiting++
		}
	}
	clock := f.demand.Start.Add(at)
	m := autoscale.Metrics{At: clock, QPS: float64(f.arrivals) / f.c.Every.Seconds(), QueueLength: float64(waiting), Replicas: len(f.ready)}
	if f.offers > 0 {
		m.GPUUtilization = f.busy / f.offers
	}
	f.arrivals, f.busy, f.offers = 0, 0, 0
	f.policy.Observe(m)
	d := f.policy.Decide(clock, autoscale.Fleet{Ready: len(f.ready), Starting: len(f.starting), Warm: len(f.pool)})
	if f.c.Timeline {
		f.sample.At, f.sample.Metrics, f.sample.Decision = at, m, d
		f.timeline = append(f.timeline, f.sample)
	}
	f.sample = Sample{Ready: math.MaxInt}
	f.scale(d.Replicas, d.Warm, at)
	f.keepWarm(d.Warm, at)
}

// scale requests replicas, from the warm pool while it has any, or
// releases them: first those furthest from serving, then serving ones,
// which are stopped into the warm pool while it is short.
func (f *fleet) scale(want, warm int, at time.Duration) {
	for len(f.ready)+len(f.starting) < want {
		r := &replica{since: at}
		if n := len(f.pool); n > 0 {
			f.warmPaid += at - f.pool[n-1].since
			f.pool = f.pool[:n-1]
			r.startup = draw(f.c.Warm, f.warm)
			r.startup.Warm = true
		} else {
			r.startup = draw(f.c.Startup, f.cold)
		}
		r.ready = at + r.startup.Total()
		f.starting = append(f.starting, r)
		f.requested++
	}
	slices.SortStableFunc(f.starting, byReady)
	for len(f.ready)+len(f.starting) > want && len(f.starting) > 0 {
		f.paid += at - f.starting[len(f.starting)-1].since
		f.starting = f.starting[:len(f.starting)-1]
	}
	for len(f.ready) > want {
		f.paid += at - f.ready[len(f.ready)-1].since
		f.ready = f.ready[:len(f.ready)-1]
		if len(f.pool)+len(f.preparing) < warm {
			f.pool = append(f.pool, &replica{since: at})
		}
	}
}

// keepWarm prepares or drops warm-pool instances to hold n.
func (f *fleet) keepWarm(n int, at time.Duration) {
	for len(f.pool)+len(f.preparing) < n {
		s := draw(f.c.Startup, f.cold)
		f.preparing = append(f.preparing, &replica{since: at, ready: at + s.Provision + s.Init})
	}
	for len(f.preparing) > 0 && len(f.pool)+len(f.preparing) > n {
		f.paid += at - f.preparing[len(f.preparing)-1].since
		f.preparing = f.preparing[:len(f.preparing)-1]
	}
	for len(f.pool) > n {
		f.warmPaid += at - f.pool[len(f.pool)-1].since
		f.pool = f.pool[:len(f.pool)-1]
	}
	slices.SortStableFunc(f.preparing, byReady)
}

func (f *fleet) result(end time.Duration) Result {
	for _, r := range slices.Concat(f.ready, f.starting, f.preparing) {
		f.paid += end - r.since
	}
	for _, r := range f.pool {
		f.warmPaid += end - r.since
	}
	ticks := float64(end / tick)
	r := Result{
		Attainment:   float64(f.served) / ticks,
		ReplicaHours: f.paid.Hours(),
		WarmHours:    f.warmPaid.Hours(),
		MeanReady:    float64(f.readySecs) / ticks,
		PeakReplicas: f.peak,
		Requested:    f.requested,
		P99Wait:      percentile(f.waits, 0.99),
		Timeline:     f.timeline,
	}
	r.CostUSD = r.ReplicaHours*f.c.PricePerHour + r.WarmHours*f.c.WarmPricePerHour
	return r
}

func draw(s Startup, rng *rand.Rand) autoscale.Startup {
	return autoscale.Startup{Provision: s.Provision.draw(rng), Init: s.Init.draw(rng), Load: s.Load.draw(rng)}
}

func byReady(a, b *replica) int { return cmp.Compare(a.ready, b.ready) }

func percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}
