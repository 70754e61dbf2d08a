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

// Config is the simulated service and the clouds its replicas come from.
// Every policy runs in the same Config: the same start-up paths at the
// same prices.
type Config struct {
	Model Model
	// Startup is a cold start: an instance requested, provisioned,
	// initialised, the model loaded.
	Startup Startup
	// Warm is a start from the warm pool. A stopped entry (the default)
	// resumes in Provision and loads the model from its own disk in Load;
	// a running one (WarmRunning) only loads.
	Warm Startup
	// WarmPool is how many entries the fleet keeps in the warm pool, for
	// every policy: the spec's warm_pool. Scaling out takes from it first;
	// a replica released while it is short is stopped into it, else a new
	// entry is prepared (a cold start at full price, then stopped).
	WarmPool int
	// WarmRunning prices the warm pool as a provider that cannot stop an
	// instance has it: each entry running at PricePerHour.
	WarmRunning bool
	// Borrowable is how many machines lower-priority work in the service's
	// pool holds that the service may take; Borrow is how one starts (the
	// work's checkpoint and yield as Provision, then Init and Load). A
	// borrowed machine is paid at PricePerHour while the service holds it
	// and goes back when released.
	Borrowable int
	Borrow     Startup
	// MaxConcurrency is the requests one ready replica serves at once;
	// SLOLatency is the time to the first token within which a request is
	// met; a request waiting for a slot longer than QueueTimeout fails.
	MaxConcurrency int
	SLOLatency     time.Duration
	QueueTimeout   time.Duration
	// Every is how often the fleet reports metrics and the policy decides.
	Every time.Duration
	// PricePerHour is paid per replica from the moment it is requested
	// until it is released, while a warm-pool entry is prepared, and for
	// a running warm-pool entry.
	PricePerHour float64
	// WarmPricePerHour is paid per stopped warm-pool entry: its volume.
	WarmPricePerHour float64
	// Seed draws the start-up times; the n-th replica started on a path
	// takes the same time under every policy, so policies meet the same
	// clouds.
	Seed uint64
	// Timeline keeps a Sample per decision in the Result.
	Timeline bool
}

// Result is what one policy achieved on one trace.
type Result struct {
	// Attainment is the share of requests answered within the SLO
	// latency; Failed counts those that waited past the queue timeout.
	Attainment float64 `json:"slo_attainment"`
	Failed     int     `json:"failed"`
	// P99Latency is the 99th percentile time to the first token, in
	// seconds; a failed request counts as the queue timeout.
	P99Latency float64 `json:"p99_latency_seconds"`
	// P99Wait is the 99th percentile of answered requests' waits for a
	// slot, in seconds.
	P99Wait      float64 `json:"p99_wait_seconds"`
	ReplicaHours float64 `json:"replica_hours"`
	// WarmHours are stopped warm-pool entries' hours, paid at their volume
	// price; running entries are in ReplicaHours.
	WarmHours    float64 `json:"warm_hours"`
	CostUSD      float64 `json:"cost_usd"`
	MeanReady    float64 `json:"mean_ready"`
	PeakReplicas int     `json:"peak_replicas"`
	// Requested counts replicas asked for after the start, and of them
	// WarmStarts came from the warm pool and Borrowed from lower-priority
	// work.
	Requested  int `json:"replicas_requested"`
	WarmStarts int `json:"warm_starts"`
	Borrowed   int `json:"borrowed"`
	// Timeline is the run decision by decision, when Config.Timeline.
	Timeline []Sample `json:"-"`
}

// Sample is one interval between decisions, and the decision ending it.
type Sample struct {
	// At is the decision's time, from the start of the trace.
	At time.Duration
	// Demand is the highest demand of the interval; Ready the fewest
	// replicas serving in it, and Missed the requests of the interval
	// answered late or failed.
	Demand float64
	Ready  int
	Missed int
	// Metrics is what the fleet reported, and Decision what the policy
	// made of it.
	Metrics  autoscale.Metrics
	Decision autoscale.Decision
}

