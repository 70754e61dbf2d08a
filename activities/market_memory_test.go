package activities

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"gocloud.dev/blob/memblob"

	"refuel/pkg/capacity"
	"refuel/pkg/marketmem"
	"refuel/pkg/policy"
	"refuel/pkg/spec"
)

// stocked is a provider whose spot stock is out until in is set.
type stocked struct {
	describer
	in bool
}

func (s *stocked) Acquire(_ context.Context, req capacity.Request) (capacity.Instance, error) {
	o := req.Offerings[0]
	if !s.in {
		return capacity.Instance{}, capacity.NewError(capacity.NoCapacity, o, "InsufficientInstanceCapacity", "none")
	}
	return capacity.Instance{ID: "i-1", Offering: o, LaunchedAt: time.Now().Add(-2 * time.Hour)}, nil
}

func (s *stocked) Offerings(context.Context, spec.Resources) ([]capacity.Offering, error) {
	return nil, nil
}

// The capacity activities of two workers of one deployment feed one
// memory: an outage one worker's Acquire found, the other's ends, and
// what the instance taught on release is what both read.
func TestCapacityActivitiesFeedTheMarketMemory(t *testing.T) {
	spot := capacity.Offering{Provider: "fake", InstanceType: "gpu", Zone: "a", Market: capacity.Spot, GPUs: 1, PricePerHour: 1}
	p := &stocked{}
	// Each worker reads the other's lessons at every call, rather than
	// within the default 10s.
	bucket, fresh := memblob.OpenBucket(nil), marketmem.Options{Fresh: time.Nanosecond}
	one := &Capacity{Providers: []capacity.Provider{p}, Memory: marketmem.New(bucket, "test", fresh)}
	two := &Capacity{Providers: []capacity.Provider{p}, Memory: marketmem.New(bucket, "test", fresh)}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(one)
	if _, err := env.ExecuteActivity(one.Acquire, capacity.Request{RunID: "r", Attempt: 1, Offerings: []capacity.Offering{spot}}); err == nil {
		t.Fatal("acquired out of stock")
	}
	history := func(a *Capacity) policy.Availability {
		t.Helper()
		h, err := a.StockHistory(context.Background(), []string{spot.Key()})
		if err != nil {
			t.Fatal(err)
		}
		return h[0]
	}
	if h := history(two); h.Last || h.Since == 0 {
		t.Fatalf("the other worker, after a try found none: %+v; want out of stock", h)
	}
	p.in = true
	other := suite.NewTestActivityEnvironment()
	other.RegisterActivity(two)
	v, err := other.ExecuteActivity(two.Acquire, capacity.Request{RunID: "r", Attempt: 2, Offerings: []capacity.Offering{spot}})
	if err != nil {
		t.Fatal(err)
	}
	var inst capacity.Instance
	if err := v.Get(&inst); err != nil {
		t.Fatal(err)
	}
	lesson := policy.CheckpointLog{Held: 2 * time.Hour, Preemptions: 1, Writes: 4, WriteTime: 4 * time.Second}
	if _, err := other.ExecuteActivity(two.Release, ReleaseInput{Instance: inst, Reason: ReleasePreempted, Log: &lesson}); err != nil {
		t.Fatal(err)
	}
	h := history(one)
	if h.Out.Count != 1 || h.In.Count != 1 || h.In.Total < 2*time.Hour {
		t.Errorf("after a try found stock and the instance was preempted 2h on: %d outages, %d stretches in stock (%s); want 1, 1 (2h)", h.Out.Count, h.In.Count, h.In.Total)
	}
	if got, err := one.PoolCheckpointLog(context.Background(), spot); err != nil || got != lesson {
		t.Errorf("the pool's log read by the other worker: %+v, %v; want %+v", got, err, lesson)
	}
}

// An instance lost to the control plane or to a base machine gone silent
// teaches nothing about the market.
func TestLossesThatTeachNothing(t *testing.T) {
	spot := capacity.Offering{Provider: "fake", InstanceType: "gpu", Zone: "a", Market: capacity.Spot, GPUs: 1, PricePerHour: 1}
	for _, cause := range []string{string(capacity.ControlPlane), string(capacity.NodeLost)} {
		t.Run(cause, func(t *testing.T) {
			a := &Capacity{Providers: []capacity.Provider{&stocked{in: true}}, Memory: marketmem.New(memblob.OpenBucket(nil), "test", marketmem.Options{})}
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestActivityEnvironment()
			env.RegisterActivity(a)
			inst := capacity.Instance{ID: "i-1", Offering: spot, LaunchedAt: time.Now().Add(-time.Hour)}
			lesson := policy.CheckpointLog{Held: time.Hour, Preemptions: 1}
			if _, err := env.ExecuteActivity(a.Release, ReleaseInput{Instance: inst, Reason: ReleaseReason(cause), Log: &lesson}); err != nil {
				t.Fatal(err)
			}
			v, err := a.Memory.View(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(v.Stock) != 0 || len(v.Pools) != 0 {
				t.Errorf("a loss of cause %s taught %+v; want nothing", cause, v)
			}
		})
	}
}

// scoring is a provider that gives placement scores, or fails to.
type scoring struct {
	stocked
	scores map[string]int
	err    error
	asked  []capacity.Offering
}

func (s *scoring) PlacementScores(_ context.Context, offerings []capacity.Offering) (map[string]int, error) {
	s.asked = offerings
	return s.scores, s.err
}

// The stock history carries each offering's placement score where its
// provider gives one, beside what runs saw of its stock.
func TestStockHistoryCarriesPlacementScores(t *testing.T) {
	a := capacity.Offering{Provider: "fake", InstanceType: "gpu", Zone: "a", Market: capacity.Spot}
	b := a
	b.Zone = "b"
	p := &scoring{scores: map[string]int{a.Key(): 8}}
	c := &Capacity{Providers: []capacity.Provider{p}}
	h, err := c.StockHistory(context.Background(), []string{a.Key(), b.Key()})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.asked) != 2 || p.asked[1] != b {
		t.Errorf("asked for %v; want both offerings", p.asked)
	}
	if h[0].PlacementScore != 8 || h[1].PlacementScore != 0 {
		t.Errorf("scores %d, %d; want 8 and none", h[0].PlacementScore, h[1].PlacementScore)
	}
}
