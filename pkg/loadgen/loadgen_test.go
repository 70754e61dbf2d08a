package loadgen

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"refuel/pkg/traffic"
)

func TestPoissonArrivals(t *testing.T) {
	next := Poisson(1000, 10*time.Second, SmallBody, 1)
	n := 0
	var last time.Duration
	for {
		a, ok := next()
		if !ok {
			break
		}
		if a.At < last || a.At >= 10*time.Second {
			t.Fatalf("arrival %d at %s after %s", n, a.At, last)
		}
		last = a.At
		n++
	}
	if n < 9500 || n > 10500 { // 10,000 expected; the seed is fixed
		t.Fatalf("%d arrivals in 10 s at 1000/s", n)
	}
}

func TestTraceArrivals(t *testing.T) {
	tr := &traffic.Trace{Requests: []traffic.Request{{At: 0, ContextTokens: 3, GeneratedTokens: 2}, {At: 2 * time.Second, ContextTokens: 900, GeneratedTokens: 900}}}
	next := Trace(tr, 2, 0, 100)
	a, _ := next()
	b, _ := next()
	if _, more := next(); more || a.At != 0 || b.At != time.Second || string(a.Body) != `{"prompt":"w w w","max_tokens":2}` || !strings.HasSuffix(string(b.Body), `"max_tokens":100}`) {
		t.Fatalf("arrivals %v %q, %v %q", a.At, a.Body, b.At, b.Body)
	}
}

func TestRunCountsOKFailedAndSLO(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if n.Add(1)%4 == 0 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	i := 0
	arrivals := func() (Arrival, bool) {
		i++
		return Arrival{Body: SmallBody}, i <= 8
	}
	s := Run(context.Background(), Config{URL: srv.URL, Arrivals: arrivals})
	if s.Sent != 8 || s.OK != 6 || s.Failed != 2 || s.WithinSLO != 6 || s.SLOShare() != 0.75 || s.P50 <= 0 || s.P99 < s.P50 {
		t.Fatalf("stats %+v", s)
	}
}

func TestStatsAddKeepsEveryLatency(t *testing.T) {
	a := Stats{Sent: 3, OK: 2, Failed: 1, WithinSLO: 2, latencies: []time.Duration{10 * time.Millisecond, 30 * time.Millisecond}}
	b := Stats{Sent: 2, OK: 2, WithinSLO: 1, latencies: []time.Duration{20 * time.Millisecond, 400 * time.Millisecond}}
	a.seal(time.Second)
	b.seal(time.Second)
	sum := Stats{}.Add(a).Add(b)
	if sum.Sent != 5 || sum.OK != 4 || sum.Failed != 1 || sum.WithinSLO != 3 || sum.Span != 2*time.Second {
		t.Errorf("sum %+v", sum)
	}
	if sum.P50 != 20*time.Millisecond || sum.P99 != 400*time.Millisecond {
		t.Errorf("p50 %s p99 %s; want 20ms and 400ms over both", sum.P50, sum.P99)
	}
	if a.P99 != 30*time.Millisecond || len(a.latencies) != 2 {
		t.Errorf("Add changed its operand: %+v", a)
	}
}
