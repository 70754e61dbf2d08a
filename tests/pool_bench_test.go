package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"refuel/workflows/capacitypool"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"refuel/controlplane"
	"refuel/jobs"
	"refuel/pkg/admission"
	"refuel/pkg/pool"
	"refuel/pkg/spec"
	"refuel/workflows"
)

// benchHolderQueue is where the holders of the pool benchmark run.
const benchHolderQueue = "pool-bench-holders"

// benchHolder stands for a run or a service as the pool sees one: a
// workflow its grants and yields reach. It takes grants and does
// nothing; it answers a yield at once, as a run that has released its
// instance does, so what is measured is the pool.
func benchHolder(ctx workflow.Context) error {
	granted := workflow.GetSignalChannel(ctx, workflows.SignalCapacityGranted)
	yields := workflow.GetSignalChannel(ctx, workflows.SignalYield)
	for {
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(granted, func(c workflow.ReceiveChannel, _ bool) {
			var a admission.Allocation
			c.Receive(ctx, &a)
		})
		sel.AddReceive(yields, func(c workflow.ReceiveChannel, _ bool) {
			var y workflows.YieldRequest
			c.Receive(ctx, &y)
			_ = workflow.SignalExternalWorkflow(ctx, workflows.PoolWorkflowID, "", workflows.SignalPoolYielded, workflows.PoolRef{ID: y.ID}).Get(ctx, nil)
		})
		sel.Select(ctx)
		if ctx.Err() != nil {
			return nil
		}
	}
}

// BenchmarkPoolSignals measures the signals a second the CapacityPool
// absorbs on the real embedded server: n requests sent at once (by 32
// clients) to a pool of 500 base machines and a burst pool capped at 250,
// then a priority change for each, then every request released again
// (which admits the waiting ones), each phase timed from the first signal
// sent to the pool's status showing every one taken in. The pool
// continues as new every 2,000 events; the benchmark reports the rates,
// the carry handed on with all n requests in it, and the longest
// generation's history.
//
//	make bench-pool   # or: go test ./tests -run '^$' -bench BenchmarkPoolSignals -benchtime 1x
func BenchmarkPoolSignals(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("requests=%d", n), func(b *testing.B) {
			for b.Loop() {
				benchPool(b, n)
			}
		})
	}
}

