package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/metadata"
)

// fakeVirtual is a virtual node agent: a goroutine that watches its
// instance's metadata in-process, as the real one does, until killed.
type fakeVirtual struct {
	launch  AgentLaunch
	noticed chan metadata.InstanceAction
	stop    chan struct{}
	once    sync.Once
	done    chan struct{}
}

// virtualAgents starts fakeVirtuals and keeps every one it started; a
// non-nil err fails every start.
type virtualAgents struct {
	mu     sync.Mutex
	agents map[string]*fakeVirtual
	err    error
}

func (v *virtualAgents) start(_ context.Context, l AgentLaunch) (VirtualAgent, error) {
	if v.err != nil {
		return nil, v.err
	}
	a := &fakeVirtual{launch: l, noticed: make(chan metadata.InstanceAction, 1), stop: make(chan struct{}), done: make(chan struct{})}
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
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.agents == nil {
		v.agents = map[string]*fakeVirtual{}
	}
	v.agents[l.InstanceID] = a
	return a, nil
}

func (v *virtualAgents) agent(id string) *fakeVirtual {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.agents[id]
}

func (a *fakeVirtual) Kill() {
	a.once.Do(func() { close(a.stop) })
	<-a.done
}

func (a *fakeVirtual) Done() <-chan struct{} { return a.done }

func (a *fakeVirtual) killed() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

func newVirtualCloud(t *testing.T, agents *virtualAgents) (*Cloud, string) {
	t.Helper()
	dir := t.TempDir()
	c, err := New(Config{LauncherConfig: LauncherConfig{StartVirtual: agents.start, Dir: dir}})
	if err != nil {
		t.Fatal(err)
	}
	return c, dir
}

// openFiles counts this process's file descriptors: listeners included.
func openFiles(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd here")
	}
	return len(entries)
}

// TestVirtualInstances launches virtual instances, serves one a notice and
// takes it at the end of the grace, releases another and closes the cloud:
// no endpoint is served, the notice reaches the agent in-process, every
// agent is killed and nothing of any is left (goroutines, timers, files).
func TestVirtualInstances(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	agents := &virtualAgents{}
	c, dir := newVirtualCloud(t, agents)
	files := openFiles(t)
	var insts []capacity.Instance
	for i := range 20 {
		inst, err := c.Acquire(ctx, request("run-v", i, DefaultOfferings()[0]))
		if err != nil {
			t.Fatal(err)
		}
		insts = append(insts, inst)
	}
	if n := openFiles(t) - files; n != 0 {
		t.Errorf("20 virtual instances hold %d more files; want none (no listener, no log file)", n)
	}
	a := agents.agent(insts[0].ID)
	if a.launch.MetadataEndpoint != "" || a.launch.Metadata == nil || a.launch.TaskQueue != TaskQueueFor(insts[0].ID) {
		t.Fatalf("launch %+v; want the metadata service itself, no endpoint, the instance's queue", a.launch)
	}
	if _, err := os.Stat(a.launch.Dir); err != nil {
		t.Errorf("scratch directory: %v", err)
	}

	if _, err := c.Interrupt(insts[0].ID, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-a.noticed:
		if n.Action != "terminate" {
			t.Errorf("notice %+v; want terminate", n)
		}
	case <-time.After(10 * time.Second): // hang guard only
		t.Fatal("the notice did not reach the virtual agent")
	}
	if _, state, _ := c.Describe(ctx, insts[0].ID); state != capacity.StateInterrupted || a.killed() {
		t.Errorf("under notice: %s, killed %v; want interrupted and alive", state, a.killed())
	}
	waitTerminated(t, c, insts[0].ID)
	if !a.killed() {
		t.Error("the instance is terminated but its agent was not killed")
	}

	if err := c.Release(ctx, insts[1].ID); err != nil {
		t.Fatal(err)
	}
	if b := agents.agent(insts[1].ID); !b.killed() {
		t.Error("a released instance's agent still runs")
	}
	if _, err := os.Stat(filepath.Join(dir, insts[1].ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a released instance's scratch directory: %v; want it removed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, inst := range insts {
		if !agents.agent(inst.ID).killed() {
			t.Errorf("agent of %s survived Close", inst.ID)
		}
	}
	if c.launcher.Running() != 0 {
		t.Errorf("launcher holds %d machines after Close", c.launcher.Running())
	}
}

func waitTerminated(t *testing.T, c *Cloud, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second) // hang guard only
	for {
		_, state, _ := c.Describe(context.Background(), id)
		if state == capacity.StateTerminated {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %s is %s after its notice ran out; want terminated", id, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestVirtualStartFailureIsAnInitFailure(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	agents := &virtualAgents{err: errors.New("no connection")}
	c, dir := newVirtualCloud(t, agents)
	defer c.Close()
	_, err := c.Acquire(context.Background(), request("run-f", 1, DefaultOfferings()[0]))
	if capacity.ClassOf(err) != capacity.InitFailure {
		t.Fatalf("error %v; want init-failure", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a failed start left %d entries in the instances' directory", len(entries))
	}
}

func TestLauncherNeedsAWayToStartAgents(t *testing.T) {
	if _, err := NewLauncher(LauncherConfig{Dir: t.TempDir()}); err == nil {
		t.Error("a launcher without AgentCommand or StartVirtual was accepted")
	}
}

// TestTakenInstancesAreToldOnce: an instance whose notice runs out is
// taken, and OnTaken hears of it once, after its agent has ended, whether
// the notice's timer or a Stop after the notice ran out ends it. An
// instance released before its notice ran out, or never noticed, was
// given back, not taken.
func TestTakenInstancesAreToldOnce(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	agents := &virtualAgents{}
	var mu sync.Mutex
	told := map[string]int{}
	alive := map[string]bool{}
	toldCh := make(chan string, 10)
	c, err := New(Config{LauncherConfig: LauncherConfig{StartVirtual: agents.start, Dir: t.TempDir(), OnTaken: func(id string) {
		mu.Lock()
		told[id]++
		alive[id] = !agents.agent(id).killed()
		mu.Unlock()
		toldCh <- id
	}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var ids []string
	for i := range 4 {
		inst, err := c.Acquire(ctx, request("run-t", i, DefaultOfferings()[0]))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, inst.ID)
	}
	noGrace, released, stoppedLate, untouched := ids[0], ids[1], ids[2], ids[3]
	for id, grace := range map[string]time.Duration{noGrace: 0, released: time.Hour, stoppedLate: 50 * time.Millisecond} {
		if _, err := c.Interrupt(id, grace); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Release(ctx, released); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the late one's notice runs out
	if err := c.Release(ctx, stoppedLate); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-toldCh:
		case <-time.After(10 * time.Second): // hang guard only
			t.Fatal("OnTaken did not hear of both taken instances")
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{noGrace: 1, stoppedLate: 1}
	for _, id := range ids {
		if told[id] != want[id] {
			t.Errorf("%s told %d times; want %d (taken without grace %s, released %s, stopped after its notice %s, untouched %s)",
				id, told[id], want[id], noGrace, released, stoppedLate, untouched)
		}
		if alive[id] {
			t.Errorf("%s was told taken while its agent still ran", id)
		}
	}
}
