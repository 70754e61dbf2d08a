package activities

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"refuel/pkg/capacity"
	"refuel/pkg/policy"
)

// StockLogs remember, per spot offering (its key), what every run has
// seen of its stock on a cloud that shows it only to those who try: how
// long spot instances lasted (until preempted, or given back) and how
// long tries kept finding none. Deadline runs plan with it when they
// decide whether to wait for spot and whether to go back to it. With a
// Path it survives restarts. Safe for concurrent use; the zero value
// keeps the logs in memory.
type StockLogs struct {
	Path string
	Now  func() time.Time // default time.Now

	mu   sync.Mutex
	logs map[string]*StockLog
}

// StockLog is one spot offering's log.
type StockLog struct {
	policy.Availability
	// NoneSince is when tries began finding no stock, while they still
	// do; zero otherwise.
	NoneSince time.Time `json:"none_since,omitzero"`
}

// Load reads the logs saved at Path; a missing file is an empty log.
func (l *StockLogs) Load() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.logs = map[string]*StockLog{}
	if l.Path == "" {
		return nil
	}
	return loadJSON(l.Path, "stock logs", &l.logs)
}

// Tried records a try of a spot offering: it found stock or it did not.
// A run of tries that found none, ended by one that found some, is a
// stretch out of stock seen to its end.
func (l *StockLogs) Tried(key string, found bool) error {
	return l.update(key, func(s *StockLog, now time.Time) bool {
		switch {
		case !found && s.NoneSince.IsZero():
			s.NoneSince = now
		case found && !s.NoneSince.IsZero():
			s.Seen(false, now.Sub(s.NoneSince), true)
			s.NoneSince = time.Time{}
		default:
			return false // a try like the last: nothing new to save
		}
		return true
	})
}

// Held records a spot instance held for d, until it was preempted or
// given back: a stretch in stock seen for d, to its end if preempted.
func (l *StockLogs) Held(key string, d time.Duration, preempted bool) error {
	return l.update(key, func(s *StockLog, _ time.Time) bool {
		s.Seen(true, d, preempted)
		return true
	})
}

// update changes key's log with f, and saves the logs if f says it
// changed anything.
func (l *StockLogs) update(key string, f func(*StockLog, time.Time) bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.logs == nil {
		l.logs = map[string]*StockLog{}
	}
	s := l.logs[key]
	if s == nil {
		s = &StockLog{}
		l.logs[key] = s
	}
	if !f(s, l.now()) || l.Path == "" {
		return nil
	}
	return saveJSON(l.Path, l.logs)
}

func (l *StockLogs) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// History is what was seen of each offering's stock, in order, as a
// policy.Zone's History: an offering whose tries find none now is out of
// stock since the first of them.
func (l *StockLogs) History(keys []string) []policy.Availability {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]policy.Availability, len(keys))
	for i, k := range keys {
		s := l.logs[k]
		if s == nil {
			continue
		}
		out[i] = s.Availability
		if !s.NoneSince.IsZero() {
			out[i].Last, out[i].Since = false, max(now.Sub(s.NoneSince), time.Nanosecond)
		}
	}
	return out
}

// StockHistory is what all runs so far saw of the stock of some spot
// offerings (by key), in order.
func (a *Capacity) StockHistory(_ context.Context, keys []string) ([]policy.Availability, error) {
	if a.Stock == nil {
		return make([]policy.Availability, len(keys)), nil
	}
	return a.Stock.History(keys), nil
}

// logsStock reports whether what is seen of o's stock goes into the stock
// logs: spot on a cloud keeping wall time (a clocked market has its own
// account of its stock, in market time).
func (a *Capacity) logsStock(o capacity.Offering) bool {
	return a.Stock != nil && o.Market == capacity.Spot && a.Clocks[o.Provider] == nil
}

// noteStock logs a stock log that could not be saved: losing a lesson
// costs only a less informed plan later.
func noteStock(ctx context.Context, err error) {
	if err != nil {
		activity.GetLogger(ctx).Warn("stock log not saved", "error", err)
	}
}
