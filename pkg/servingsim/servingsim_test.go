package servingsim

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
	if diff := cmp.Diff(d.Replicas, []float64{1, 1, 1, 3, 2, 2, 2, 0, 0, 0}); diff != "" {
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

func config() Config {
	return Config{Model: model, Startup: fixedStart, Every: 10 * time.Second, PricePerHour: 2, WarmPricePerHour: 0.1,
		Warm: Startup{Provision: Range{Min: 10 * time.Second, Max: 10 * time.Second}, Load: Range{Min: 10 * time.Second, Max: 10 * time.Second}}}
}

func TestRunStatic(t *testing.T) {
	tr := steady(time.Hour)
	d := NewDemand(tr, model, time.Minute, epoch)
	got := Run(tr, d, autoscale.Static{Replicas: 2}, 2, config())
	want := Result{Attainment: 1, ReplicaHours: 2, CostUSD: 4, MeanReady: 2, PeakReplicas: 2}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("got(-), want(+):\n%s", diff)
	}
}

// step wants 1 replica, then 3 from a given time on.
type step struct {
	at   time.Time
	warm int
}

func (step) Observe(autoscale.Metrics) {}
func (step) Started(autoscale.Startup) {}
func (s step) Decide(now time.Time, _ autoscale.Fleet) autoscale.Decision {
	if now.Before(s.at) {
		return autoscale.Decision{Replicas: 1, Warm: s.warm}
	}
	return autoscale.Decision{Replicas: 3, Warm: s.warm}
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

func TestRunWarmPool(t *testing.T) {
	tr := steady(time.Hour)
	d := NewDemand(tr, model, time.Minute, epoch)
	cold := Run(tr, d, step{at: epoch.Add(30 * time.Minute)}, 1, config())
	warm := Run(tr, d, step{at: epoch.Add(30 * time.Minute), warm: 2}, 1, config())
	// The warm pool is prepared at the first decision and stopped after
	// 90 s of provision and init; both replicas come from it at 30 min,
	// serving 20 s later instead of 120 s, and it is refilled.
	if want := cold.MeanReady + 2*100.0/3600; math.Abs(warm.MeanReady-want) > 0.01 {
		t.Errorf("mean ready with a warm pool %.4f; want %.4f", warm.MeanReady, want)
	}
	// Pool-hours: two instances stopped from 100 s to 30 min, and again
	// from the refill's 90 s on; the preparations are paid in full.
	if want := 2 * (1800 - 100 + 1800 - 90) / 3600.0; math.Abs(warm.WarmHours-want) > 1e-9 {
		t.Errorf("warm-pool hours %.4f; want %.4f", warm.WarmHours, want)
	}
	if want := cold.ReplicaHours + 4*90/3600.0; math.Abs(warm.ReplicaHours-want) > 1e-9 {
		t.Errorf("replica-hours %.4f; want %.4f", warm.ReplicaHours, want)
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
	if diff := cmp.Diff(run(), run()); diff != "" {
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
	// One replica serves until the first decision releases it; demand is
	// one replica, so from then on every second is missed.
	if first.At != 10*time.Second || first.Ready != 1 || first.Missed != 0 || first.Decision.Replicas != 0 || first.Metrics.Replicas != 1 {
		t.Errorf("first sample %+v; want one replica serving, none missed, the decision to keep none", first)
	}
	if last.Ready != 0 || last.Missed != 10 || last.Demand != 1 {
		t.Errorf("last sample %+v; want none serving and all 10 s missed against a demand of 1", last)
	}
	if res.Attainment != 1.0/6 {
		t.Errorf("attainment %g; want the first 10 s of 60", res.Attainment)
	}
	if c.Timeline = false; Run(tr, d, autoscale.Static{Replicas: 0}, 1, c).Timeline != nil {
		t.Error("a timeline kept without Config.Timeline")
	}
}
