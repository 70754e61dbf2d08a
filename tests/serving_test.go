package tests

import (
	"context"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"refuel/balancers"
	"refuel/controlplane"
	"refuel/jobs"
	"refuel/pkg/spec"
	"refuel/workflows/inference"
)

// serverCommand is a model server stand-in: it "loads" for a moment,
// then serves /healthz (and anything under its directory) on
// $REFUEL_PORT, one thread per request.
var serverCommand = []string{"sh", "-c",
	`sleep 0.5; mkdir -p www && echo ok > www/healthz && exec python3 -m http.server "$REFUEL_PORT" --bind 127.0.0.1 --directory www`}

func servingSpec(id string, edit func(*spec.ServiceSpec)) spec.ServiceSpec {
	ss := spec.ServiceSpec{
		ID: id, Team: "serving", Priority: 60, MinReplicas: 1, MaxReplicas: 3,
		Target: spec.ScalingTarget{QPS: 5}, LeadTime: "2s", DownscaleDelay: spec.Duration(time.Second),
		Command:      serverCommand,
		Readiness:    &spec.Readiness{Path: "/healthz", InitialDelay: spec.Duration(30 * time.Second), Period: spec.Duration(200 * time.Millisecond), Timeout: spec.Duration(200 * time.Millisecond)},
		DrainTimeout: spec.Duration(2 * time.Second),
	}
	if edit != nil {
		edit(&ss)
	}
	ss.Normalize()
	return ss
}

// load sends GETs through endpoint at about rps until stopped, counting
// the requests answered 200 and the failures.
type load struct {
	ok, failed atomic.Int64
	stop       chan struct{}
	wg         sync.WaitGroup
}

func sendLoad(endpoint func() string, rps int) *load {
	l := &load{stop: make(chan struct{})}
	client := &http.Client{Timeout: 10 * time.Second}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		tick := time.NewTicker(time.Second / time.Duration(rps))
		defer tick.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				resp, err := client.Get("http://" + endpoint() + "/healthz")
				if err == nil {
					resp.Body.Close()
				}
				if err != nil || resp.StatusCode != http.StatusOK {
					l.failed.Add(1)
					return
				}
				l.ok.Add(1)
			}()
		}
	}()
	return l
}

func (l *load) end() (ok, failed int64) {
	close(l.stop)
	l.wg.Wait()
	return l.ok.Load(), l.failed.Load()
}

// TestServiceServesThroughItsBalancer: a service with a command runs its
// model server on each replica through the node agent, on the local
// cloud's instances; the balancer learns the ready replicas from status
// and reports its traffic, which becomes the service's endpoint and
// scales it from 1 to 3 replicas with every request answered; when the
// traffic falls, the replicas scaled in drain (status shows them
// draining) under a lighter load that loses no request either.
func TestServiceServesThroughItsBalancer(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	parallelFirst(t) // about a minute here, more beside other tests
	s := startStack(t, func(c *controlplane.Config) { c.Provider = controlplane.ProviderLocal })
	h := s.Balancers // every control-plane worker hosts the services' balancers
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ss := servingSpec("chat-serve", nil)
	if _, err := jobs.StartService(ctx, s.Client, ss); err != nil {
		t.Fatal(err)
	}
	first := waitService(t, ctx, s, ss.ID, func(st inference.Status) bool {
		return st.Ready == 1 && st.Replicas[0].Endpoint != "" && h.Endpoint(ss.ID) != ""
	})
	if first.Mode != inference.ModeServing || first.Serving == nil || first.Serving.DrainTimeoutSeconds != 2 {
		t.Errorf("status mode %q, serving %+v; want serving with the spec's settings", first.Mode, first.Serving)
	}
	endpoint := func() string { return h.Endpoint(ss.ID) }

	heavy := sendLoad(endpoint, 40)
	busy := waitService(t, ctx, s, ss.ID, func(st inference.Status) bool { return st.Ready == 3 })
	ok, failed := heavy.end()
	if failed != 0 || ok == 0 {
		t.Errorf("scaling out under load: %d answered, %d failed; want every request answered", ok, failed)
	}
	if busy.Endpoint != endpoint() || busy.Traffic == nil || busy.Traffic.RPS == 0 {
		t.Errorf("status endpoint %q (balancer at %q), traffic %+v; want the balancer's endpoint and its traffic", busy.Endpoint, endpoint(), busy.Traffic)
	}
	for _, r := range busy.Replicas {
		if r.State != inference.ReplicaReady || r.Endpoint == "" || r.Instance == nil {
			t.Errorf("replica %+v; want ready, with its server's endpoint and its instance", r)
		}
	}

	light := sendLoad(endpoint, 2)
	waitService(t, ctx, s, ss.ID, func(st inference.Status) bool {
		for _, r := range st.Replicas {
			if r.State == inference.ReplicaDraining {
				return true
			}
		}
		return false
	})
	after := waitService(t, ctx, s, ss.ID, func(st inference.Status) bool { return len(st.Replicas) < 3 })
	ok, failed = light.end()
	if failed != 0 || ok == 0 {
		t.Errorf("scaling in under load: %d answered, %d failed; want every request answered", ok, failed)
	}
	if after.LeadTimeSeconds <= 0 {
		t.Errorf("lead time %g; want it learned from the measured start-ups", after.LeadTimeSeconds)
	}
	recordHistory(t, s.Client, ss.ID+"/r1", "service-replica")
	if err := jobs.StopService(ctx, s.Client, ss.ID); err != nil {
		t.Fatal(err)
	}
	waitNoInstances(t, ctx, s)
	recordHistory(t, s.Client, ss.ID, "inference-service-serving")
}

