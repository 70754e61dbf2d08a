package activities

import (
	"context"
	"sync"

	"refuel/pkg/capacity"
	"refuel/pkg/policy"
)

// CheckpointLogs remembers, per pool (an offering's key), what runs have
// learned of it: time held, preemptions suffered and checkpoint write
// times. `interval: auto` reads it, so a run's first checkpoint interval
// already reflects the runs before it. With a Path it survives restarts.
// Safe for concurrent use; the zero value keeps the logs in memory.
type CheckpointLogs struct {
	Path string

	mu   sync.Mutex
	logs map[string]policy.CheckpointLog
}

// Load reads the logs saved at Path; a missing file is an empty log.
func (l *CheckpointLogs) Load() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.logs = map[string]policy.CheckpointLog{}
	if l.Path == "" {
		return nil
	}
	return loadJSON(l.Path, "checkpoint logs", &l.logs)
}

// Add adds what one instance taught to its pool's log and saves the logs.
func (l *CheckpointLogs) Add(pool string, d policy.CheckpointLog) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.logs == nil {
		l.logs = map[string]policy.CheckpointLog{}
	}
	l.logs[pool] = l.logs[pool].Add(d)
	if l.Path == "" {
		return nil
	}
	return saveJSON(l.Path, l.logs)
}

// Get is the pool's log.
func (l *CheckpointLogs) Get(pool string) policy.CheckpointLog {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.logs[pool]
}

// PoolCheckpointLog is what all runs so far learned of an offering's pool.
func (a *Capacity) PoolCheckpointLog(_ context.Context, o capacity.Offering) (policy.CheckpointLog, error) {
	if a.Logs == nil {
		return policy.CheckpointLog{}, nil
	}
	return a.Logs.Get(o.Key()), nil
}