// tick is the virtual clock's step for the fleet: replicas become ready,
// and are counted, on whole seconds. Requests are events of their own.
const tick = time.Second

// Run replays tr against policy p. The service starts with initial
// replicas serving and a full warm pool, as if it had been running before
// the trace began. A *Oracle policy is shown the start-ups ahead.
func Run(tr *traffic.Trace, demand *Demand, p autoscale.Policy, initial int, c Config) Result {
	f := &fleet{c: c, policy: p, demand: demand, sample: Sample{Ready: math.MaxInt},
		cold:   &draws{s: c.Startup, rng: rand.New(rand.NewPCG(c.Seed, 0x636f6c64))},
		warm:   &draws{s: c.warmPath(), rng: rand.New(rand.NewPCG(c.Seed, 0x7761726d)), warm: true},
		borrow: &draws{s: c.Borrow, rng: rand.New(rand.NewPCG(c.Seed, 0x626f7277))},
		lb:     newBalancer(c.SLOLatency.Seconds(), c.QueueTimeout.Seconds())}
	if o, ok := p.(*Oracle); ok {
		o.fleet = f
	}
	for range initial {
		f.ready = append(f.ready, &replica{})
	}
	for range c.WarmPool {
		f.pool = append(f.pool, &replica{})
	}
	slots := max(1, c.MaxConcurrency)
	ticks := int((tr.Span + tick - 1) / tick)
	next := 0 // the next request of tr to arrive
	for i := range ticks {
		now := time.Duration(i) * tick
		f.progress(now)
		f.lb.setSlots(slots*len(f.ready), now.Seconds())
		for ; next < len(tr.Requests) && tr.Requests[next].At < now+tick; next++ {
			r := tr.Requests[next]
			work := c.Model.Work(r).Seconds()
			f.lb.arrive(pending{arrived: r.At.Seconds(), firstToken: float64(r.ContextTokens) / c.Model.PrefillTokensPerSecond, hold: work * float64(slots)})
			f.arrivals++
		}
		f.lb.advance((now + tick).Seconds())
		f.offers += float64(slots * len(f.ready))
		f.count(now)
		if (i+1)%int(c.Every/tick) == 0 {
			f.decide(now + tick)
		}
	}
	f.lb.drain()
	return f.result(time.Duration(ticks) * tick)
}

// warmPath is how a warm-pool entry starts: a stopped one resumes and
// loads, a running one only loads.
func (c Config) warmPath() Startup {
	if c.WarmRunning {
		return Startup{Load: c.Warm.Load}
	}
	return c.Warm
}

// replica is a replica or a warm-pool entry.
type replica struct {
	// since is when the current payment started: the request, or the
	// stop into the warm pool.
	since    time.Duration
	ready    time.Duration // serving, or for the warm pool prepared
	startup  autoscale.Startup
	borrowed bool
}

// draws are the start-ups of one path, drawn in order and known ahead
// (for the oracle) without changing what is drawn.
type draws struct {
	s     Startup
	rng   *rand.Rand
	warm  bool
	ahead []autoscale.Startup
}

// peek is the start-up of the k-th next replica on this path.
func (d *draws) peek(k int) autoscale.Startup {
	for len(d.ahead) <= k {
		s := autoscale.Startup{Provision: d.s.Provision.draw(d.rng), Init: d.s.Init.draw(d.rng), Load: d.s.Load.draw(d.rng), Warm: d.warm}
		d.ahead = append(d.ahead, s)
	}
	return d.ahead[k]
}

func (d *draws) take() autoscale.Startup {
	s := d.peek(0)
	d.ahead = d.ahead[1:]
	return s
}

