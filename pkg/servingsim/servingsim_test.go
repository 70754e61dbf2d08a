package servingsim

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"refuel/pkg/autoscale"
	"refuel/pkg/traffic"
)

var epoch = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// model makes a request's work its context tokens in seconds.
var model = Model{PrefillTokensPerSecond: 1, DecodeTokensPerSecond: math.Inf(1)}

// steady is one request a second, each a second of work: one replica's load.
func steady(d time.Duration) *traffic.Trace {
	tr := &traffic.Trace{Span: d}
	for at := time.Duration(0); at < d; at += time.Second {
		tr.Requests = append(tr.Requests, traffic.Request{At: at, ContextTokens: 1})
	}
	return tr
}

func TestModelWork(t *testing.T) {
	m := Model{PrefillTokensPerSecond: 2000, DecodeTokensPerSecond: 200}
	if got := m.Work(traffic.Request{ContextTokens: 1000, GeneratedTokens: 100}); got != time.Second {
		t.Errorf("work %s; want 0.5 s prefill + 0.5 s decode", got)
	}
}

func TestDemand(t *testing.T) {
	tr := &traffic.Trace{Span: 10 * time.Second, Requests: []traffic.Request{{At: 0, ContextTokens: 4}, {At: 3 * time.Second, ContextTokens: 8}}}
	d := NewDemand(tr, model, 4*time.Second, epoch)
	if diff := gocmp.Diff(d.Replicas, []float64{1, 1, 1, 3, 2, 2, 2, 0, 0, 0}); diff != "" {
		t.Errorf("demand got(-), want(+):\n%s", diff)
	}
	if d.Max() != 3 || d.At(epoch.Add(5*time.Second)) != 2 || d.Peak(epoch.Add(4*time.Second), epoch.Add(time.Hour)) != 2 {
		t.Errorf("max %g, at 5 s %g, peak from 4 s %g", d.Max(), d.At(epoch.Add(5*time.Second)), d.Peak(epoch.Add(4*time.Second), epoch.Add(time.Hour)))
	}
}

func TestPeakMatchesAScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tr := &traffic.Trace{Span: 1000 * time.Second}
	for range 3000 {
		tr.Requests = append(tr.Requests, traffic.Request{At: time.Duration(rng.Int64N(int64(tr.Span))), ContextTokens: rng.IntN(20)})
	}
	d := NewDemand(tr, model, 30*time.Second, epoch)
	for range 500 {
		i, j := rng.IntN(1000), rng.IntN(1000)
		want := 0.0
		for k := i; k <= j; k++ {
			want = max(want, d.Replicas[k])
		}
		if got := d.Peak(epoch.Add(time.Duration(i)*time.Second), epoch.Add(time.Duration(j)*time.Second)); got != want {
			t.Fatalf("peak [%d, %d] %g; want %g", i, j, got, want)
		}
	}
}

var fixedStart = Startup{Provision: Range{Min: 60 * time.Second, Max: 60 * time.Second}, Init: Range{Min: 30 * time.Second, Max: 30 * time.Second}, Load: Range{Min: 30 * time.Second, Max: 30 * time.Second}}

// config serves a request per slot with one slot per replica: a request
// of steady's holds its slot 1 s and has its first token after 1 s.
func config() Config {
	return Config{Model: model, Startup: fixedStart, Every: 10 * time.Second, PricePerHour: 2, WarmPricePerHour: 0.1,
		Warm:           Startup{Provision: Range{Min: 10 * time.Second, Max: 10 * time.Second}, Load: Range{Min: 10 * time.Second, Max: 10 * time.Second}},
		Borrow:         Startup{Provision: Range{Min: 20 * time.Second, Max: 20 * time.Second}, Load: Range{Min: 30 * time.Second, Max: 30 * time.Second}},
		MaxConcurrency: 1, SLOLatency: 2 * time.Second, QueueTimeout: 30 * time.Second}
}

