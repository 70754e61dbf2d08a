package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"

	"refuel/pkg/capacity"
	"refuel/pkg/policy"
)

// StockHistory is what the deployment's runs so far saw of the stock of
// some spot offerings (by key), in order. Unread memory gives what was
// read last: a plan on older lessons beats no plan.
func (a *Capacity) StockHistory(ctx context.Context, keys []string) ([]policy.Availability, error) {
	if a.Memory == nil {
		return make([]policy.Availability, len(keys)), nil
	}
	h, err := a.Memory.History(ctx, keys)
	noteMemory(ctx, "stock logs not read", err)
	return h, nil
}

// PoolCheckpointLog is what the deployment's runs so far learned of an
// offering's pool.
func (a *Capacity) PoolCheckpointLog(ctx context.Context, o capacity.Offering) (policy.CheckpointLog, error) {
	if a.Memory == nil {
		return policy.CheckpointLog{}, nil
	}
	l, err := a.Memory.CheckpointLog(ctx, o.Key())
	noteMemory(ctx, "checkpoint logs not read", err)
	return l, nil
}

// logsStock reports whether what is seen of o's stock goes into the stock
// logs: spot on a cloud keeping wall time (a clocked market has its own
// account of its stock, in market time).
func (a *Capacity) logsStock(o capacity.Offering) bool {
	return a.Memory != nil && o.Market == capacity.Spot && a.Clocks[o.Provider] == nil
}

// learnRelease records what an instance given back taught: how long its
// spot stock lasted, and its checkpoint log. An instance lost to a cause
// that says nothing of the market (capacity.Teaches) teaches nothing.
func (a *Capacity) learnRelease(ctx context.Context, in ReleaseInput) {
	if a.Memory == nil || !capacity.Teaches(string(in.Reason)) {
		return
	}
	inst, o := in.Instance, in.Instance.Offering
	if a.logsStock(o) && !inst.LaunchedAt.IsZero() {
		held := time.Since(inst.LaunchedAt)
		noteMemory(ctx, "stock log not saved", a.Memory.Held(ctx, inst.ID, o.Key(), held, in.Reason == ReleasePreempted))
	}
	if in.Log != nil {
		noteMemory(ctx, "checkpoint log not saved", a.Memory.Taught(ctx, inst.ID, o.Key(), *in.Log))
	}
}

// noteMemory logs a lesson not saved or read: losing one costs only a
// less informed plan or a less tuned interval later.
func noteMemory(ctx context.Context, what string, err error) {
	if err != nil {
		activity.GetLogger(ctx).Warn(what, "error", err)
	}
}