// fleet is one run's replicas, warm pool and tally.
type fleet struct {
	c                  Config
	policy             autoscale.Policy
	demand             *Demand
	cold, warm, borrow *draws
	lb                 *balancer

	ready, starting []*replica
	preparing, pool []*replica // the warm pool
	borrowed        int
	paid, warmPaid  time.Duration

	// paths are the paths the oracle chose for the replicas it asks for
	// next; empty for every other policy, whose replicas take the fastest.
	paths []*draws

	readySecs                         int
	requested, warmStarts, borrowings int
	peak                              int
	// Since the last report.
	arrivals     int
	offers       float64
	busyReported float64
	// settledReported is the requests answered or failed as of the
	// latest report.
	settledReported int
	sample          Sample
	timeline        []Sample
}

// progress moves instances whose start-up or preparation is over.
func (f *fleet) progress(now time.Duration) {
	for len(f.preparing) > 0 && f.preparing[0].ready <= now {
		r := f.preparing[0]
		f.preparing = f.preparing[1:]
		if !f.c.WarmRunning {
			f.paid += r.ready - r.since
			r.since = r.ready
		}
		f.pool = append(f.pool, r)
	}
	for len(f.starting) > 0 && f.starting[0].ready <= now {
		r := f.starting[0]
		f.starting = f.starting[1:]
		f.ready = append(f.ready, r)
		f.policy.Started(r.startup)
	}
}

// count tallies one second of the fleet.
func (f *fleet) count(now time.Duration) {
	f.readySecs += len(f.ready)
	f.sample.Demand = max(f.sample.Demand, f.demand.At(f.demand.Start.Add(now)))
	f.sample.Ready = min(f.sample.Ready, len(f.ready))
	f.peak = max(f.peak, len(f.ready)+len(f.starting))
}

// decide reports metrics to the policy and carries out its decision.
func (f *fleet) decide(at time.Duration) {
	f.lb.expire(at.Seconds())
	clock := f.demand.Start.Add(at)
	m := autoscale.Metrics{At: clock, QPS: float64(f.arrivals) / f.c.Every.Seconds(), QueueLength: float64(f.lb.queued()), Replicas: len(f.ready)}
	if f.offers > 0 {
		m.GPUUtilization = min(1, (f.lb.busySecs-f.busyReported)/f.offers)
	}
	// What a balancer reports: the slots serving over the interval, and
	// the requests whose first token came (or that failed) in it.
	m.Serving = (f.lb.busySecs - f.busyReported) / f.c.Every.Seconds()
	settled := f.lb.answered + f.lb.failed
	m.Requests, m.Missed = float64(settled-f.settledReported), float64(f.lb.missed)
	f.arrivals, f.offers, f.busyReported, f.settledReported = 0, 0, f.lb.busySecs, settled
	f.sample.Missed, f.lb.missed = f.lb.missed, 0
	f.policy.Observe(m)
	d := f.policy.Decide(clock, autoscale.Fleet{Ready: len(f.ready), Starting: len(f.starting), Warm: len(f.pool)})
	if f.c.Timeline {
		f.sample.At, f.sample.Metrics, f.sample.Decision = at, m, d
		f.timeline = append(f.timeline, f.sample)
	}
	f.sample = Sample{Ready: math.MaxInt}
	f.scale(d.Replicas, at)
	f.keepWarm(at)
}

// nextPath is the path the next replica requested takes, and how many
// replicas ahead of it take it, so that peek finds its start-up: the
// warm pool while it has entries, then machines lower-priority work
// holds, then a cold start.
func (f *fleet) nextPath(k int) (*draws, int) {
	if k < len(f.pool) {
		return f.warm, k
	}
	k -= len(f.pool)
	if free := f.c.Borrowable - f.borrowed; k < free {
		return f.borrow, k
	}
	return f.cold, k - max(0, f.c.Borrowable-f.borrowed)
}

// start is the start-up of the k-th replica requested from now.
func (f *fleet) start(k int) time.Duration {
	path, i := f.nextPath(k)
	return path.peek(i).Total()
}