func TestRunStatic(t *testing.T) {
	tr := steady(time.Hour)
	d := NewDemand(tr, model, time.Minute, epoch)
	got := Run(tr, d, autoscale.Static{Replicas: 2}, 2, config())
	want := Result{Attainment: 1, P99Latency: 1, ReplicaHours: 2, CostUSD: 4, MeanReady: 2, PeakReplicas: 2}
	if diff := gocmp.Diff(got, want); diff != "" {
		t.Errorf("got(-), want(+):\n%s", diff)
	}
}

// TestRunQueues checks requests against a fleet too small for them: one
// replica of one slot, two requests a second of a second's work each.
// Half are answered; the queue grows by one a second, so a request waits
// its arrival time over two, and those past the timeout fail.
func TestRunQueues(t *testing.T) {
	tr := &traffic.Trace{Span: 100 * time.Second}
	for i := range 200 {
		tr.Requests = append(tr.Requests, traffic.Request{At: time.Duration(i) * time.Second / 2, ContextTokens: 1})
	}
	d := NewDemand(tr, model, time.Minute, epoch)
	got := Run(tr, d, autoscale.Static{Replicas: 1}, 1, config())
	// The one slot answers a request a second from 0 s, each the oldest
	// still waiting under 30 s: within the SLO of 2 s only the first ones
	// (a wait of at most 1 s), then each waits more, up to the timeout.
	if got.Failed == 0 || got.Attainment > 0.05 || got.P99Latency < 30 {
		t.Errorf("%+v; want failures, almost none met, p99 at the timeout or more", got)
	}
	if answered := 200 - got.Failed; answered < 100 || answered > 131 {
		t.Errorf("%d answered; want one a second over the trace and the timeout after it", answered)
	}
}

// step wants 1 replica, then 3 from a given time on.
type step struct {
	at time.Time
}

func (step) Observe(autoscale.Metrics) {}
func (step) Started(autoscale.Startup) {}
func (s step) Decide(now time.Time, _ autoscale.Fleet) autoscale.Decision {
	if now.Before(s.at) {
		return autoscale.Decision{Replicas: 1}
	}
	return autoscale.Decision{Replicas: 3}
}

func TestRunPaysFromRequestAndServesAfterStartup(t *testing.T) {
	tr := steady(time.Hour)
	d := NewDemand(tr, model, time.Minute, epoch)
	got := Run(tr, d, step{at: epoch.Add(30 * time.Minute)}, 1, config())
	// Two replicas requested at 30 min, serving 2 min later, paid from the request.
	if got.Requested != 2 || math.Abs(got.ReplicaHours-2) > 1e-9 || got.Attainment != 1 || got.PeakReplicas != 3 {
		t.Errorf("%+v; want 2 requested, 1 + 2*0.5 replica-hours", got)
	}
	if want := 1 + 2*(30*time.Minute-2*time.Minute).Hours()/1; math.Abs(got.MeanReady-want) > 0.01 {
		t.Errorf("mean ready %.3f; want %.3f", got.MeanReady, want)
	}
}

