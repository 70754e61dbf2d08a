package inference

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"refuel/pkg/serving"
	"refuel/pkg/spec"
	"refuel/workflows"
	"refuel/workflows/internal/fakecloud"
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
