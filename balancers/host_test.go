package balancers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"refuel/pkg/serving"
)

// fakeSource is a cluster of services in a test.
type fakeSource struct {
	mu       sync.Mutex
	running  []string
	status   map[string]Status
	errs     map[string]error
	listErr  error
	reported map[string][]serving.Report
	reads    map[string]int
}

func newFake() *fakeSource {
	return &fakeSource{status: map[string]Status{}, errs: map[string]error{}, reported: map[string][]serving.Report{}, reads: map[string]int{}}
}

func (f *fakeSource) Services(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.running...), f.listErr
}

func (f *fakeSource) Status(_ context.Context, id string) (Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads[id]++
	return f.status[id], f.errs[id]
}

func (f *fakeSource) Report(_ context.Context, id string, r serving.Report) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reported[id] = append(f.reported[id], r)
	return nil
}

func (f *fakeSource) set(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

func (f *fakeSource) reports(id string) []serving.Report {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]serving.Report(nil), f.reported[id]...)
}

// named is a replica server answering its name.
func named(t *testing.T, name string) serving.Replica {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, name) }))
	t.Cleanup(srv.Close)
	return serving.Replica{ID: name, State: serving.ReplicaReady, Endpoint: strings.TrimPrefix(srv.URL, "http://")}
}

func ask(t *testing.T, endpoint string) string {
	t.Helper()
	resp, err := http.Get("http://" + endpoint + "/v1/models")
	if err != nil {
		return "error"
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, b)
}

// waitHandled waits until the service's balancer has counted every
// request whose answer the test already read.
func waitHandled(t *testing.T, h *Host, id string) {
	t.Helper()
	h.mu.Lock()
	b := h.services[id].b
	h.mu.Unlock()
	for deadline := time.Now().Add(5 * time.Second); b.Handling() > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the balancer of %s still handles %d requests", id, b.Handling())
		}
	}
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newHost(src Source, c *clock) *Host {
	return New(src, Config{now: c.now, KeepFor: time.Minute})
}

// SkyServe's balancer learns replica changes every 20 s; a host reads every
// service's status within a second and routes by it at once.
func TestLearnsReplicaChangesWithinASecond(t *testing.T) {
	if DefaultPollEvery > time.Second {
		t.Fatalf("statuses are read every %s: a replica's change would take longer than a second to learn", DefaultPollEvery)
	}
	r1, r2 := named(t, "r1"), named(t, "r2")
	src := newFake()
	src.set(func() {
		src.running = []string{"chat", "batch"}
		src.status["chat"] = Status{Replicas: []serving.Replica{r1}, Serving: &serving.Settings{}}
		src.status["batch"] = Status{Replicas: []serving.Replica{r1}} // capacity only
	})
	c := &clock{time.Unix(1000, 0)}
	h := newHost(src, c)
	defer h.Close()
	h.Sync(context.Background())
	ep := h.Endpoint("chat")
	if ep == "" || h.Endpoint("batch") != "" {
		t.Fatalf("endpoints chat %q, batch %q: want one for chat only", ep, h.Endpoint("batch"))
	}
	if got := ask(t, ep); got != "200 r1" {
		t.Fatalf("through chat's balancer: %q", got)
	}

	// r1 drains and r2 is ready: the next round routes to r2 only. The
	// list is not due yet; the status is read all the same.
	draining := r1
	draining.State = serving.ReplicaDraining
	src.set(func() {
		src.status["chat"] = Status{Replicas: []serving.Replica{draining, r2}, Serving: &serving.Settings{}}
	})
	c.t = c.t.Add(DefaultPollEvery)
	h.Sync(context.Background())
	for range 3 {
		if got := ask(t, ep); got != "200 r2" {
			t.Fatalf("after r1 drains: %q", got)
		}
	}
	// r2 lost: the set is r1 again.
	src.set(func() { src.status["chat"] = Status{Replicas: []serving.Replica{r1}, Serving: &serving.Settings{}} })
	c.t = c.t.Add(DefaultPollEvery)
	h.Sync(context.Background())
	if got := ask(t, ep); got != "200 r1" {
		t.Fatalf("after r2 is lost: %q", got)
	}
	src.set(func() {
		if src.reads["batch"] != 1 || src.reads["chat"] != 3 {
			t.Errorf("status reads %v: want chat's every round, the capacity-only batch's once", src.reads)
		}
	})
}