// TestRunPaths checks each start-up path and its price with a policy
// that scales from 1 to 4 replicas at 30 min.
func TestRunPaths(t *testing.T) {
	tr := steady(time.Hour)
	d := NewDemand(tr, model, time.Minute, epoch)
	at := epoch.Add(30 * time.Minute)
	tests := []struct {
		name string
		// set changes the paths of config().
		set func(*Config)
		// readyHours are the replica-hours serving the three added
		// replicas, each ready after its start-up and serving to the end.
		readyHours float64
		// replicaHours and warmHours are paid.
		replicaHours, warmHours float64
		warmStarts, borrowed    int
	}{
		{
			name: "cold", set: func(*Config) {},
			readyHours: 3 * (1800 - 120) / 3600.0, replicaHours: 1 + 3*0.5,
		},
		{
			// Two stopped entries start in 20 s; the third is cold. The pool
			// is refilled at once by two cold preparations of 120 s, paid in
			// full, then stopped: its volume paid from 0 to 30 min, and from
			// 32 min on.
			name: "two stopped warm entries", set: func(c *Config) { c.WarmPool = 2 },
			readyHours: (2*(1800-20) + 1800 - 120) / 3600.0, replicaHours: 1 + 3*0.5 + 2*120/3600.0,
			warmHours: 2 * (1800 + 1800 - 120) / 3600.0, warmStarts: 2,
		},
		{
			// Running entries start in their load of 10 s and are paid in
			// full throughout.
			name: "two running warm entries", set: func(c *Config) { c.WarmPool, c.WarmRunning = 2, true },
			readyHours: (2*(1800-10) + 1800 - 120) / 3600.0, replicaHours: 1 + 3*0.5 + 2*(1800+1800)/3600.0,
			warmStarts: 2,
		},
		{
			// One machine from lower-priority work, in 50 s; then cold.
			name: "one borrowable", set: func(c *Config) { c.Borrowable = 1 },
			readyHours: ((1800 - 50) + 2*(1800-120)) / 3600.0, replicaHours: 1 + 3*0.5, borrowed: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := config()
			tt.set(&c)
			got := Run(tr, d, fixed{at: at, n: 4}, 1, c)
			if want := 1 + tt.readyHours; math.Abs(got.MeanReady-want) > 1e-3 {
				t.Errorf("mean ready %.4f; want %.4f", got.MeanReady, want)
			}
			if math.Abs(got.ReplicaHours-tt.replicaHours) > 1e-9 || math.Abs(got.WarmHours-tt.warmHours) > 1e-9 {
				t.Errorf("replica-hours %.4f, warm-hours %.4f; want %.4f, %.4f", got.ReplicaHours, got.WarmHours, tt.replicaHours, tt.warmHours)
			}
			if got.WarmStarts != tt.warmStarts || got.Borrowed != tt.borrowed || got.Requested != 3 {
				t.Errorf("%d warm starts, %d borrowed, %d requested; want %d, %d, 3", got.WarmStarts, got.Borrowed, got.Requested, tt.warmStarts, tt.borrowed)
			}
		})
	}
}

// fixed wants 1 replica, then n from a given time on.
type fixed struct {
	at time.Time
	n  int
}

func (fixed) Observe(autoscale.Metrics) {}
func (fixed) Started(autoscale.Startup) {}
func (s fixed) Decide(now time.Time, _ autoscale.Fleet) autoscale.Decision {
	if now.Before(s.at) {
		return autoscale.Decision{Replicas: 1}
	}
	return autoscale.Decision{Replicas: s.n}
}

// TestOracleIsInTimeOnEveryPath gives the oracle a step in demand and
// the three paths: it asks for each replica one start-up of its own path
// before the step, so every request is met, and pays no more than those
// start-ups and the serving after the step.
func TestOracleIsInTimeOnEveryPath(t *testing.T) {
	tr := steady(time.Hour)
	// From 30 min, three more requests a second.
	for at := 30 * time.Minute; at < time.Hour; at += time.Second {
		for range 3 {
			tr.Requests = append(tr.Requests, traffic.Request{At: at, ContextTokens: 1})
		}
	}
	slices.SortStableFunc(tr.Requests, func(a, b traffic.Request) int { return cmp.Compare(a.At, b.At) })
	d := NewDemand(tr, model, time.Second, epoch)
	c := config()
	c.WarmPool, c.Borrowable = 1, 1
	got := Run(tr, d, &Oracle{Demand: d, Headroom: 1, Every: c.Every, Max: 10}, 1, c)
	if got.Attainment != 1 || got.WarmStarts != 1 || got.Borrowed != 1 || got.Requested != 3 {
		t.Errorf("%+v; want every request met, one warm start, one borrowed, one cold", got)
	}
	// Serving: 1 replica all hour, 3 for the last 30 min; each asked for
	// at most one start-up and one decision interval early; the pool's
	// refill, a cold preparation.
	most := 1 + 1.5 + (20+50+120+3*10)/3600.0 + 120/3600.0
	if got.ReplicaHours > most+1e-9 {
		t.Errorf("replica-hours %.4f; want at most %.4f", got.ReplicaHours, most)
	}
}
func TestRunIsDeterministic(t *testing.T) {
	hour := steady(time.Hour)
	tr := traffic.ComposeDay(hour, traffic.DayShape{Trough: 0.5, TroughAt: 0}, 1).Slice(0, 3*time.Hour)
	c := config()
	c.Startup = Startup{Provision: Range{Min: time.Minute, Max: 3 * time.Minute}, Load: Range{Min: 0, Max: time.Minute}}
	d := NewDemand(tr, model, time.Minute, epoch)
	run := func() Result {
		s := autoscale.NewReactive(1, 1, 10)
		return Run(tr, d, s, 1, c)
	}
	if diff := gocmp.Diff(run(), run()); diff != "" {
		t.Errorf("got(-), want(+):\n%s", diff)
	}
}

