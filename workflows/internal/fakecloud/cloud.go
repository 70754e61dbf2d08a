package fakecloud

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/policy"
)

// SpotA, SpotB and OdA are offerings in two zones of one region.
var (
	SpotA = capacity.Offering{Provider: "fake", InstanceType: "gpu.1x", Zone: "us-east-1a", Market: capacity.Spot, GPUs: 1, PricePerHour: 1}
	SpotB = capacity.Offering{Provider: "fake", InstanceType: "gpu.1x", Zone: "us-east-1b", Market: capacity.Spot, GPUs: 1, PricePerHour: 1.2}
	OdA   = capacity.Offering{Provider: "fake", InstanceType: "gpu.1x", Zone: "us-east-1a", Market: capacity.OnDemand, GPUs: 1, PricePerHour: 3}
)

// Cloud stands in for the control plane's and node's activities. Its
// fields say what the next calls do, Karpenter-fake style.
type Cloud struct {
	Mu        sync.Mutex
	Offerings []capacity.Offering
	// NoStock makes every offering of these markets fail with no
	// capacity, and OutOfStock the offerings of these keys.
	NoStock    map[capacity.Market]bool
	OutOfStock map[string]bool
	// FailAll makes every offering fail with this class.
	FailAll capacity.Class
	// Fail makes every offering of these markets fail with a class.
	Fail map[capacity.Market]capacity.Class
	// StockAfter lifts NoStock and OutOfStock after this many
	// acquisitions were tried.
	StockAfter int
	// LaterAcquireTakes is the wall time every acquisition but the first
	// takes.
	LaterAcquireTakes time.Duration
	// PoolLog is what PoolCheckpointLog answers for every pool.
	PoolLog policy.CheckpointLog
	// Stock is what StockHistory answers, by offering key.
	Stock map[string]policy.Availability
	// Trainings are the outcomes of successive RunTraining calls; past
	// the end, training completes. "block" waits for cancellation and
	// stops; "slow" completes after SlowTraining of wall time; "silent"
	// times out on heartbeats; "agent-failed" is the agent's own error;
	// "bad-checkpoints" finds no checkpoint that verifies; "unheard"
	// times out on heartbeats while the cloud still runs the instance
	// (the cluster lost touch with a healthy agent).
	Trainings []activities.TrainingOutcome
	// Ranks, when set, are the outcomes of a gang's successive attempts
	// by rank, in place of trainings.
	Ranks map[int][]activities.TrainingOutcome
	// Outage makes the acquisitions numbered past outage[0] up to
	// outage[1] find no stock.
	Outage [2]int
	// Tags are set on every instance acquired.
	Tags map[string]string

	// Healthy are the instances the cloud still runs though their
	// agent went unheard; LostInstances reports every other it is asked
	// about as gone.
	Healthy map[string]bool

	// Reach answers TrainingReach; nil says every RunTraining reached
	// its agent.
	Reach func() activities.Reach

	stops     map[int]bool // attempts StopTraining asked to stop
	byRank    map[int]int  // RunTraining calls by rank
	Decisions []activities.DecisionInput
	plans     *activities.Capacity
	Requests  []capacity.Request
	Acquired  []capacity.Instance
	Released  []activities.ReleaseInput
	Trained   []activities.TrainingInput
}

func (f *Cloud) ListOfferings(context.Context, activities.OfferingsInput) ([]capacity.Offering, error) {
	return f.Offerings, nil
}

func (f *Cloud) PoolCheckpointLog(context.Context, capacity.Offering) (policy.CheckpointLog, error) {
	return f.PoolLog, nil
}

func (f *Cloud) StockHistory(_ context.Context, keys []string) ([]policy.Availability, error) {
	out := make([]policy.Availability, len(keys))
	for i, k := range keys {
		out[i] = f.Stock[k]
	}
	return out, nil
}

// OpenMarket: the fake cloud's market keeps wall time.
func (f *Cloud) OpenMarket(context.Context, activities.MarketInput) (activities.MarketView, error) {
	return activities.MarketView{}, nil
}

func (f *Cloud) Acquire(_ context.Context, req capacity.Request) (capacity.Instance, error) {
	f.Mu.Lock()
	if len(f.Requests) > 0 && f.LaterAcquireTakes > 0 {
		f.Mu.Unlock()
		time.Sleep(f.LaterAcquireTakes)
		f.Mu.Lock()
	}
	defer f.Mu.Unlock()
	f.Requests = append(f.Requests, req)
	if f.StockAfter > 0 && len(f.Requests) > f.StockAfter {
		f.NoStock, f.OutOfStock = nil, nil
	}
	var details []activities.FailureDetail
	inOutage := len(f.Requests) > f.Outage[0] && len(f.Requests) <= f.Outage[1]
	for _, o := range req.Offerings {
		switch {
		case inOutage:
			details = append(details, activities.FailureDetail{Class: capacity.NoCapacity, Offering: o.Key(), Message: "fake outage"})
		case f.FailAll != "":
			details = append(details, activities.FailureDetail{Class: f.FailAll, Offering: o.Key(), Message: "fake"})
		case f.Fail[o.Market] != "":
			details = append(details, activities.FailureDetail{Class: f.Fail[o.Market], Offering: o.Key(), Message: "fake"})
		case f.NoStock[o.Market] || f.OutOfStock[o.Key()]:
			details = append(details, activities.FailureDetail{Class: capacity.NoCapacity, Offering: o.Key(), Message: "fake out of stock"})
		default:
			n := string(rune('0' + len(f.Acquired)))
			inst := capacity.Instance{ID: "i-" + n, Offering: o, TaskQueue: "node", Tags: f.Tags, Address: "10.0.0." + n}
			f.Acquired = append(f.Acquired, inst)
			return inst, nil
		}
	}
	return capacity.Instance{}, temporal.NewApplicationErrorWithOptions("fake failure", string(details[0].Class),
		temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{details}})
}

