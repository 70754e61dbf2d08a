package balancer

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"refuel/pkg/serving"
)

// backend is a replica's model server in a test: it answers its id, and
// holds each request until released when hold is set.
type backend struct {
	id     string
	srv    *httptest.Server
	hits   atomic.Int64
	hold   bool
	holdCh chan struct{} // one receive releases one held request
	inside chan struct{} // a send per request arrived
	done   chan struct{} // closed as the test ends: held requests let go
}

func newBackend(t *testing.T, id string, hold bool) *backend {
	t.Helper()
	be := &backend{id: id, hold: hold, holdCh: make(chan struct{}), inside: make(chan struct{}, 100), done: make(chan struct{})}
	be.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		be.hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		be.inside <- struct{}{}
		if be.hold {
			select {
			case <-be.holdCh:
			case <-r.Context().Done():
				return
			case <-be.done:
				return
			}
		}
		fmt.Fprint(w, be.id)
	}))
	t.Cleanup(be.srv.Close)
	// Cleanups run last first: a test that failed with requests held
	// lets them go before the server's Close waits for them.
	t.Cleanup(func() { close(be.done) })
	return be
}

func (be *backend) endpoint() string { return strings.TrimPrefix(be.srv.URL, "http://") }

func (be *backend) replica(state string) serving.Replica {
	return serving.Replica{ID: be.id, State: state, Endpoint: be.endpoint()}
}

// deadEndpoint is a host:port where nothing listens.
func deadEndpoint(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func front(t *testing.T, b *Balancer) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(b)
	t.Cleanup(func() {
		srv.CloseClientConnections() // a failed test's held requests end
		srv.Close()
	})
	return srv
}