func TestKeepsTheLastSetWhileStatusFailsAndClosesEndedServices(t *testing.T) {
	r1 := named(t, "r1")
	src := newFake()
	src.set(func() {
		src.running = []string{"chat", "chat2"}
		src.status["chat"] = Status{Replicas: []serving.Replica{r1}, Serving: &serving.Settings{QueueTimeoutSeconds: 0.01}}
		src.status["chat2"] = src.status["chat"]
	})
	c := &clock{time.Unix(1000, 0)}
	h := newHost(src, c)
	defer h.Close()
	h.Sync(context.Background())
	ep, ep2 := h.Endpoint("chat"), h.Endpoint("chat2")
	if ep == ep2 {
		t.Fatalf("two services share listener %s", ep)
	}

	// The cluster away: list and status fail; the balancer goes on.
	away := errors.New("connection refused")
	src.set(func() { src.listErr, src.errs["chat"], src.errs["chat2"] = away, away, away })
	c.t = c.t.Add(30 * time.Second)
	h.Sync(context.Background())
	if got := ask(t, ep); got != "200 r1" {
		t.Fatalf("with the cluster away: %q", got)
	}
	// Away past KeepFor: it no longer sends to replicas it cannot vouch for.
	c.t = c.t.Add(time.Minute)
	h.Sync(context.Background())
	if got := ask(t, ep); !strings.HasPrefix(got, "503") {
		t.Fatalf("away past KeepFor: %q, want 503", got)
	}

	// The cluster back; chat's workflow gone, chat2 no longer listed.
	src.set(func() {
		src.listErr, src.errs["chat2"] = nil, nil
		src.errs["chat"] = &GoneError{ID: "chat", Err: errors.New("not found")}
		src.running = []string{"chat"}
	})
	c.t = c.t.Add(time.Minute)
	h.Sync(context.Background())
	if h.Endpoint("chat") != "" || h.Endpoint("chat2") != "" {
		t.Fatal("an ended service kept its balancer")
	}
	for _, e := range []string{ep, ep2} {
		if conn, err := net.Dial("tcp", e); err == nil {
			conn.Close()
			t.Fatalf("listener %s still open", e)
		}
	}
}

func TestReportsAtMostEveryFiveSeconds(t *testing.T) {
	r1 := named(t, "r1")
	src := newFake()
	src.set(func() {
		src.running = []string{"chat"}
		src.status["chat"] = Status{Replicas: []serving.Replica{r1}, Serving: &serving.Settings{}}
	})
	c := &clock{time.Unix(1000, 0)}
	h := newHost(src, c)
	h.Sync(context.Background())
	ep := h.Endpoint("chat")
	for range 4 {
		ask(t, ep)
	}
	waitHandled(t, h, "chat")
	for range 9 { // 4.5 s of rounds: nothing more is due
		c.t = c.t.Add(DefaultPollEvery)
		h.Sync(context.Background())
	}
	c.t = c.t.Add(DefaultPollEvery)
	h.Sync(context.Background()) // 5 s: the second report
	for range 5 {                // idle after: one report saying so, then none until keepAlive
		c.t = c.t.Add(serving.ReportEvery)
		h.Sync(context.Background())
	}
	h.Close()
	got := src.reports("chat")
	if len(got) != 3 {
		t.Fatalf("%d reports, want 3 (at listening, with the traffic, when it stopped): %+v", len(got), got)
	}
	if got[0].Balancer != ep || got[1].Requests != 4 || got[1].WindowSeconds <= 0 || got[2].Requests != 0 {
		t.Fatalf("reports %+v", got)
	}
}

// A host that restarts learns the set again and listens where the
// service's endpoint says, when it can.
func TestRestartedHostRelearns(t *testing.T) {
	r1 := named(t, "r1")
	src := newFake()
	src.set(func() {
		src.running = []string{"chat"}
		src.status["chat"] = Status{Replicas: []serving.Replica{r1}, Serving: &serving.Settings{}}
	})
	c := &clock{time.Unix(1000, 0)}
	h := newHost(src, c)
	h.Sync(context.Background())
	ep := h.Endpoint("chat")
	h.Close()

	src.set(func() {
		src.status["chat"] = Status{Endpoint: ep, Replicas: []serving.Replica{r1}, Serving: &serving.Settings{}}
	})
	h2 := newHost(src, c)
	defer h2.Close()
	h2.Sync(context.Background())
	if h2.Endpoint("chat") != ep {
		t.Fatalf("restarted host listens on %q, want the service's endpoint %s", h2.Endpoint("chat"), ep)
	}
	if got := ask(t, ep); got != "200 r1" {
		t.Fatalf("after the restart: %q", got)
	}
}

// slowFirstReport holds the first report sent until release is closed.
type slowFirstReport struct {
	*fakeSource
	release chan struct{}
	once    sync.Once
}

func (s *slowFirstReport) Report(ctx context.Context, id string, r serving.Report) error {
	first := false
	s.once.Do(func() { first = true })
	if first {
		<-s.release
	}
	return s.fakeSource.Report(ctx, id, r)
}

// A report that is slow to go does not let the next overtake it: the
// service hears its balancer's reports in the order they were measured.
func TestReportsArriveInTheOrderTheyWereMeasured(t *testing.T) {
	r1 := named(t, "r1")
	src := &slowFirstReport{fakeSource: newFake(), release: make(chan struct{})}
	src.set(func() {
		src.running = []string{"chat"}
		src.status["chat"] = Status{Replicas: []serving.Replica{r1}, Serving: &serving.Settings{}}
	})
	c := &clock{time.Unix(1000, 0)}
	h := newHost(src, c)
	h.Sync(context.Background()) // the first report, held
	ask(t, h.Endpoint("chat"))
	waitHandled(t, h, "chat")
	c.t = c.t.Add(serving.ReportEvery)
	h.Sync(context.Background()) // the second, with the traffic
	time.Sleep(50 * time.Millisecond)
	close(src.release)
	h.Close()
	got := src.reports("chat")
	if len(got) != 2 || !got[0].At.Before(got[1].At) {
		t.Fatalf("reports %+v; want the one at listening, then the one with the traffic", got)
	}
}
