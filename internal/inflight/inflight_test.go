package inflight

import (
	"context"
	"sync"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
)

// What a stop says it did comes from counting: the activities in flight
// when it began, by type, then those that finished on their own and
// those the stop timeout cut short.
func TestInFlightCountsWhatAStopDid(t *testing.T) {
	f := New()
	started := make(chan struct{}, 3)
	release := make(chan struct{})
	finishes := func(context.Context) error { started <- struct{}{}; <-release; return nil }
	isCut := func(context.Context) error { started <- struct{}{}; <-release; return context.Canceled }
	var wg sync.WaitGroup
	for _, a := range []struct {
		name string
		fn   func(context.Context) error
	}{{"Acquire", finishes}, {"Acquire", isCut}, {"Release", finishes}} {
		var suite testsuite.WorkflowTestSuite
		env := suite.NewTestActivityEnvironment()
		env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{f}})
		env.RegisterActivityWithOptions(a.fn, activity.RegisterOptions{Name: a.name})
		wg.Go(func() { _, _ = env.ExecuteActivity(a.name) })
	}
	for range 3 {
		<-started
	}
	n, what := f.Stop()
	if n != 3 || what != "Acquire 2, Release 1" {
		t.Errorf("in flight at the stop: %d (%s); want 3 (Acquire 2, Release 1)", n, what)
	}
	close(release)
	wg.Wait()
	if finished, handed, left := f.Stopped(); finished != 2 || handed != 1 || left != 0 {
		t.Errorf("finished %d, handed over %d, left %d; want 2, 1, 0", finished, handed, left)
	}
}
