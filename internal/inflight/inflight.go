// Package inflight counts the activities a worker runs, by type, so
// that a stopping worker can say what its stop did: which activities
// finished on their own and which the stop timeout handed to another
// worker.
package inflight

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
)

// Counter counts the activities a worker is running, by type, and how
// those that ended while it stopped ended: what a stop says it did. It
// is a worker interceptor.
type Counter struct {
	interceptor.WorkerInterceptorBase

	mu       sync.Mutex
	running  map[string]int
	stopping bool
	finished int // ended on their own while the worker stopped
	handed   int // cancelled by the stop: another worker retries them
}

// New is a Counter with nothing counted yet.
func New() *Counter { return &Counter{running: map[string]int{}} }

// InterceptActivity counts each activity the worker runs.
func (f *Counter) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &countedActivity{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, f: f}
}

// countedActivity counts one activity in and out.
type countedActivity struct {
	interceptor.ActivityInboundInterceptorBase
	f *Counter
}

func (a *countedActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	name := activity.GetInfo(ctx).ActivityType.Name
	a.f.mu.Lock()
	a.f.running[name]++
	a.f.mu.Unlock()
	res, err := a.Next.ExecuteActivity(ctx, in)
	a.f.mu.Lock()
	if a.f.running[name]--; a.f.running[name] == 0 {
		delete(a.f.running, name)
	}
	if a.f.stopping {
		if err != nil && (errors.Is(err, context.Canceled) || ctx.Err() != nil) {
			a.f.handed++
		} else {
			a.f.finished++
		}
	}
	a.f.mu.Unlock()
	return res, err
}

// Stop marks the start of a stop and says what runs now: how many
// activities, and of which types ("Acquire 2, Release 1").
func (f *Counter) Stop() (n int, what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopping = true
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(f.running)) {
		n += f.running[name]
		parts = append(parts, name+" "+strconv.Itoa(f.running[name]))
	}
	return n, strings.Join(parts, ", ")
}

// Stopped says how the activities in flight at the stop ended.
func (f *Counter) Stopped() (finished, handed, left int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.running {
		left += n
	}
	return f.finished, f.handed, left
}
