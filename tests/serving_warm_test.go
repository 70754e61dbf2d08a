package tests

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"refuel/controlplane"
	"refuel/jobs"
	"refuel/pkg/capacity"
	"refuel/pkg/spec"
	"refuel/workflows/inference"
)

// TestServingWarmPoolIsStoppedAndPromoted: a service with a command keeps
// its warm pool as replicas whose on-demand instances are stopped (paid
// for as volume, the agent gone); under load, scale-out starts the
// stopped instance and runs the model server on it, not a cold
// acquisition, with every request answered meanwhile; the pool refills
// stopped, and stopping the service leaves nothing running or stopped.
func TestServingWarmPoolIsStoppedAndPromoted(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	parallel(t)
	s := startStack(t, func(c *controlplane.Config) { c.Provider = controlplane.ProviderLocal })
	stopper, ok := s.Provider.(capacity.Stopper)
	if !ok {
		t.Fatalf("the local cloud %T cannot stop instances", s.Provider)
	}
	h := s.Balancers
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ss := servingSpec("chat-serve-warm", func(ss *spec.ServiceSpec) {
		ss.MaxReplicas, ss.WarmPool, ss.Placement = 2, 1, spec.PlacementOnDemand
	})
	if _, err := jobs.StartService(ctx, s.Client, ss); err != nil {
		t.Fatal(err)
	}
	before := waitService(t, ctx, s, ss.ID, func(st inference.Status) bool {
		return st.Ready == 1 && stoppedReplica(st) != nil && h.Endpoint(ss.ID) != ""
	})
	warm := stoppedReplica(before)
	if before.Warm != 1 || warm.Instance == nil || warm.Instance.Market != string(capacity.OnDemand) ||
		warm.StoppedPricePerHour <= 0 || warm.StoppedPricePerHour >= warm.Instance.PricePerHour {
		t.Fatalf("warm entry %+v (%d warm); want one on-demand instance, stopped at its volume's price", warm, before.Warm)
	}
	if stopped, err := stopper.ListStopped(ctx, nil); err != nil || len(stopped) != 1 || stopped[0].ID != warm.Instance.ID {
		t.Fatalf("the cloud has %v stopped (%v); want warm instance %s alone", stopped, err, warm.Instance.ID)
	}

	heavy := sendLoad(func() string { return h.Endpoint(ss.ID) }, 20) // 4 replicas' worth, at most 2
	after := waitService(t, ctx, s, ss.ID, func(st inference.Status) bool {
		for _, r := range st.Replicas {
			if r.ID == warm.ID && r.State == inference.ReplicaReady {
				return st.Ready == 2
			}
		}
		return false
	})
	ok2, failed := heavy.end()
	if failed != 0 || ok2 == 0 {
		t.Errorf("promoting the warm entry under load: %d answered, %d failed; want every request answered", ok2, failed)
	}
	for _, r := range after.Replicas {
		if r.ID == warm.ID && (r.Instance == nil || r.Instance.ID != warm.Instance.ID || r.Endpoint == "") {
			t.Errorf("promoted %+v; want its stopped instance %s started, serving", r, warm.Instance.ID)
		}
	}
	// The pool refills with a stopped entry.
	waitService(t, ctx, s, ss.ID, func(st inference.Status) bool { return stoppedReplica(st) != nil })
	recordHistory(t, s.Client, warm.ID, "service-replica-warm")

	if err := jobs.StopService(ctx, s.Client, ss.ID); err != nil {
		t.Fatal(err)
	}
	waitNoInstances(t, ctx, s)
	if left, _ := stopper.ListStopped(ctx, nil); len(left) != 0 {
		t.Errorf("instances stopped after the service stopped: %v", left)
	}
	recordHistory(t, s.Client, ss.ID, "inference-service-serving-warm")
}

// TestServingWarmSpotEntryTakenIsReplaced: a warm-pool entry on spot
// cannot be stopped and runs no server; when its cloud takes the
// instance back, the entry hears of it (instance-taken) and acquires
// another, so the pool stays full.
func TestServingWarmSpotEntryTakenIsReplaced(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	parallel(t)
	s := startStack(t, func(c *controlplane.Config) { c.Provider = controlplane.ProviderLocal })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ss := servingSpec("chat-warm-spot", func(ss *spec.ServiceSpec) { ss.MaxReplicas, ss.WarmPool = 2, 1 })
	if _, err := jobs.StartService(ctx, s.Client, ss); err != nil {
		t.Fatal(err)
	}
	warmOn := func(st inference.Status) *inference.ReplicaStatus {
		for i, r := range st.Replicas {
			if r.State == inference.ReplicaWarm && r.Instance != nil {
				return &st.Replicas[i]
			}
		}
		return nil
	}
	before := waitService(t, ctx, s, ss.ID, func(st inference.Status) bool { return st.Ready == 1 && warmOn(st) != nil })
	warm := warmOn(before)
	if warm.Instance.Market != string(capacity.Spot) || warm.StoppedPricePerHour != 0 {
		t.Fatalf("warm entry %+v; want one running on spot", warm)
	}
	if _, err := jobs.Interrupt(ctx, s.Client, warm.Instance.ID, time.Second); err != nil {
		t.Fatal(err)
	}
	after := waitService(t, ctx, s, ss.ID, func(st inference.Status) bool {
		w := warmOn(st)
		return w != nil && w.Instance.ID != warm.Instance.ID
	})
	if after.Ready != 1 {
		t.Errorf("%d ready after the warm entry was taken; want the serving replica untouched", after.Ready)
	}
	if err := jobs.StopService(ctx, s.Client, ss.ID); err != nil {
		t.Fatal(err)
	}
	waitNoInstances(t, ctx, s)
}
