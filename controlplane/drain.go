package controlplane

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.uber.org/zap"
)

// DefaultStopTimeout is how long a stopping worker lets the activities it
// runs finish (an Acquire mid-launch, a Release) before it cancels them.
// A cancelled one is not lost: its heartbeats stop, and Temporal retries
// it on another worker, where the provider's idempotency token returns
// what the first try launched.
const DefaultStopTimeout = 30 * time.Second

// inFlight counts the activities a worker is running, by type, and how
// those that ended while it stopped ended: what a stop says it did.
type inFlight struct {
	interceptor.WorkerInterceptorBase

	mu       sync.Mutex
	running  map[string]int
	stopping bool
	finished int // ended on their own while the worker stopped
	handed   int // cancelled by the stop: another worker retries them
}

func newInFlight() *inFlight { return &inFlight{running: map[string]int{}} }

func (f *inFlight) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &countedActivity{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, f: f}
}

// countedActivity counts one activity in and out.
type countedActivity struct {
	interceptor.ActivityInboundInterceptorBase
	f *inFlight
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

// stop marks the start of a stop and says what runs now.
func (f *inFlight) stop() (n int, what string) {
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

// stopped says how the activities in flight at the stop ended.
func (f *inFlight) stopped() (finished, handed, left int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.running {
		left += n
	}
	return f.finished, f.handed, left
}

// drain stops the worker, letting the activities it runs finish within
// the stop timeout, and logs what it really did.
func (s *Stack) drain() {
	n, what := s.inFlight.stop()
	if n > 0 {
		s.log.Info("stopping: letting the activities in flight finish", zap.Int("activities", n), zap.String("running", what), zap.Duration("stop_timeout", s.cfg.StopTimeout))
	} else {
		s.log.Info("stopping: no activity in flight")
	}
	start := time.Now()
	s.worker.Stop()
	finished, handed, left := s.inFlight.stopped()
	if n > 0 {
		s.log.Info("worker stopped", zap.Int("finished", finished),
			zap.Int("handed_over", handed+left), zap.Duration("took", time.Since(start).Round(time.Millisecond)))
	}
	if handed+left > 0 {
		s.log.Warn("activities cut short by the stop timeout go to another worker once their heartbeat timeout passes",
			zap.Int("activities", handed+left))
	}
}