// TestServiceReplacesAServerNeverReady: a model server that never
// answers its readiness path is stopped once initial_delay (and its
// grace) has passed; status names it with its last lines, and a new
// server is tried.
func TestServiceReplacesAServerNeverReady(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	parallel(t)
	s := startStack(t, func(c *controlplane.Config) { c.Provider = controlplane.ProviderLocal })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ss := servingSpec("never-ready", func(ss *spec.ServiceSpec) {
		ss.MaxReplicas = 1
		ss.Readiness.Path = "/ready"
		ss.Readiness.InitialDelay = spec.Duration(time.Second)
		ss.Command = []string{"sh", "-c", `echo loading a model that never loads >&2; exec python3 -m http.server "$REFUEL_PORT" --bind 127.0.0.1`}
	})
	if _, err := jobs.StartService(ctx, s.Client, ss); err != nil {
		t.Fatal(err)
	}
	st := waitService(t, ctx, s, ss.ID, func(st inference.Status) bool { return st.ReplicaFailures >= 1 })
	named := false
	for _, f := range st.Failures {
		named = named || (strings.Contains(f.Message, "did not answer GET /ready") && strings.Contains(f.Message, "never loads"))
	}
	if !named || st.Ready != 0 {
		t.Errorf("failures %+v, %d ready; want the server never ready named with its last lines, and none ready", st.Failures, st.Ready)
	}
	if err := jobs.StopService(ctx, s.Client, ss.ID); err != nil {
		t.Fatal(err)
	}
	waitNoInstances(t, ctx, s)
}

