package sim

import (
	"context"
	"errors"
	"testing"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/trace"
)

// TestStopAndStart walks an instance through each stop and start the sim
// answers, from each state it can be in.
func TestStopAndStart(t *testing.T) {
	ctx := context.Background()
	c, err := New(Config{Pools: []PoolConfig{
		{Pool: Pool{Zone: "z1", InstanceType: "g5.xlarge"}, Spot: &trace.Trace{Gap: 10 * time.Minute, Points: []int{1}}},
	}, StartTime: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	launch := func(token string, m capacity.Market) string {
		st, err := c.Launch(ctx, LaunchRequest{Token: token, Offers: []Offer{{Pool: Pool{Zone: "z1", InstanceType: "g5.xlarge"}, Market: m}},
			Tags: map[string]string{capacity.TagManagedBy: capacity.ManagedBy}, Wait: true})
		if err != nil {
			t.Fatal(err)
		}
		return st.ID
	}
	od, spot := launch("od", capacity.OnDemand), launch("spot", capacity.Spot)
	var ns *capacity.NotStoppableError
	steps := []struct {
		name string
		do   func() error
		// want is the on-demand instance's state after the step, and
		// wantErr what the step must fail with, if anything.
		want    capacity.State
		wantErr func(error) bool
	}{
		{"start a running one: nothing changes", func() error { _, err := c.Start(ctx, od); return err }, capacity.StateRunning, nil},
		{"stop it", func() error { return c.Stop(ctx, od) }, capacity.StateStopped, nil},
		{"stop it again: nothing changes", func() error { return c.Stop(ctx, od) }, capacity.StateStopped, nil},
		{"start it", func() error { _, err := c.Start(ctx, od); return err }, capacity.StateRunning, nil},
		{"stop a spot one: refused", func() error { return c.Stop(ctx, spot) }, capacity.StateRunning, func(err error) bool { return errors.As(err, &ns) }},
		{"stop it and release it", func() error {
			if err := c.Stop(ctx, od); err != nil {
				return err
			}
			return c.Release(ctx, od)
		}, capacity.StateTerminated, nil},
		{"stop a terminated one: not found", func() error { return c.Stop(ctx, od) }, capacity.StateTerminated, capacity.IsNotFound},
		{"start a terminated one: not found", func() error { _, err := c.Start(ctx, od); return err }, capacity.StateTerminated, capacity.IsNotFound},
	}
	for _, s := range steps {
		err := s.do()
		switch {
		case s.wantErr == nil && err != nil:
			t.Fatalf("%s: %v", s.name, err)
		case s.wantErr != nil && !s.wantErr(err):
			t.Fatalf("%s: %v; not the error wanted", s.name, err)
		}
		if _, st, _ := c.Describe(ctx, od); st != s.want {
			t.Fatalf("%s: %s; want %s", s.name, st, s.want)
		}
	}
}

// TestStoppedIsListedApart: List leaves a stopped instance out,
// ListStopped finds it, and the sim prices it at its volume.
func TestStoppedIsListedApart(t *testing.T) {
	ctx := context.Background()
	c, err := New(Config{Pools: []PoolConfig{{Pool: Pool{Zone: "z1", InstanceType: "g5.xlarge"}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	st, err := c.Launch(ctx, LaunchRequest{Token: "a", Offers: []Offer{{Pool: Pool{Zone: "z1", InstanceType: "g5.xlarge"}, Market: capacity.OnDemand}},
		Tags: map[string]string{capacity.TagManagedBy: capacity.ManagedBy, capacity.TagRun: "svc"}, Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(ctx, st.ID); err != nil {
		t.Fatal(err)
	}
	running, _ := c.List(ctx, nil)
	stopped, _ := c.ListStopped(ctx, map[string]string{capacity.TagRun: "svc"})
	other, _ := c.ListStopped(ctx, map[string]string{capacity.TagRun: "other"})
	if len(running) != 0 || len(stopped) != 1 || stopped[0].ID != st.ID || len(other) != 0 {
		t.Errorf("running %v, stopped %v, stopped of another run %v; want only %s stopped", running, stopped, other, st.ID)
	}
	if p := c.StoppedPricePerHour(st.Offering); p != DefaultVolumePricePerHour {
		t.Errorf("stopped price %g; want the default volume's %g", p, DefaultVolumePricePerHour)
	}
}