func TestTimeline(t *testing.T) {
	tr := steady(time.Minute)
	d := NewDemand(tr, model, 10*time.Second, epoch)
	c := config()
	c.Timeline = true
	res := Run(tr, d, autoscale.Static{Replicas: 0}, 1, c)
	if len(res.Timeline) != 6 {
		t.Fatalf("%d samples over a minute deciding every 10 s; want 6", len(res.Timeline))
	}
	first, last := res.Timeline[0], res.Timeline[5]
	// One replica serves until the first decision releases it; from
	// then on every request waits until it fails.
	if first.At != 10*time.Second || first.Ready != 1 || first.Missed != 0 || first.Decision.Replicas != 0 || first.Metrics.Replicas != 1 || first.Metrics.GPUUtilization != 1 {
		t.Errorf("first sample %+v; want one replica serving and busy, none missed, the decision to keep none", first)
	}
	// A balancer's counts: requests settled (answered or failed) in the
	// interval, those late, and the slots serving on average.
	var settled, late float64
	for _, s := range res.Timeline {
		settled, late = settled+s.Metrics.Requests, late+s.Metrics.Missed
	}
	if first.Metrics.Requests != 10 || first.Metrics.Missed != 0 || first.Metrics.Serving <= 0 || last.Metrics.Serving != 0 {
		t.Errorf("first sample's metrics %+v, last's %+v; want 10 requests answered in time over slots serving, then none serving", first.Metrics, last.Metrics)
	}
	// Those arriving from 10 s on wait 30 s and fail: by the last report,
	// the 20 that came before 30 s.
	if settled != 30 || late != 20 {
		t.Errorf("reports counted %g requests settled and %g late; want 30 and 20", settled, late)
	}
	if last.Ready != 0 || last.Metrics.QueueLength != 30 || last.Demand != 1 {
		t.Errorf("last sample %+v; want none serving, 30 requests waiting, a demand of 1", last)
	}
	if res.Attainment != 10.0/60 || res.Failed != 50 {
		t.Errorf("attainment %g, %d failed; want the first 10 requests of 60 met, the rest failed", res.Attainment, res.Failed)
	}
	if c.Timeline = false; Run(tr, d, autoscale.Static{Replicas: 0}, 1, c).Timeline != nil {
		t.Error("a timeline kept without Config.Timeline")
	}
}

func TestHindsightFollowsTheRecentPeak(t *testing.T) {
	// Demand of 1 replica, 4 from 10 s to 20 s, 1 again after.
	tr := &traffic.Trace{Span: time.Minute}
	for i := range 60 {
		n := 1
		if i >= 10 && i < 20 {
			n = 4
		}
		for range n {
			tr.Requests = append(tr.Requests, traffic.Request{At: time.Duration(i) * time.Second, ContextTokens: 1})
		}
	}
	d := NewDemand(tr, model, time.Second, epoch)
	tests := []struct {
		at       time.Duration
		headroom float64
		want     int
	}{
		{10 * time.Second, 1, 1},   // the rise is not seen before it comes
		{15 * time.Second, 1, 4},   // seen
		{15 * time.Second, 1.5, 6}, // with headroom
		{35 * time.Second, 1, 4},   // held for 20 s after
		{45 * time.Second, 1, 1},   // then released
	}
	for _, tt := range tests {
		h := Hindsight{Demand: d, Headroom: tt.headroom, Hold: 20 * time.Second, Max: 10}
		if got := h.Decide(epoch.Add(tt.at), autoscale.Fleet{}).Replicas; got != tt.want {
			t.Errorf("at %s with headroom %g: %d; want %d", tt.at, tt.headroom, got, tt.want)
		}
	}
}
