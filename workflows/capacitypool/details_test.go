package capacitypool

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"refuel/pkg/admission"
	"refuel/pkg/spec"
)

// The pool's details say what is in use on base and in each burst pool,
// and why each request of the queue waits.
func TestPoolDetailsSayWhyEachWaits(t *testing.T) {
	now := time.Date(2026, 4, 27, 18, 0, 0, 0, time.UTC)
	s := admission.New(poolConfig())
	s.Rules = admission.GangRules
	req := func(id string, prio, gpus int, at time.Duration) admission.Request {
		return admission.Request{ID: id, Owner: id, Kind: admission.Training, Priority: prio, Tier: spec.TierFlexible,
			Resources: spec.Resources{GPUs: gpus}, EnqueuedAt: now.Add(-at)}
	}
	for _, r := range []admission.Request{req("on-base", 90, 1, 9*time.Minute), req("on-burst", 80, 1, 8*time.Minute)} {
		if err := s.Enqueue(r, r.EnqueuedAt); err != nil {
			t.Fatal(err)
		}
	}
	s.Admit(now, nil)
	for _, r := range []admission.Request{req("next", 70, 1, 5*time.Minute), req("behind", 60, 1, 4*time.Minute), req("too-big", 50, 8, 3*time.Minute)} {
		if err := s.Enqueue(r, r.EnqueuedAt); err != nil {
			t.Fatal(err)
		}
	}
	st := Status{Running: s.Running, BaseGPUs: 1, FreeBaseGPUs: 0, Base: 1, Burst: 1}
	for _, r := range s.Queue(now) {
		st.Waiting = append(st.Waiting, QueuedRequest{Request: r, EffectivePriority: s.Effective(r, now)})
	}
	explainWaits(s, st)
	got := poolDetails(s, st, now)
	for _, want := range []string{
		"**base** 1 of 1 GPUs in use (1 instances) · **burst** 1 instances · **3 waiting**",
		"burst pools: cloud 1 of 1",
		"1. next (training, priority 70 ranked at ",
		"waiting 5m0s): next to be admitted: waits for 1 GPU to come free on base (0 GPUs free)",
		"2. behind (training, priority 60",
		"): behind next, admitted first",
		"3. too-big (", "8 GPUs", "fits no base machine and no burst pool its tier (flexible) may use",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("details lack %q:\n%s", want, got)
		}
	}
}

// BenchmarkPoolDetails is the cost of one refresh of the pool's details
// with n requests queued, which poolDetailsEvery bounds.
//
//	go test ./workflows -run '^$' -bench BenchmarkPoolDetails
func BenchmarkPoolDetails(b *testing.B) {
	for _, n := range []int{100, 5000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			now := time.Date(2026, 4, 27, 18, 0, 0, 0, time.UTC)
			s := admission.New(poolConfig())
			for i := range n {
				r := admission.Request{ID: "r" + strconv.Itoa(i), Owner: "r" + strconv.Itoa(i), Kind: admission.Training, Priority: i % 100,
					Tier: spec.TierFlexible, Resources: spec.Resources{GPUs: 1}, EnqueuedAt: now.Add(-time.Duration(i) * time.Second)}
				if err := s.Enqueue(r, r.EnqueuedAt); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				st := Status{Running: s.Running}
				for _, r := range s.Queue(now) {
					st.Waiting = append(st.Waiting, QueuedRequest{Request: r, EffectivePriority: s.Effective(r, now)})
				}
				explainWaits(s, st)
				_ = poolDetails(s, st, now)
			}
		})
	}
}
