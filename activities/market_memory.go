package activities

import (
	"context"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"

	"refuel/pkg/capacity"
	"refuel/pkg/policy"
)

// StockHistory is what the deployment's runs so far saw of the stock of
// some spot offerings (by key), in order, each with its cloud's placement
// score where the provider gives one (PlacementScorer). Unread memory
// gives what was read last: a plan on older lessons beats no plan.
func (a *Capacity) StockHistory(ctx context.Context, keys []string) ([]policy.Availability, error) {
	h := make([]policy.Availability, len(keys))
	if a.Memory != nil {
		var err error
		h, err = a.Memory.History(ctx, keys)
		noteMemory(ctx, "stock logs not read", err)
	}
	a.scorePlacements(ctx, keys, h)
	return h, nil
}

// PlacementScorer is a provider that knows how likely a spot request is
// to succeed in each of its pools, from 1 (unlikely) to 10: EC2's spot
// placement scores. PlacementScores answers by offering key for those of
// the offerings that are its own, leaving out any it has no score for.
type PlacementScorer interface {
	PlacementScores(ctx context.Context, offerings []capacity.Offering) (map[string]int, error)
}

// scorePlacements sets the placement score of each offering's history
// where its provider gives one. A score not read leaves the plan to the
// stretches seen and refuel's priors.
func (a *Capacity) scorePlacements(ctx context.Context, keys []string, h []policy.Availability) {
	var offerings []capacity.Offering
	for _, k := range keys {
		if o, ok := offeringOfKey(k); ok {
			offerings = append(offerings, o)
		}
	}
	for _, p := range a.Providers {
		scorer, ok := p.(PlacementScorer)
		if !ok {
			continue
		}
		scores, err := scorer.PlacementScores(ctx, offerings)
		if err != nil {
			activity.GetLogger(ctx).Warn("spot placement scores not read", "provider", p.Name(), "error", err)
			continue
		}
		for i, k := range keys {
			if s, ok := scores[k]; ok {
				h[i].PlacementScore = s
			}
		}
	}
}

// offeringOfKey is the offering an Offering.Key names, without its price
// and GPUs.
func offeringOfKey(key string) (capacity.Offering, bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 4 {
		return capacity.Offering{}, false
	}
	return capacity.Offering{Provider: parts[0], InstanceType: parts[1], Zone: parts[2], Market: capacity.Market(parts[3])}, true
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