// DecideMarket records the question and answers it as the worker does:
// the plans are pure, so the real activity, with plans of its own.
func (f *Cloud) DecideMarket(ctx context.Context, in activities.DecisionInput) (activities.Decision, error) {
	f.Mu.Lock()
	f.Decisions = append(f.Decisions, in)
	if f.plans == nil {
		f.plans = &activities.Capacity{Plans: policy.NewPlans(1 << 30)}
	}
	plans := f.plans
	f.Mu.Unlock()
	return plans.DecideMarket(ctx, in)
}

func (f *Cloud) StopTraining(_ context.Context, in activities.StopInput) error {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if f.stops == nil {
		f.stops = map[int]bool{}
	}
	f.stops[in.Attempt] = true
	return nil
}

func (f *Cloud) Stopped(attempt int) bool {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return f.stops[attempt]
}

func (f *Cloud) Release(_ context.Context, in activities.ReleaseInput) error {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Released = append(f.Released, in)
	return nil
}

// Replace releases, then acquires, as the worker's does.
func (f *Cloud) Replace(ctx context.Context, in activities.ReplaceInput) (capacity.Instance, error) {
	if err := f.Release(ctx, in.Release); err != nil {
		return capacity.Instance{}, err
	}
	return f.Acquire(ctx, in.Request)
}

func (f *Cloud) RunTraining(ctx context.Context, in activities.TrainingInput) (activities.TrainingResult, error) {
	f.Mu.Lock()
	n := len(f.Trained)
	f.Trained = append(f.Trained, in)
	outcome := activities.OutcomeCompleted
	if n < len(f.Trainings) {
		outcome = f.Trainings[n]
	}
	if f.Ranks != nil {
		if f.byRank == nil {
			f.byRank = map[int]int{}
		}
		rank, i := in.Gang.Rank, f.byRank[in.Gang.Rank]
		f.byRank[rank]++
		outcome = activities.OutcomeCompleted
		if i < len(f.Ranks[rank]) {
			outcome = f.Ranks[rank][i]
		}
	}
	f.Mu.Unlock()
	restored := int64(50 * n)
	switch outcome {
	case "slow":
		time.Sleep(SlowTraining)
		outcome = activities.OutcomeCompleted
	case "block": // until StopTraining, or a cancel for runs recorded before push control
		for ctx.Err() == nil && !f.Stopped(in.Attempt) {
			activity.RecordHeartbeat(ctx, activities.Progress{Step: restored})
			time.Sleep(10 * time.Millisecond)
		}
		return activities.TrainingResult{Outcome: activities.OutcomeStopped, RestoredStep: restored, LastStep: restored + 5,
			LastCheckpoint: &activities.CheckpointRef{Step: restored + 5}}, nil
	case activities.OutcomePreempted:
		return activities.TrainingResult{Outcome: outcome, RestoredStep: restored, LastStep: restored + 50, TotalSteps: 200,
			LastCheckpoint: &activities.CheckpointRef{Step: restored + 50}}, nil
	case activities.OutcomeFailed:
		return activities.TrainingResult{Outcome: outcome, RestoredStep: restored, ExitCode: 3, Message: "boom"}, nil
	case "silent": // the instance stopped heartbeating
		return activities.TrainingResult{}, temporal.NewTimeoutError(enums.TIMEOUT_TYPE_HEARTBEAT, nil)
	case "unheard":
		f.Mu.Lock()
		if f.Healthy == nil {
			f.Healthy = map[string]bool{}
		}
		f.Healthy[in.InstanceID] = true
		f.Mu.Unlock()
		return activities.TrainingResult{}, temporal.NewTimeoutError(enums.TIMEOUT_TYPE_HEARTBEAT, nil, activities.Progress{Step: restored + 10})
	case "agent-failed":
		return activities.TrainingResult{}, temporal.NewApplicationError("checkpoint store unreachable", "StoreUnreachable")
	case "bad-checkpoints":
		return activities.TrainingResult{}, temporal.NewNonRetryableApplicationError("no checkpoint of job-1 verifies", string(capacity.CheckpointFault), nil)
	}
	return activities.TrainingResult{Outcome: outcome, RestoredStep: restored, LastStep: 200, TotalSteps: 200,
		LastCheckpoint: &activities.CheckpointRef{Step: 200}, ModelDigest: "abc"}, nil
}

// TrainingReach: every RunTraining reached its agent, unless the test
// says otherwise.
func (f *Cloud) TrainingReach(context.Context, activities.ReachInput) (activities.Reach, error) {
	if f.Reach == nil {
		return activities.ReachHeard, nil
	}
	return f.Reach(), nil
}

// LostInstances reports the instances asked about as gone, but for the
// healthy ones.
func (f *Cloud) LostInstances(_ context.Context, insts []capacity.Instance) ([]activities.LostInstance, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	var out []activities.LostInstance
	for _, inst := range insts {
		if !f.Healthy[inst.ID] {
			out = append(out, activities.LostInstance{ID: inst.ID, State: capacity.StateTerminated})
		}
	}
	return out, nil
}

// SlowTraining is how long a "slow" training takes, in wall time: the
// test suite fires a workflow's timers in wall time while an activity runs.
const SlowTraining = 400 * time.Millisecond

func (f *Cloud) ReleasedReasons() []activities.ReleaseReason {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	var out []activities.ReleaseReason
	for _, r := range f.Released {
		out = append(out, r.Reason)
	}
	return out
}