// get sends one request through the balancer and returns status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"hi"}`))
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// async sends a request in the background; the channel gets its body.
func async(t *testing.T, url string) <-chan string {
	out := make(chan string, 1)
	go func() {
		resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{}`))
		if err != nil {
			out <- "error: " + err.Error()
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		out <- fmt.Sprintf("%d %s", resp.StatusCode, body)
	}()
	return out
}

// settle waits until every count of b is zero and nothing is queued: the
// handler's last bookkeeping runs after the client has its answer.
func settle(t *testing.T, b *Balancer) map[string]int {
	t.Helper()
	var m map[string]int
	for range 500 {
		m = b.InFlight()
		busy := b.Queued() > 0
		for _, n := range m {
			busy = busy || n != 0
		}
		if !busy {
			return m
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("counts never settled: %v, queued %d", m, b.Queued())
	return nil
}

func TestRoutesToFewestOutstanding(t *testing.T) {
	r1, r2 := newBackend(t, "r1", true), newBackend(t, "r2", true)
	b := New("chat", nil, nil)
	b.Update([]serving.Replica{r1.replica(serving.ReplicaReady), r2.replica(serving.ReplicaReady)}, serving.Settings{MaxConcurrency: 4})
	srv := front(t, b)

	first := async(t, srv.URL)
	<-r1.inside // ties go to the first replica
	second := async(t, srv.URL)
	<-r2.inside // r1 holds one: the next goes to r2
	third := async(t, srv.URL)
	<-r1.inside
	if got := b.InFlight(); got["r1"] != 2 || got["r2"] != 1 {
		t.Fatalf("in flight %v, want r1 2 and r2 1", got)
	}
	for range 2 {
		r1.holdCh <- struct{}{}
	}
	r2.holdCh <- struct{}{}
	for _, c := range []<-chan string{first, second, third} {
		if got := <-c; !strings.HasPrefix(got, "200 ") {
			t.Fatalf("answer %q", got)
		}
	}
	settle(t, b)
}

func TestDrainingAndLostReplicasTakeNothingNewAtOnce(t *testing.T) {
	r1, r2 := newBackend(t, "r1", true), newBackend(t, "r2", false)
	b := New("chat", nil, nil)
	b.Update([]serving.Replica{r1.replica(serving.ReplicaReady), r2.replica(serving.ReplicaReady)}, serving.Settings{})
	srv := front(t, b)
	held := async(t, srv.URL)
	<-r1.inside

	// The status says r1 drains: the very next request avoids it, and the
	// one it holds finishes.
	b.Update([]serving.Replica{r1.replica(serving.ReplicaDraining), r2.replica(serving.ReplicaReady)}, serving.Settings{})
	for range 3 {
		if code, body := get(t, srv.URL); code != 200 || body != "r2" {
			t.Fatalf("after r1 drains: %d %q, want r2", code, body)
		}
	}
	r1.holdCh <- struct{}{}
	if got := <-held; got != "200 r1" {
		t.Fatalf("draining replica's request: %q", got)
	}

	// r1 back as ready, then r2 lost from the set: the next goes to r1.
	r1.hold = false
	b.Update([]serving.Replica{r1.replica(serving.ReplicaReady)}, serving.Settings{})
	if code, body := get(t, srv.URL); code != 200 || body != "r1" {
		t.Fatalf("after r2 is lost: %d %q, want r1", code, body)
	}
	// A replica still starting takes nothing.
	b.Update([]serving.Replica{r1.replica(serving.ReplicaReady), r2.replica(serving.ReplicaStarting)}, serving.Settings{})
	for range 3 {
		if _, body := get(t, srv.URL); body != "r1" {
			t.Fatalf("a starting replica answered: %q", body)
		}
	}
	settle(t, b)
}

func TestQueuesPastMaxConcurrencyFirstComeFirstServed(t *testing.T) {
	r1 := newBackend(t, "r1", true)
	b := New("chat", nil, nil)
	b.Update([]serving.Replica{r1.replica(serving.ReplicaReady)}, serving.Settings{MaxConcurrency: 1})
	srv := front(t, b)
	first := async(t, srv.URL)
	<-r1.inside
	second := async(t, srv.URL)
	waitFor(t, func() bool { return b.Queued() == 1 })
	third := async(t, srv.URL)
	waitFor(t, func() bool { return b.Queued() == 2 })
	if got := b.InFlight()["r1"]; got != 1 {
		t.Fatalf("r1 holds %d, want max_concurrency 1", got)
	}
	r1.holdCh <- struct{}{}
	<-first
	<-r1.inside // the second, released from the queue
	if b.Queued() != 1 {
		t.Fatalf("queued %d, want the third still waiting", b.Queued())
	}
	r1.holdCh <- struct{}{}
	<-second
	<-r1.inside
	r1.holdCh <- struct{}{}
	if got := <-third; got != "200 r1" {
		t.Fatalf("third: %q", got)
	}
	settle(t, b)
}

func TestQueueTimeoutAnswers503WithRetryAfter(t *testing.T) {
	r1 := newBackend(t, "r1", true)
	b := New("chat", nil, nil)
	b.Update([]serving.Replica{r1.replica(serving.ReplicaReady)}, serving.Settings{MaxConcurrency: 1, QueueTimeoutSeconds: 0.05})
	srv := front(t, b)
	held := async(t, srv.URL)
	<-r1.inside
	resp, err := http.Get(srv.URL + "/v1/completions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("queued past queue_timeout: %d, Retry-After %q; want 503 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	r1.holdCh <- struct{}{}
	<-held
	if m := settle(t, b); m["r1"] != 0 {
		t.Fatalf("count after a queue timeout: %v", m)
	}
	if tr, _ := b.Traffic(); tr.Requests != 2 || tr.Errors != 1 {
		t.Fatalf("traffic %+v, want 2 requests and 1 error", tr)
	}
}

func TestStreamsPassUnbuffered(t *testing.T) {
	next := make(chan struct{})
	stream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: token%d\n\n", i)
			w.(http.Flusher).Flush()
			<-next // the next token only once the client has this one
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer stream.Close()
	b := New("chat", nil, nil)
	b.Update([]serving.Replica{{ID: "r1", State: serving.ReplicaReady, Endpoint: strings.TrimPrefix(stream.URL, "http://")}}, serving.Settings{})
	srv := front(t, b)
	resp, err := http.Post(srv.URL+"/v1/completions", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	rd := bufio.NewReader(resp.Body)
	for i := range 3 {
		line, err := rd.ReadString('\n')
		if err != nil || line != fmt.Sprintf("data: token%d\n", i) {
			t.Fatalf("token %d: %q, %v", i, line, err)
		}
		_, _ = rd.ReadString('\n')
		next <- struct{}{}
	}
	if rest, _ := io.ReadAll(rd); string(rest) != "data: [DONE]\n\n" {
		t.Fatalf("end of stream %q", rest)
	}
	settle(t, b)
}

// SkyServe's retry may pick the replica that just failed; this one never
// does: the retry excludes it even where it is the least loaded.
func TestRetryNeverGoesToTheFailedReplica(t *testing.T) {
	dead := &replica{id: "dead", state: serving.ReplicaReady, member: true}
	busy := &replica{id: "busy", state: serving.ReplicaReady, member: true, inFlight: 1}
	b := New("chat", nil, nil)
	b.order = []*replica{dead, busy}
	b.replicas = map[string]*replica{"dead": dead, "busy": busy}
	r, err := b.acquire(nil, dead)
	if err != nil || r != busy {
		t.Fatalf("retry after dead failed went to %v (%v), want busy", r, err)
	}
	b.release(r)
	// With no other replica, no retry: never the same one.
	b.order = []*replica{dead}
	if r, err := b.acquire(nil, dead); err != errNoReplica {
		t.Fatalf("retry with only the failed replica: %v, %v; want errNoReplica", r, err)
	}
}

func TestFailedBeforeAnswerIsRetriedOnceElsewhere(t *testing.T) {
	// A replica that takes the connection and closes it unanswered.
	var accepts atomic.Int64
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			c.Close()
		}
	}()
	good := newBackend(t, "good", true)
	b := New("chat", nil, nil)
	b.Update([]serving.Replica{{ID: "bad", State: serving.ReplicaReady, Endpoint: l.Addr().String()}, good.replica(serving.ReplicaReady)}, serving.Settings{})
	srv := front(t, b)
	held := async(t, srv.URL)
	<-good.inside // good holds one, so bad is the least loaded
	done := async(t, srv.URL)
	<-good.inside
	good.holdCh <- struct{}{}
	good.holdCh <- struct{}{}
	for _, c := range []<-chan string{held, done} {
		if got := <-c; got != "200 good" {
			t.Fatalf("answer %q, want the retry on good", got)
		}
	}
	if n := accepts.Load(); n != 1 {
		t.Fatalf("the failed replica was tried %d times, want 1", n)
	}
	settle(t, b)

	// Alone, a failed replica is not tried again: 502.
	b.Update([]serving.Replica{{ID: "bad", State: serving.ReplicaReady, Endpoint: l.Addr().String()}}, serving.Settings{})
	if code, _ := get(t, srv.URL); code != http.StatusBadGateway {
		t.Fatalf("only replica failed: %d, want 502", code)
	}
	if n := accepts.Load(); n != 2 {
		t.Fatalf("the lone failed replica was tried %d times in all, want 2 (once per request)", n)
	}
	settle(t, b)
}

// SkyServe's in-flight count is not decremented on proxy errors and goes
// negative after replica churn; these counts stay exact.
func TestCountsStayExactThroughErrorsCancellationsAndChurn(t *testing.T) {
	r1 := newBackend(t, "r1", true)
	b := New("chat", nil, nil)
	srv := front(t, b)

	// Proxy errors: both replicas refuse connections.
	b.Update([]serving.Replica{{ID: "x", State: serving.ReplicaReady, Endpoint: deadEndpoint(t)}, {ID: "y", State: serving.ReplicaReady, Endpoint: deadEndpoint(t)}}, serving.Settings{})
	for range 3 {
		if code, _ := get(t, srv.URL); code != http.StatusBadGateway {
			t.Fatalf("dead replicas: %d, want 502", code)
		}
	}
	if m := settle(t, b); m["x"] != 0 || m["y"] != 0 {
		t.Fatalf("after proxy errors: %v", m)
	}

	// Cancellations: clients give up while the replica holds them.
	b.Update([]serving.Replica{r1.replica(serving.ReplicaReady)}, serving.Settings{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/", nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		<-r1.inside
	}
	if got := b.InFlight()["r1"]; got != 3 {
		t.Fatalf("r1 holds %d, want 3", got)
	}
	cancel()
	wg.Wait()
	if m := settle(t, b); m["r1"] != 0 {
		t.Fatalf("after cancellations: %v", m)
	}

	// Churn: r1 leaves the set and comes back while requests are in
	// flight; each end decrements the count its start incremented.
	a := async(t, srv.URL)
	<-r1.inside
	b.Update(nil, serving.Settings{})
	if got := b.InFlight()["r1"]; got != 1 {
		t.Fatalf("r1 left with a request in flight: count %d, want 1", got)
	}
	b.Update([]serving.Replica{r1.replica(serving.ReplicaReady)}, serving.Settings{})
	c := async(t, srv.URL)
	<-r1.inside
	if got := b.InFlight()["r1"]; got != 2 {
		t.Fatalf("r1 back: count %d, want 2 (the old request and the new)", got)
	}
	b.Update(nil, serving.Settings{})
	r1.holdCh <- struct{}{}
	r1.holdCh <- struct{}{}
	<-a
	<-c
	if m := settle(t, b); len(m) != 0 {
		t.Fatalf("after churn the gone replica is still counted: %v", m)
	}
}

func TestTrafficWindow(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := New("chat", nil, nil)
	b.now = func() time.Time { return clock }
	b.window.start = clock
	b.Update(nil, serving.Settings{SLOLatencySeconds: 0.1})
	for i := range 10 {
		b.record(OutcomeOK, time.Duration(i+1)*20*time.Millisecond) // 20..200 ms
	}
	b.record(OutcomeReplicaError, time.Millisecond)
	b.record(OutcomeCanceled, time.Millisecond)
	clock = clock.Add(2 * time.Second)
	tr, span := b.Traffic()
	want := serving.Traffic{RPS: 5.5, Requests: 11, Errors: 1, SLOShare: 5.0 / 11,
		LatencyP50Seconds: 0.1, LatencyP90Seconds: 0.18, LatencyP99Seconds: 0.2}
	if span != 2*time.Second || !near(tr.RPS, want.RPS) || tr.Requests != want.Requests || tr.Errors != want.Errors ||
		!near(tr.SLOShare, want.SLOShare) || !near(tr.LatencyP50Seconds, want.LatencyP50Seconds) ||
		!near(tr.LatencyP90Seconds, want.LatencyP90Seconds) || !near(tr.LatencyP99Seconds, want.LatencyP99Seconds) {
		t.Fatalf("traffic %+v over %s, want %+v over 2s", tr, span, want)
	}
	clock = clock.Add(time.Second)
	if tr, _ := b.Traffic(); tr.Requests != 0 || tr.SLOShare != 1 || tr.RPS != 0 {
		t.Fatalf("a new window: %+v", tr)
	}
}

// Serving is the mean of the requests held over the window, where
// in_flight is the count at its end: 2 held for a second and 1 for the
// next is 1.5 over the window, with 1 in flight.
func TestServingIsTheMeanHeldOverTheWindow(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := New("chat", nil, nil)
	b.now = func() time.Time { return clock }
	b.window.start, b.window.tallied = clock, clock
	b.Update([]serving.Replica{{ID: "r1", State: "ready", Endpoint: "127.0.0.1:1"}, {ID: "r2", State: "ready", Endpoint: "127.0.0.1:2"}},
		serving.Settings{MaxConcurrency: 4})
	first, err := b.acquire(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.acquire(nil, nil); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(time.Second)
	b.release(first)
	clock = clock.Add(time.Second)
	if tr, _ := b.Traffic(); !near(tr.Serving, 1.5) || tr.InFlight != 1 {
		t.Fatalf("serving %g with %d in flight, want 1.5 with 1", tr.Serving, tr.InFlight)
	}
	clock = clock.Add(4 * time.Second)
	if tr, _ := b.Traffic(); !near(tr.Serving, 1) {
		t.Fatalf("the next window: serving %g, want 1", tr.Serving)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 1000 {
		if cond() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("condition never held")
}