// restart is the start-up a replica released now costs to get back: a
// warm start where it is stopped into a short pool, else a cold one (the
// next cold start-up), since a warm entry taken is refilled cold.
func (f *fleet) restart() time.Duration {
	if len(f.pool)+len(f.preparing) < f.c.WarmPool {
		return f.warm.peek(0).Total()
	}
	return f.cold.peek(0).Total()
}

// scale requests replicas on the fastest path there is, or releases
// them: first those furthest from serving, then serving ones, which are
// stopped into the warm pool while it is short.
func (f *fleet) scale(want int, at time.Duration) {
	for i := 0; len(f.ready)+len(f.starting) < want; i++ {
		path, _ := f.nextPath(0)
		if i < len(f.paths) {
			path = f.paths[i]
		}
		r := &replica{since: at, startup: path.take()}
		switch path {
		case f.warm:
			n := len(f.pool) - 1
			f.payPool(f.pool[n], at)
			f.pool = f.pool[:n]
			f.warmStarts++
		case f.borrow:
			r.borrowed = true
			f.borrowed++
			f.borrowings++
		}
		r.ready = at + r.startup.Total()
		f.starting = append(f.starting, r)
		f.requested++
	}
	slices.SortStableFunc(f.starting, byReady)
	for len(f.ready)+len(f.starting) > want && len(f.starting) > 0 {
		f.release(f.starting[len(f.starting)-1], at)
		f.starting = f.starting[:len(f.starting)-1]
	}
	for len(f.ready) > want {
		r := f.ready[len(f.ready)-1]
		f.ready = f.ready[:len(f.ready)-1]
		f.release(r, at)
		if !r.borrowed && len(f.pool)+len(f.preparing) < f.c.WarmPool {
			f.pool = append(f.pool, &replica{since: at})
		}
	}
}

func (f *fleet) release(r *replica, at time.Duration) {
	f.paid += at - r.since
	if r.borrowed {
		f.borrowed--
	}
}

// payPool pays a warm-pool entry up to at: its volume when stopped, full
// price when running.
func (f *fleet) payPool(r *replica, at time.Duration) {
	if f.c.WarmRunning {
		f.paid += at - r.since
	} else {
		f.warmPaid += at - r.since
	}
}

// keepWarm prepares entries until the warm pool holds WarmPool: a cold
// start of its own, its model on disk, then stopped.
func (f *fleet) keepWarm(at time.Duration) {
	for len(f.pool)+len(f.preparing) < f.c.WarmPool {
		s := f.cold.take()
		f.preparing = append(f.preparing, &replica{since: at, ready: at + s.Total()})
	}
	slices.SortStableFunc(f.preparing, byReady)
}

func (f *fleet) result(end time.Duration) Result {
	for _, r := range slices.Concat(f.ready, f.starting, f.preparing) {
		f.paid += end - r.since
	}
	for _, r := range f.pool {
		f.payPool(r, end)
	}
	ticks := float64(end / tick)
	lb := f.lb
	r := Result{
		Attainment:   1,
		Failed:       lb.failed,
		P99Latency:   percentile(lb.latencies, 0.99),
		P99Wait:      percentile(lb.waits, 0.99),
		ReplicaHours: f.paid.Hours(),
		WarmHours:    f.warmPaid.Hours(),
		MeanReady:    float64(f.readySecs) / ticks,
		PeakReplicas: f.peak,
		Requested:    f.requested,
		WarmStarts:   f.warmStarts,
		Borrowed:     f.borrowings,
		Timeline:     f.timeline,
	}
	if n := lb.answered + lb.failed; n > 0 {
		r.Attainment = float64(lb.met) / float64(n)
	}
	r.CostUSD = r.ReplicaHours*f.c.PricePerHour + r.WarmHours*f.c.WarmPricePerHour
	return r
}

func byReady(a, b *replica) int { return cmp.Compare(a.ready, b.ready) }

func percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(math.Ceil(q*float64(len(s))))-1]
}
