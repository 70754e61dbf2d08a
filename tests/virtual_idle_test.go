package tests

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"refuel/controlplane"
	"refuel/pkg/capacity"
	"refuel/pkg/cloud/local"
)

// agentGoroutines counts the goroutines running refuel's or the Temporal
// SDK's code: the agent side of an instance. The embedded server's own
// goroutines are left out; it keeps a task queue loaded for a while after
// its last poller left, which is its cache, not an agent's leak.
func agentGoroutines() (int, string) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	var stacks []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "go.temporal.io/sdk/") || strings.Contains(g, "refuel/pkg/agent") || strings.Contains(g, "refuel/activities") || strings.Contains(g, "refuel/nodeagent") {
			count++
			stacks = append(stacks, g)
		}
	}
	return count, strings.Join(stacks, "\n\n")
}

func openFDs() int {
	entries, _ := os.ReadDir("/proc/self/fd")
	return len(entries)
}

// launchIdle acquires n on-demand instances from the stack's local cloud.
func launchIdle(t testing.TB, s *controlplane.Stack, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		inst, err := s.Provider.Acquire(context.Background(), capacity.Request{
			RunID: fmt.Sprintf("idle-%d", i), Attempt: 1, Offerings: []capacity.Offering{local.DefaultOfferings()[1]},
		})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, inst.ID)
	}
	return ids
}

// TestVirtualInstancesLeaveNothing launches idle virtual instances on a
// real stack and releases them: while up they share the worker's one
// connection (no file descriptor of their own: no listener, no socket),
// and once released none of their goroutines is left.
func TestVirtualInstancesLeaveNothing(t *testing.T) {
	s := virtualStack(t, nil)
	const n = 20
	time.Sleep(time.Second) // let the stack's own pollers settle
	goroutines, _ := agentGoroutines()
	fds := openFDs()

	ids := launchIdle(t, s, n)
	up, _ := agentGoroutines()
	if grew := openFDs() - fds; grew > 2 {
		t.Errorf("%d idle virtual instances opened %d file descriptors; want them to share the worker's", n, grew)
	}
	t.Logf("%d idle virtual instances: %.1f goroutines each on the agent side", n, float64(up-goroutines)/n)
	for _, id := range ids {
		if err := s.Provider.Release(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	if s.Virtual.Running() != 0 {
		t.Errorf("%d virtual agents still run after every instance was released", s.Virtual.Running())
	}
	deadline := time.Now().Add(10 * time.Second) // hang guard only
	for {
		left, stacks := agentGoroutines()
		if left <= goroutines {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d agent-side goroutines after the release, %d before the launch:\n%s", left, goroutines, stacks)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// BenchmarkIdleVirtualInstance measures what an idle virtual instance
// costs the worker (the embedded server included), for b.N instances
// launched at once and left idle for a few seconds: goroutines, heap and
// CPU per instance, and allocations per instance per second. Run with
// -benchtime 200x for 200 instances.
func BenchmarkIdleVirtualInstance(b *testing.B) {
	s := benchStack(b)
	time.Sleep(time.Second)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()
	b.ResetTimer()
	ids := launchIdle(b, s, b.N)
	b.StopTimer()
	time.Sleep(2 * time.Second) // start-up done: pollers waiting
	runtime.GC()
	var up runtime.MemStats
	runtime.ReadMemStats(&up)
	cpu0 := cpuTime()
	const idle = 5 * time.Second
	time.Sleep(idle)
	cpu := cpuTime() - cpu0
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	n := float64(b.N)
	b.ReportMetric(float64(runtime.NumGoroutine()-goroutines)/n, "goroutines/instance")
	b.ReportMetric(float64(int64(up.HeapInuse)-int64(before.HeapInuse))/n/1024, "heap-KiB/instance")
	b.ReportMetric(float64(after.Mallocs-up.Mallocs)/n/idle.Seconds(), "allocs/instance/s")
	b.ReportMetric(cpu.Seconds()*1000/n/idle.Seconds(), "cpu-ms/instance/s")
	for _, id := range ids {
		_ = s.Provider.Release(context.Background(), id)
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchStack is startStack's virtual stack for a benchmark.
func benchStack(b *testing.B) *controlplane.Stack {
	b.Helper()
	cfg := controlplane.Config{
		InMemory: true, DataDir: b.TempDir(), FrontendAddr: "127.0.0.1:0", UIAddr: "-", MetricsAddr: "-",
		DemoStepTime: demoStepTime, JanitorEvery: -1, Instances: controlplane.InstancesVirtual,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := controlplane.Start(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Stop)
	return s
}
