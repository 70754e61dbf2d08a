package sim

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/local"
	"refuel/pkg/cloud/metadata"
)

// virtualAgent is a virtual node agent: it watches its instance's
// metadata in-process until killed, noting the notice it saw.
type virtualAgent struct {
	stop, done chan struct{}
	once       sync.Once
	noticed    chan metadata.InstanceAction
}

func startVirtual(agents chan<- *virtualAgent) func(context.Context, local.AgentLaunch) (local.VirtualAgent, error) {
	return func(_ context.Context, l local.AgentLaunch) (local.VirtualAgent, error) {
		a := &virtualAgent{stop: make(chan struct{}), done: make(chan struct{}), noticed: make(chan metadata.InstanceAction, 1)}
		go func() {
			defer close(a.done)
			for {
				action, _, changed := l.Metadata.Watch()
				if action != nil {
					a.noticed <- *action
					<-a.stop
					return
				}
				select {
				case <-a.stop:
					return
				case <-changed:
				}
			}
		}()
		agents <- a
		return a, nil
	}
}

func (a *virtualAgent) Kill() {
	a.once.Do(func() { close(a.stop) })
	<-a.done
}

func (a *virtualAgent) Done() <-chan struct{} { return a.done }

// TestStockDropReachesVirtualAgents drops a pool's stock under two virtual
// instances: the newest gets the notice in-process and is taken with its
// agent after the window, the other keeps running until Close, and nothing
// of either outlives the sim.
func TestStockDropReachesVirtualAgents(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	agents := make(chan *virtualAgent, 2)
	c, err := New(Config{
		Launcher:     local.LauncherConfig{StartVirtual: startVirtual(agents), Dir: t.TempDir()},
		Pools:        []PoolConfig{{Pool: v100A, Spot: points(2, 1)}},
		NoticeWindow: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	spot := []capacity.Offering{{Provider: ProviderName, InstanceType: v100A.InstanceType, Zone: v100A.Zone, Market: capacity.Spot, PricePerHour: 1}}
	older, err := c.Acquire(context.Background(), capacity.Request{RunID: "run-1", Offerings: spot})
	if err != nil {
		t.Fatal(err)
	}
	first := <-agents
	newer, err := c.Acquire(context.Background(), capacity.Request{RunID: "run-2", Offerings: spot})
	if err != nil {
		t.Fatal(err)
	}
	second := <-agents
	if st, _ := c.Status(newer.ID); st.State != capacity.StateRunning || st.MetadataEndpoint != "" {
		t.Fatalf("virtual instance: %s, endpoint %q; want running, no endpoint", st.State, st.MetadataEndpoint)
	}

	c.Advance(1)
	select {
	case n := <-second.noticed:
		if n.Action != "terminate" {
			t.Errorf("notice %+v; want terminate", n)
		}
	case <-time.After(10 * time.Second): // hang guard only
		t.Fatal("the stock drop's notice did not reach the newest instance's agent")
	}
	deadline := time.Now().Add(10 * time.Second) // hang guard only
	for state(t, c, newer.ID) != capacity.StateTerminated {
		if time.Now().After(deadline) {
			t.Fatalf("newest instance %s after its notice ran out; want terminated", state(t, c, newer.ID))
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-second.Done():
	default:
		t.Error("the taken instance's agent still runs")
	}
	if st, _ := c.Status(newer.ID); st.Reason != ReasonSpotTermination {
		t.Errorf("taken for %v; want a spot termination", st.Reason)
	}
	if state(t, c, older.ID) != capacity.StateRunning {
		t.Errorf("older instance %s; want running: the stock still holds it", state(t, c, older.ID))
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-first.Done():
	default:
		t.Error("an agent survived Close")
	}
}
