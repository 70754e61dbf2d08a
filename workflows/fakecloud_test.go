package workflows

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

// spotA, spotB and odA are offerings in two zones of one region.
var (
	spotA = capacity.Offering{Provider: "fake", InstanceType: "gpu.1x", Zone: "us-east-1a", Market: capacity.Spot, GPUs: 1, PricePerHour: 1}
	spotB = capacity.Offering{Provider: "fake", InstanceType: "gpu.1x", Zone: "us-east-1b", Market: capacity.Spot, GPUs: 1, PricePerHour: 1.2}
	odA   = capacity.Offering{Provider: "fake", InstanceType: "gpu.1x", Zone: "us-east-1a", Market: capacity.OnDemand, GPUs: 1, PricePerHour: 3}
)

// fakeCloud stands in for the control plane's and node's activities. Its
// fields say what the next calls do, Karpenter-fake style.
type fakeCloud struct {
	mu        sync.Mutex
	offerings []capacity.Offering
	// noStock makes every offering of these markets fail with no
	// capacity, and outOfStock the offerings of these keys.
	noStock    map[capacity.Market]bool
	outOfStock map[string]bool
	// failAll makes every offering fail with this class.
	failAll capacity.Class
	// fail makes every offering of these markets fail with a class.
	fail map[capacity.Market]capacity.Class
	// stockAfter lifts noStock and outOfStock after this many
	// acquisitions were tried.
	stockAfter int
	// laterAcquireTakes is the wall time every acquisition but the first
	// takes.
	laterAcquireTakes time.Duration
	// poolLog is what PoolCheckpointLog answers for every pool.
	poolLog policy.CheckpointLog
	// stock is what StockHistory answers, by offering key.
	stock map[string]policy.Availability
	// trainings are the outcomes of successive RunTraining calls; past
	// the end, training completes. "block" waits for cancellation and
	// stops; "slow" completes after slowTraining of wall time; "silent"
	// times out on heartbeats; "agent-failed" is the agent's own error;
	// "bad-checkpoints" finds no checkpoint that verifies; "unheard"
	// times out on heartbeats while the cloud still runs the instance
	// (the cluster lost touch with a healthy agent).
	trainings []activities.TrainingOutcome
	// ranks, when set, are the outcomes of a gang's successive attempts
	// by rank, in place of trainings.
	ranks map[int][]activities.TrainingOutcome
	// outage makes the acquisitions numbered past outage[0] up to
	// outage[1] find no stock.
	outage [2]int
	// tags are set on every instance acquired.
	tags map[string]string

	// healthy are the instances the cloud still runs though their
	// agent went unheard; LostInstances reports every other it is asked
	// about as gone.
	healthy map[string]bool

	// reach answers TrainingReach; nil says every RunTraining reached
	// its agent.
	reach func() activities.Reach

	stops     map[int]bool // attempts StopTraining asked to stop
	byRank    map[int]int  // RunTraining calls by rank
	decisions []activities.DecisionInput
	plans     *activities.Capacity
	requests  []capacity.Request
	acquired  []capacity.Instance
	released  []activities.ReleaseInput
	trained   []activities.TrainingInput
}

func (f *fakeCloud) ListOfferings(context.Context, activities.OfferingsInput) ([]capacity.Offering, error) {
	return f.offerings, nil
}

func (f *fakeCloud) PoolCheckpointLog(context.Context, capacity.Offering) (policy.CheckpointLog, error) {
	return f.poolLog, nil
}

func (f *fakeCloud) StockHistory(_ context.Context, keys []string) ([]policy.Availability, error) {
	out := make([]policy.Availability, len(keys))
	for i, k := range keys {
		out[i] = f.stock[k]
	}
	return out, nil
}

// OpenMarket: the fake cloud's market keeps wall time.
func (f *fakeCloud) OpenMarket(context.Context, activities.MarketInput) (activities.MarketView, error) {
	return activities.MarketView{}, nil
}

