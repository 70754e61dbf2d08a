package activities

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

// clock is a settable time for the stock logs.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestStockLogsSeeWhatRunsSaw(t *testing.T) {
	c := &clock{time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	path := filepath.Join(t.TempDir(), "stock-logs.json")
	l := &StockLogs{Path: path, Now: c.now}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Tries find no stock for 40 minutes, then one finds some; an
	// instance held 3 hours is preempted, another given back after 1.
	must(l.Tried("a", false))
	c.t = c.t.Add(10 * time.Minute)
	must(l.Tried("a", false))
	if h := l.History([]string{"a"})[0]; h.Last || h.Since != 10*time.Minute || h.Out.Count != 0 {
		t.Fatalf("while tries find none: last %v since %s, %d outages ended; want out of stock for 10m", h.Last, h.Since, h.Out.Count)
	}
	c.t = c.t.Add(30 * time.Minute)
	must(l.Tried("a", true))
	must(l.Held("a", 3*time.Hour, true))
	must(l.Held("a", time.Hour, false))

	again := &StockLogs{Path: path, Now: c.now}
	must(again.Load())
	h := again.History([]string{"a", "never-tried"})
	a := h[0]
	if a.Out.Count != 1 || a.Out.Total != 40*time.Minute || a.In.Count != 1 || a.In.Total != 3*time.Hour || a.Since != 0 {
		t.Errorf("after a reload: %d outages (%s), %d stretches in stock ended (%s), since %s; want 1 (40m), 1 (3h), none open",
			a.Out.Count, a.Out.Total, a.In.Count, a.In.Total, a.Since)
	}
	var atRisk time.Duration
	for _, d := range a.In.Time {
		atRisk += d
	}
	if atRisk != 4*time.Hour || a.FitIn != a.In {
		t.Errorf("time in stock at risk %s; want 4h: the hour given back counts too, and the fit is current", atRisk)
	}
	if h[1].Since != 0 || h[1].In.Count != 0 {
		t.Errorf("an offering never tried: %+v; want nothing known", h[1])
	}
}

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

func TestCapacityActivitiesFeedTheStockLogs(t *testing.T) {
	spot := capacity.Offering{Provider: "fake", InstanceType: "gpu", Zone: "a", Market: capacity.Spot, GPUs: 1, PricePerHour: 1}
	p := &stocked{}
	logs := &StockLogs{}
	a := &Capacity{Providers: []capacity.Provider{p}, Stock: logs}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	if _, err := env.ExecuteActivity(a.Acquire, capacity.Request{RunID: "r", Attempt: 1, Offerings: []capacity.Offering{spot}}); err == nil {
		t.Fatal("acquired out of stock")
	}
	if h := logs.History([]string{spot.Key()})[0]; h.Last || h.Since == 0 {
		t.Fatalf("after a try found none: %+v; want out of stock", h)
	}
	p.in = true
	v, err := env.ExecuteActivity(a.Acquire, capacity.Request{RunID: "r", Attempt: 2, Offerings: []capacity.Offering{spot}})
	if err != nil {
		t.Fatal(err)
	}
	var inst capacity.Instance
	if err := v.Get(&inst); err != nil {
		t.Fatal(err)
	}
	if _, err := env.ExecuteActivity(a.Release, ReleaseInput{Instance: inst, Reason: ReleasePreempted}); err != nil {
		t.Fatal(err)
	}
	h := logs.History([]string{spot.Key()})[0]
	if h.Out.Count != 1 || h.In.Count != 1 || h.In.Total < 2*time.Hour {
		t.Errorf("after a try found stock and the instance was preempted 2h on: %d outages, %d stretches in stock (%s); want 1, 1 (2h)", h.Out.Count, h.In.Count, h.In.Total)
	}
}