func benchPool(b *testing.B, n int) {
	cfg := pool.Config{
		Base:  pool.BaseGroup{Name: "dc", Counts: []pool.BaseCount{{InstanceType: "gpu.1x", GPUs: 1, Count: 500, Zone: "dc", PricePerHour: 0.4}}},
		Burst: testPools().Burst,
	}
	cfg.Burst[0].MaxInstances = 250
	cfg.Normalize()
	self := b.TempDir()
	s, err := controlplane.Start(context.Background(), controlplane.Config{
		InMemory: true, DataDir: self, FrontendAddr: "127.0.0.1:0", UIAddr: "-", MetricsAddr: "-",
		Provider: controlplane.ProviderLocal, Pools: &cfg, PoolMaxHistory: 2000, JanitorEvery: -1,
		Logger: zaptest.NewLogger(b, zaptest.Level(zap.ErrorLevel)),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Stop()
	ctx := context.Background()
	holders := worker.New(s.Client, benchHolderQueue, worker.Options{})
	holders.RegisterWorkflowWithOptions(benchHolder, workflow.RegisterOptions{Name: "PoolBenchHolder"})
	if err := holders.Start(); err != nil {
		b.Fatal(err)
	}
	defer holders.Stop()

	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("bench-%05d", i)
	}
	b.StopTimer()
	forEach(b, ids, func(id string) error {
		_, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: benchHolderQueue}, "PoolBenchHolder")
		return err
	})
	b.StartTimer()

	// The server's own rate: as many signals to one holder, which takes
	// them and does nothing.
	start := time.Now()
	forEach(b, ids, func(string) error {
		return s.Client.SignalWorkflow(ctx, ids[0], "", "nothing", nil)
	})
	raw := time.Since(start)
	b.ReportMetric(float64(n)/raw.Seconds(), "raw-signals/s")
	b.Logf("%d signals to a workflow that does nothing: sent in %s (%.0f/s)", n, raw.Round(time.Millisecond), float64(n)/raw.Seconds())

	var longest atomic.Int64
	watch := func(done func(capacitypool.Status) bool) {
		b.Helper()
		for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
			st, err := jobs.PoolStatus(ctx, s.Client)
			if err == nil {
				longest.Store(max(longest.Load(), st.History))
				if done(st) {
					return
				}
			}
			if time.Now().After(deadline) {
				b.Fatalf("the pool did not take every signal in within 10 minutes (last status error %v)", err)
			}
		}
	}
	// phase sends the pool one signal for each id, then the signal last
	// (if any), and waits until done.
	phase := func(what, signal string, arg func(id string) any, last any, done func(capacitypool.Status) bool) time.Time {
		start := time.Now()
		forEach(b, ids, func(id string) error {
			return s.Client.SignalWorkflow(ctx, workflows.PoolWorkflowID, "", signal, arg(id))
		})
		if last != nil {
			if err := s.Client.SignalWorkflow(ctx, workflows.PoolWorkflowID, "", signal, last); err != nil {
				b.Fatal(err)
			}
		}
		sent := time.Since(start)
		watch(done)
		took := time.Since(start)
		b.ReportMetric(float64(n)/took.Seconds(), what+"/s")
		b.Logf("%d %s: sent in %s (%.0f/s), taken in by %s (%.0f/s)", n, what, sent.Round(time.Millisecond), float64(n)/sent.Seconds(), took.Round(time.Millisecond), float64(n)/took.Seconds())
		return start
	}
	start = phase("requests", workflows.SignalPoolRequest, func(id string) any {
		return admission.Request{ID: id, Kind: admission.Training, Owner: id, Team: "bench", Priority: 50, Tier: spec.TierFlexible, Resources: spec.Resources{GPUs: 1}}
	}, nil, func(st capacitypool.Status) bool { return len(st.Waiting)+len(st.Running) == n })
	watch(func(st capacitypool.Status) bool { return st.Delivering == 0 })
	st, _ := jobs.PoolStatus(ctx, s.Client)
	granted := time.Since(start)
	b.ReportMetric(float64(len(st.Running))/granted.Seconds(), "grants/s")
	b.Logf("after the requests: %d running (every grant delivered by %s, %.0f/s), %d waiting, generation %d",
		len(st.Running), granted.Round(time.Millisecond), float64(len(st.Running))/granted.Seconds(), len(st.Waiting), st.Generation)
	// A priority signal for each (the same priority, so the queue keeps
	// its order): enough events for the pool to continue as new with
	// every request in it. Taken in once the last one, which raises a
	// running request, shows.
	phase("priorities", workflows.SignalPoolPriority, func(id string) any { return workflows.PoolPriority{ID: id, Priority: 50} },
		workflows.PoolPriority{ID: st.Running[0].Request.ID, Priority: 51},
		func(st capacitypool.Status) bool {
			return slices.ContainsFunc(st.Running, func(a admission.Allocation) bool { return a.Request.Priority == 51 })
		})
	carry := carrySize(b, s.Client)
	st, _ = jobs.PoolStatus(ctx, s.Client)
	answer, err := json.Marshal(st)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("generation %d carries %d KiB; the status query answers %d KiB", st.Generation, carry>>10, len(answer)>>10)
	phase("releases", workflows.SignalPoolRelease, func(id string) any { return workflows.PoolRef{ID: id} }, nil,
		func(st capacitypool.Status) bool { return len(st.Waiting)+len(st.Running) == 0 })
	st, _ = jobs.PoolStatus(ctx, s.Client)
	b.ReportMetric(float64(longest.Load()), "events/generation")
	b.ReportMetric(float64(carry), "carry-bytes")
	b.Logf("generations %d; longest history seen %d events", st.Generation+1, longest.Load())
}

// carrySize is the size of the input the pool's latest generation
// started with (0 for the first, which started with the pools file only).
func carrySize(b *testing.B, c client.Client) int {
	b.Helper()
	it := c.GetWorkflowHistory(context.Background(), workflows.PoolWorkflowID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return 0
	}
	ev, err := it.Next()
	if err != nil {
		b.Fatal(err)
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs.GetContinuedExecutionRunId() == "" {
		return 0
	}
	return len(attrs.GetInput().GetPayloads()[0].GetData())
}

// forEach runs f for every id on 32 goroutines.
func forEach(b *testing.B, ids []string, f func(string) error) {
	b.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	next := make(chan string)
	for range 32 {
		wg.Go(func() {
			for id := range next {
				if err := f(id); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", id, err))
					mu.Unlock()
				}
			}
		})
	}
	for _, id := range ids {
		next <- id
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		b.Fatalf("%d of %d failed, first: %v", len(errs), len(ids), slices.Min([]string{errs[0].Error()}))
	}
}
