package controlplane

import (
	"time"

	"go.uber.org/zap"
)

// DefaultStopTimeout is how long a stopping worker lets the activities it
// runs finish (an Acquire mid-launch, a Release) before it cancels them.
// A cancelled one is not lost: its heartbeats stop, and Temporal retries
// it on another worker, where the provider's idempotency token returns
// what the first try launched.
const DefaultStopTimeout = 30 * time.Second

// drain stops the worker, letting the activities it runs finish within
// the stop timeout, and logs what it really did.
func (s *Stack) drain() {
	n, what := s.inFlight.Stop()
	if n > 0 {
		s.log.Info("stopping: letting the activities in flight finish", zap.Int("activities", n), zap.String("running", what), zap.Duration("stop_timeout", s.cfg.StopTimeout))
	} else {
		s.log.Info("stopping: no activity in flight")
	}
	start := time.Now()
	s.worker.Stop()
	finished, handed, left := s.inFlight.Stopped()
	if n > 0 {
		s.log.Info("worker stopped", zap.Int("finished", finished),
			zap.Int("handed_over", handed+left), zap.Duration("took", time.Since(start).Round(time.Millisecond)))
	}
	if handed+left > 0 {
		s.log.Warn("activities cut short by the stop timeout go to another worker once their heartbeat timeout passes",
			zap.Int("activities", handed+left))
	}
}