func (f *fakeCloud) Acquire(_ context.Context, req capacity.Request) (capacity.Instance, error) {
	f.mu.Lock()
	if len(f.requests) > 0 && f.laterAcquireTakes > 0 {
		f.mu.Unlock()
		time.Sleep(f.laterAcquireTakes)
		f.mu.Lock()
	}
	defer f.mu.Unlock()
	f.requests = append(f.requests, req)
	if f.stockAfter > 0 && len(f.requests) > f.stockAfter {
		f.noStock, f.outOfStock = nil, nil
	}
	var details []activities.FailureDetail
	inOutage := len(f.requests) > f.outage[0] && len(f.requests) <= f.outage[1]
	for _, o := range req.Offerings {
		switch {
		case inOutage:
			details = append(details, activities.FailureDetail{Class: capacity.NoCapacity, Offering: o.Key(), Message: "fake outage"})
		case f.failAll != "":
			details = append(details, activities.FailureDetail{Class: f.failAll, Offering: o.Key(), Message: "fake"})
		case f.fail[o.Market] != "":
			details = append(details, activities.FailureDetail{Class: f.fail[o.Market], Offering: o.Key(), Message: "fake"})
		case f.noStock[o.Market] || f.outOfStock[o.Key()]:
			details = append(details, activities.FailureDetail{Class: capacity.NoCapacity, Offering: o.Key(), Message: "fake out of stock"})
		default:
			n := string(rune('0' + len(f.acquired)))
			inst := capacity.Instance{ID: "i-" + n, Offering: o, TaskQueue: "node", Tags: f.tags, Address: "10.0.0." + n}
			f.acquired = append(f.acquired, inst)
			return inst, nil
		}
	}
	return capacity.Instance{}, temporal.NewApplicationErrorWithOptions("fake failure", string(details[0].Class),
		temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{details}})
}

// DecideMarket records the question and answers it as the worker does:
// the plans are pure, so the real activity, with plans of its own.
func (f *fakeCloud) DecideMarket(ctx context.Context, in activities.DecisionInput) (activities.Decision, error) {
	f.mu.Lock()
	f.decisions = append(f.decisions, in)
	if f.plans == nil {
		f.plans = &activities.Capacity{Plans: policy.NewPlans(1 << 30)}
	}
	plans := f.plans
	f.mu.Unlock()
	return plans.DecideMarket(ctx, in)
}

func (f *fakeCloud) StopTraining(_ context.Context, in activities.StopInput) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stops == nil {
		f.stops = map[int]bool{}
	}
	f.stops[in.Attempt] = true
	return nil
}

func (f *fakeCloud) stopped(attempt int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stops[attempt]
}

func (f *fakeCloud) Release(_ context.Context, in activities.ReleaseInput) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, in)
	return nil
}

// Replace releases, then acquires, as the worker's does.
func (f *fakeCloud) Replace(ctx context.Context, in activities.ReplaceInput) (capacity.Instance, error) {
	if err := f.Release(ctx, in.Release); err != nil {
		return capacity.Instance{}, err
	}
	return f.Acquire(ctx, in.Request)
}

func (f *fakeCloud) RunTraining(ctx context.Context, in activities.TrainingInput) (activities.TrainingResult, error) {
	f.mu.Lock()
	n := len(f.trained)
	f.trained = append(f.trained, in)
	outcome := activities.OutcomeCompleted
	if n < len(f.trainings) {
		outcome = f.trainings[n]
	}
	if f.ranks != nil {
		if f.byRank == nil {
			f.byRank = map[int]int{}
		}
		rank, i := in.Gang.Rank, f.byRank[in.Gang.Rank]
		f.byRank[rank]++
		outcome = activities.OutcomeCompleted
		if i < len(f.ranks[rank]) {
			outcome = f.ranks[rank][i]
		}
	}
	f.mu.Unlock()
	restored := int64(50 * n)
	switch outcome {
	case "slow":
		time.Sleep(slowTraining)
		outcome = activities.OutcomeCompleted
	case "block": // until StopTraining, or a cancel for runs recorded before push control
		for ctx.Err() == nil && !f.stopped(in.Attempt) {
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
		f.mu.Lock()
		if f.healthy == nil {
			f.healthy = map[string]bool{}
		}
		f.healthy[in.InstanceID] = true
		f.mu.Unlock()
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
func (f *fakeCloud) TrainingReach(context.Context, activities.ReachInput) (activities.Reach, error) {
	if f.reach == nil {
		return activities.ReachHeard, nil
	}
	return f.reach(), nil
}

// LostInstances reports the instances asked about as gone, but for the
// healthy ones.
func (f *fakeCloud) LostInstances(_ context.Context, insts []capacity.Instance) ([]activities.LostInstance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []activities.LostInstance
	for _, inst := range insts {
		if !f.healthy[inst.ID] {
			out = append(out, activities.LostInstance{ID: inst.ID, State: capacity.StateTerminated})
		}
	}
	return out, nil
}

// slowTraining is how long a "slow" training takes, in wall time: the
// test suite fires a workflow's timers in wall time while an activity runs.
const slowTraining = 400 * time.Millisecond

func (f *fakeCloud) releasedReasons() []activities.ReleaseReason {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []activities.ReleaseReason
	for _, r := range f.released {
		out = append(out, r.Reason)
	}
	return out
}
