package serving

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestKeepAndTotal(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	report := func(b string, at time.Duration, rps float64, requests int, share, p99 float64) Report {
		r := Report{Balancer: b, At: t0.Add(at), Traffic: Traffic{RPS: rps, InFlight: 2, Queued: 1, Requests: requests, Errors: 1, SLOShare: share, LatencyP99Seconds: p99}}
		if b == "a:1" {
			r.Serving = 1.5 // b does not measure it: its in_flight stands for it
		}
		return r
	}
	var rs []Report
	rs = Keep(rs, report("a:1", 0, 10, 50, 1, 0.2), 15*time.Second)
	rs = Keep(rs, report("b:1", time.Second, 30, 150, 0.8, 0.4), 15*time.Second)
	rs = Keep(rs, report("a:1", 5*time.Second, 20, 100, 0.5, 0.1), 15*time.Second)
	got := Total(rs)
	want := Traffic{RPS: 50, InFlight: 4, Serving: 3.5, Queued: 2, Requests: 250, Errors: 2, LatencyP99Seconds: 0.4, SLOShare: (100*0.5 + 150*0.8) / 250}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("total got(-), want(+):\n%s", diff)
	}
	// b stops reporting: 15 s after a's next report it no longer counts.
	rs = Keep(rs, report("a:1", 17*time.Second, 5, 0, 1, 0), 15*time.Second)
	if len(rs) != 1 || rs[0].Balancer != "a:1" {
		t.Fatalf("reports %+v; want only a:1's latest", rs)
	}
	if got := Total(rs); got.RPS != 5 || got.SLOShare != 1 {
		t.Errorf("total %+v; want a's rate and a full share with no request", got)
	}
}
