package inference

import (
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"refuel/pkg/capacity"
	"refuel/pkg/serving"
	"refuel/pkg/spec"
	"refuel/workflows"
	"refuel/workflows/internal/fakecloud"
	"refuel/workflows/workload"
)

// A service with a command acquires nothing itself: each replica is a
// ServiceReplica (here a stand-in that runs until cancelled), whose
// reports make it ready with its endpoint; the balancer's traffic sets
// the endpoint and scales the service out; a scale-in drains replicas
// (draining in status, told to drain) and forgets them when they are
// gone; a cancel cancels every replica still running.
func TestServiceWithCommandRunsReplicasAsWorkloads(t *testing.T) {
	t.Parallel()
	c := &serviceCloud{Cloud: &fakecloud.Cloud{}}
	var mu sync.Mutex
	var started, drained, cancelled []string
	env := newServiceEnv(t, c, &fakePool{absent: true}, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in ReplicaInput) (ReplicaReport, error) {
			mu.Lock()
			started = append(started, in.ID)
			mu.Unlock()
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(workflow.GetSignalChannel(ctx, workflows.SignalReplicaDrain), func(c workflow.ReceiveChannel, _ bool) {
				c.Receive(ctx, nil)
				mu.Lock()
				drained = append(drained, in.ID)
				mu.Unlock()
			})
			sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {})
			sel.Select(ctx)
			err := workflow.Await(ctx, func() bool { return false })
			mu.Lock()
			cancelled = append(cancelled, in.ID)
			mu.Unlock()
			return ReplicaReport{ID: in.ID, State: replicaGone}, err
		}, workflow.RegisterOptions{Name: workflows.ServiceReplicaName})
	})
	env.OnRequestCancelExternalWorkflow(mock.Anything, mock.Anything, "").Return(func(_, id, _ string) error {
		mu.Lock()
		defer mu.Unlock()
		cancelled = append(cancelled, id)
		return nil
	})
	report := func(at time.Duration, p ReplicaReport) {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.SignalReplica, p) }, at)
	}
	traffic := func(from, to time.Duration, rps float64) {
		every(env, 5*time.Second, from, to, func() {
			env.SignalWorkflow(serving.SignalTraffic, serving.Report{Balancer: "127.0.0.1:9000", At: env.Now(), WindowSeconds: 5,
				Traffic: serving.Traffic{RPS: rps, InFlight: int(rps / 10), Requests: int(rps * 5), SLOShare: 1}})
		})
	}
	report(5*time.Second, ReplicaReport{ID: "svc/r1", State: serving.ReplicaReady, Endpoint: "127.0.0.1:8001", LoadSeconds: 42, ProvisionSeconds: 3})
	traffic(10*time.Second, 50*time.Second, 10)
	report(30*time.Second, ReplicaReport{ID: "svc/r2", State: serving.ReplicaReady, Endpoint: "127.0.0.1:8002", LoadSeconds: 40})
	report(35*time.Second, ReplicaReport{ID: "svc/r3", State: serving.ReplicaReady, Endpoint: "127.0.0.1:8003", LoadSeconds: 41})
	busy := statusAt(t, env, 45*time.Second)
	traffic(55*time.Second, 17*time.Minute, 0)
	// The scale-in comes some time after the traffic fell (downscale_delay,
	// then the policy's own patience): the replicas it drains are seen
	// draining, then report gone.
	var draining []ReplicaStatus
	every(env, 10*time.Second, time.Minute, 15*time.Minute, func() {
		for _, r := range queryService(t, env).Replicas {
			if r.State == ReplicaDraining && !slices.ContainsFunc(draining, func(d ReplicaStatus) bool { return d.ID == r.ID }) {
				draining = append(draining, r)
				env.SignalWorkflow(workflows.SignalReplica, ReplicaReport{ID: r.ID, State: replicaGone, Endpoint: r.Endpoint, CostUSD: 1})
			}
		}
	})
	after := statusAt(t, env, 16*time.Minute)
	final := runUntilCancelled(t, env, 17*time.Minute, serviceSpec(func(s *spec.ServiceSpec) {
		s.MaxReplicas = 3
		s.Command = []string{"server"}
		s.Target = spec.ScalingTarget{QPS: 2}
	}))

	if n := len(c.acquisitions()); n != 0 {
		t.Errorf("the service acquired %d instances itself; its replicas' workloads acquire", n)
	}
	if busy.Mode != ModeServing || busy.Endpoint != "127.0.0.1:9000" || busy.Serving == nil || busy.Serving.QueueTimeoutSeconds != spec.DefaultQueueTimeout.Seconds() {
		t.Errorf("busy status: mode %q endpoint %q serving %+v; want serving at the balancer with its settings", busy.Mode, busy.Endpoint, busy.Serving)
	}
	if busy.Traffic == nil || busy.Traffic.RPS != 10 || busy.Ready != 3 {
		t.Errorf("busy status: traffic %+v, %d ready; want 10 req/s scaling to 3 ready", busy.Traffic, busy.Ready)
	}
	for _, r := range busy.Replicas {
		if r.State != ReplicaReady || r.Endpoint == "" {
			t.Errorf("busy replica %+v; want ready with its server's endpoint", r)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(started) != 3 {
		t.Errorf("replicas started %v; want r1, r2, r3", started)
	}
	for _, r := range draining {
		if r.Endpoint == "" {
			t.Errorf("draining replica %s shows no endpoint: its balancer must still finish what it sent it", r.ID)
		}
	}
	if len(draining) != 2 || len(drained) != 2 || after.Ready != 1 {
		t.Errorf("scale-in: %d seen draining, %v told to drain, %d ready after; want 2, 2 and 1", len(draining), drained, after.Ready)
	}
	if len(after.Replicas) != 1 || after.CostUSD < 2 {
		t.Errorf("after the drained replicas went: %v, cost %g; want one replica left and their cost kept", replicaIDs(*after), after.CostUSD)
	}
	if len(after.Replicas) == 1 && !slices.Contains(cancelled, after.Replicas[0].ID) || final.Endpoint != "" {
		t.Errorf("cancel cancelled %v with %v left, final endpoint %q; want the replica left cancelled and no endpoint", cancelled, replicaIDs(*after), final.Endpoint)
	}
}

// A serving service's warm pool is ServiceReplica children started warm:
// a warm entry's report (stopped, at its volume's price) counts as the
// fleet's warm capacity; scale-out promotes it rather than starting a
// cold replica, it serves once ready, and the pool is refilled warm.
func TestServingWarmEntryIsPromoted(t *testing.T) {
	t.Parallel()
	c := &serviceCloud{Cloud: &fakecloud.Cloud{}}
	var mu sync.Mutex
	var started []ReplicaInput
	promoted := map[string]bool{}
	env := newServiceEnv(t, c, &fakePool{absent: true}, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in ReplicaInput) (ReplicaReport, error) {
			mu.Lock()
			started = append(started, in)
			mu.Unlock()
			if in.Warm {
				workflow.GetSignalChannel(ctx, workflows.SignalReplicaPromote).Receive(ctx, nil)
				mu.Lock()
				promoted[in.ID] = true
				mu.Unlock()
			}
			err := workflow.Await(ctx, func() bool { return false })
			return ReplicaReport{ID: in.ID, State: replicaGone}, err
		}, workflow.RegisterOptions{Name: workflows.ServiceReplicaName})
	})
	env.OnRequestCancelExternalWorkflow(mock.Anything, mock.Anything, "").Return(nil)
	on := &workload.InstanceRef{ID: "i-2", Market: string(capacity.OnDemand), PricePerHour: 3}
	report := func(at time.Duration, p ReplicaReport) {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.SignalReplica, p) }, at)
	}
	report(5*time.Second, ReplicaReport{ID: "svc/r1", State: serving.ReplicaReady, Endpoint: "127.0.0.1:8001", LoadSeconds: 40, ProvisionSeconds: 3})
	report(10*time.Second, ReplicaReport{ID: "svc/r2", State: serving.ReplicaStarting})
	report(20*time.Second, ReplicaReport{ID: "svc/r2", State: string(ReplicaWarm), Instance: on, Stopped: true, StoppedPricePerHour: 0.02})
	// Once promoted, the warm entry reports starting (its instance
	// starts), then ready.
	readied := false
	every(env, 5*time.Second, 2*time.Minute, 6*time.Minute, func() {
		mu.Lock()
		p := promoted["svc/r2"]
		mu.Unlock()
		if p && !readied {
			readied = true
			env.SignalWorkflow(workflows.SignalReplica, ReplicaReport{ID: "svc/r2", State: serving.ReplicaStarting, Instance: on})
			env.SignalWorkflow(workflows.SignalReplica, ReplicaReport{ID: "svc/r2", State: serving.ReplicaReady, Endpoint: "127.0.0.1:8002",
				Instance: on, Warm: true, StartSeconds: 20, LoadSeconds: 30})
		}
	})
	reportQPS(env, 10*time.Second, 2*time.Minute, 1)
	reportQPS(env, 2*time.Minute+10*time.Second, 7*time.Minute, 3) // 2 replicas' worth
	before := statusAt(t, env, 2*time.Minute)
	after := statusAt(t, env, 6*time.Minute)
	runUntilCancelled(t, env, 7*time.Minute, serviceSpec(func(s *spec.ServiceSpec) {
		s.Command = []string{"server"}
		s.WarmPool = 1
	}))

	if before.Ready != 1 || before.Warm != 1 || len(before.Replicas) != 2 || before.Replicas[1].State != ReplicaStopped ||
		before.Replicas[1].StoppedPricePerHour != 0.02 {
		t.Fatalf("before: %d ready, %d warm, %+v; want r1 ready and r2 a stopped warm entry", before.Ready, before.Warm, before.Replicas)
	}
	mu.Lock()
	defer mu.Unlock()
	// The children run on goroutines of their own in the test
	// environment, so the order they record their start in is not the
	// order the service started them in: read them by ID.
	warm := map[string]bool{}
	for _, in := range started {
		warm[in.ID] = in.Warm
	}
	if len(started) != 3 || !maps.Equal(warm, map[string]bool{"svc/r1": false, "svc/r2": true, "svc/r3": true}) || !promoted["svc/r2"] {
		t.Errorf("started %+v (warm %v), promoted %v; want r1 cold, r2 warm and promoted, r3 warm (the refill)", started, warm, promoted)
	}
	if after.Ready != 2 || after.Warm != 0 || len(after.Replicas) != 3 || after.Replicas[1].State != ReplicaReady || after.Replicas[2].State != ReplicaWarm {
		t.Errorf("after: %d ready, %d warm, %+v; want r1 and r2 ready, r3 warm on its way", after.Ready, after.Warm, after.Replicas)
	}
}