// waitNoInstances waits until the stack's cloud runs no instance.
func waitNoInstances(t *testing.T, ctx context.Context, s *controlplane.Stack) {
	t.Helper()
	for {
		left, err := s.Provider.List(ctx, nil)
		if err == nil && len(left) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("instances running after the service stopped: %v", left)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestServiceDrainsASpotReplicaOnNotice: a spot replica of a serving
// service on the simulated cloud is served an interruption notice under
// load: status shows it draining at once, the balancer sends it nothing
// new, what it held finishes, and it comes back on a new instance; no
// request fails.
func TestServiceDrainsASpotReplicaOnNotice(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	parallel(t)
	s := startStack(t, func(c *controlplane.Config) {
		c.Provider = controlplane.ProviderSim
		c.Sim = controlplane.SimConfig{Notice: 20 * time.Second}
	})
	h := s.Balancers
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ss := servingSpec("chat-spot-serve", func(ss *spec.ServiceSpec) {
		ss.MinReplicas, ss.MaxReplicas = 2, 2
		ss.Placement = spec.PlacementSpotFirst
	})
	if _, err := jobs.StartService(ctx, s.Client, ss); err != nil {
		t.Fatal(err)
	}
	first := waitService(t, ctx, s, ss.ID, func(st inference.Status) bool { return st.Ready == 2 && h.Endpoint(ss.ID) != "" })
	victim := first.Replicas[0]
	if victim.Instance == nil || victim.Instance.Market != "spot" {
		t.Fatalf("replica %+v; want it on spot", victim)
	}
	l := sendLoad(func() string { return h.Endpoint(ss.ID) }, 20)
	time.Sleep(time.Second)
	if _, err := jobs.Interrupt(ctx, s.Client, victim.Instance.ID, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	waitService(t, ctx, s, ss.ID, func(st inference.Status) bool {
		for _, r := range st.Replicas {
			if r.ID == victim.ID && r.State == inference.ReplicaDraining {
				return true
			}
		}
		return false
	})
	// Back to two ready replicas, none on the reclaimed instance: the
	// replica recovers on a new one, or, when its drain outlasted it,
	// the service replaces it with a replica of a new id.
	back := waitService(t, ctx, s, ss.ID, func(st inference.Status) bool {
		for _, r := range st.Replicas {
			if r.Instance != nil && r.Instance.ID == victim.Instance.ID {
				return false
			}
		}
		return st.Ready == 2
	})
	time.Sleep(time.Second)
	ok, failed := l.end()
	if failed != 0 || ok == 0 {
		t.Errorf("through the notice: %d answered, %d failed; want every request answered", ok, failed)
	}
	if back.ReplicasLost != 0 {
		t.Errorf("replicas_lost %d; a replica preempted with notice drains, it is not lost", back.ReplicasLost)
	}
	if err := jobs.StopService(ctx, s.Client, ss.ID); err != nil {
		t.Fatal(err)
	}
	waitNoInstances(t, ctx, s)
}

// runBalancers runs a balancer host against the stack, as `worker
// balancer` does; the returned func kills it (its listeners close).
func runBalancers(s *controlplane.Stack) (*balancers.Host, func()) {
	h := balancers.New(balancers.Temporal{Client: s.Client, Namespace: "default"}, balancers.Config{Host: "127.0.0.1", ListEvery: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Run(ctx)
	}()
	return h, func() { cancel(); <-done }
}

// TestServiceOutlivesItsBalancer: the balancer is killed and started
// again; the service goes on, and the new balancer learns its replicas
// from status and serves at the endpoint status names.
func TestServiceOutlivesItsBalancer(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	parallel(t)
	s := startStack(t, func(c *controlplane.Config) {
		c.Provider = controlplane.ProviderLocal
		c.Balancers.Off = true // the test runs its own, as `worker balancer`
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ss := servingSpec("chat-relearn", func(ss *spec.ServiceSpec) { ss.MaxReplicas = 1 })
	if _, err := jobs.StartService(ctx, s.Client, ss); err != nil {
		t.Fatal(err)
	}
	h, kill := runBalancers(s)
	before := waitService(t, ctx, s, ss.ID, func(st inference.Status) bool { return st.Ready == 1 && st.Endpoint != "" && h.Endpoint(ss.ID) != "" })
	l := sendLoad(func() string { return before.Endpoint }, 10)
	time.Sleep(time.Second)
	ok, failed := l.end()
	if ok == 0 || failed != 0 {
		t.Fatalf("before the kill: %d answered, %d failed", ok, failed)
	}
	kill()
	h2, kill2 := runBalancers(s)
	defer kill2()
	for ctx.Err() == nil && h2.Endpoint(ss.ID) == "" {
		time.Sleep(100 * time.Millisecond)
	}
	if got := h2.Endpoint(ss.ID); got != before.Endpoint {
		t.Errorf("the new balancer listens at %q; want the endpoint status names, %q", got, before.Endpoint)
	}
	l = sendLoad(func() string { return h2.Endpoint(ss.ID) }, 10)
	time.Sleep(2 * time.Second)
	ok, failed = l.end()
	if ok == 0 || failed != 0 {
		t.Errorf("after the restart: %d answered, %d failed; want the replica learned again and every request answered", ok, failed)
	}
	if st, err := jobs.ServiceStatus(ctx, s.Client, ss.ID); err != nil || st.Ready != 1 {
		t.Errorf("service after its balancer's restart: %+v, %v; want it running on with its replica", st.Ready, err)
	}
	if err := jobs.StopService(ctx, s.Client, ss.ID); err != nil {
		t.Fatal(err)
	}
	waitNoInstances(t, ctx, s)
}
