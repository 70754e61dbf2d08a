package workflows

import (
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/cost"
)

// TestSettleClassifiesEveryWidthOnce holds settle's one classification
// of an attempt's end: a run of one node is a gang of one, heeding the
// market first; a gang heeds its ranks first.
func TestSettleClassifiesEveryWidthOnce(t *testing.T) {
	t.Parallel()
	outcome := func(o activities.TrainingOutcome) attemptEnd {
		return attemptEnd{res: activities.TrainingResult{Outcome: o, Message: "boom"}}
	}
	failed := func(err error) attemptEnd { return attemptEnd{err: err} }
	silent := failed(errors.New("heartbeat timeout"))
	checkpoint := failed(temporal.NewApplicationError("no checkpoint verifies", string(capacity.CheckpointFault)))
	canceled := failed(temporal.NewCanceledError())
	withCause := func(e attemptEnd, c stopCause) attemptEnd { e.cause = c; return e }
	completed := outcome(activities.OutcomeCompleted)
	stopped := outcome(activities.OutcomeStopped)
	for _, tc := range []struct {
		name    string
		clocked bool
		ranks   []attemptEnd // rank 0 first
		want    ending
		lost    int
		silent  bool
	}{
		{name: "one node completed", ranks: []attemptEnd{completed}, want: endCompleted},
		{name: "one node taken with notice", ranks: []attemptEnd{outcome(activities.OutcomePreempted)}, want: endLost, lost: 1},
		{name: "one node silent: every node lost", ranks: []attemptEnd{silent}, want: endLost, lost: 1},
		{name: "one node's trainer failed", ranks: []attemptEnd{outcome(activities.OutcomeFailed)}, want: endTrainerFailed},
		{name: "one node stopped", ranks: []attemptEnd{stopped}, want: endStopped},
		{name: "one node cancelled", ranks: []attemptEnd{canceled}, want: endStopped},
		{name: "one node: no checkpoint verifies", ranks: []attemptEnd{checkpoint}, want: endCheckpointsFailed},
		{name: "one node: an outcome no agent reports is a loss", ranks: []attemptEnd{outcome("")}, want: endLost, lost: 1},
		{name: "one node moved by its policy though it completed", clocked: true, ranks: []attemptEnd{withCause(completed, movedByMarket)}, want: endMoved},
		{name: "one node: the account says done", clocked: true, ranks: []attemptEnd{withCause(stopped, doneByMarket)}, want: endDone},
		{name: "one node taken by the account, silent", clocked: true, ranks: []attemptEnd{withCause(silent, takenByMarket)}, want: endTaken, lost: 1},
		{name: "one node taken by the account as it completed", clocked: true, ranks: []attemptEnd{withCause(completed, takenByMarket)}, want: endCompleted},
		{name: "gang completed", ranks: []attemptEnd{completed, completed}, want: endCompleted},
		{name: "gang: a rank taken", ranks: []attemptEnd{stopped, outcome(activities.OutcomePreempted)}, want: endLost, lost: 1},
		{name: "gang: every rank lost", ranks: []attemptEnd{silent, silent}, want: endLost, lost: 2},
		{name: "gang: a trainer failure outweighs a loss", ranks: []attemptEnd{silent, outcome(activities.OutcomeFailed)}, want: endTrainerFailed, lost: 1},
		{name: "gang: a rank stopped with its gang", ranks: []attemptEnd{stopped, outcome(activities.OutcomeGangStopped)}, want: endStopped},
		{name: "gang moved by its policy is stopped", clocked: true, ranks: []attemptEnd{withCause(stopped, movedByMarket), stopped}, want: endStopped},
		{name: "clocked gang: done", clocked: true, ranks: []attemptEnd{withCause(stopped, doneByMarket), stopped}, want: endDone},
		{name: "clocked gang: a rank lost is the gang taken", clocked: true, ranks: []attemptEnd{stopped, silent}, want: endTaken, lost: 1, silent: true},
		{name: "clocked gang: completed outweighs taken", clocked: true, ranks: []attemptEnd{withCause(completed, takenByMarket), stopped}, want: endCompleted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runOf("j", "")
			r.spec = gangJob(len(tc.ranks))
			if tc.clocked {
				r.market = &clockedMarket{r: r}
			}
			var ends []nodeEnd
			for _, e := range tc.ranks {
				ends = append(ends, nodeEnd{lease: &Lease{}, end: e})
			}
			v := (&attempt{w: r.workload}).classify(tc.ranks[0], ends)
			if v.ending != tc.want || len(v.lost) != tc.lost || (v.silent != nil) != tc.silent {
				t.Errorf("classify = ending %d, %d lost, silent %v; want ending %d, %d lost, silent %v",
					v.ending, len(v.lost), v.silent != nil, tc.want, tc.lost, tc.silent)
			}
		})
	}
}

// TestMustStopAnswersOnceAndNamesWhatItLeavesOut holds the one stop
// question: a pause, then a yield, then a spent budget, each left out
// only where a place names it.
func TestMustStopAnswersOnceAndNamesWhatItLeavesOut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                   string
		paused, yield, overrun bool
		except                 []stopWhy
		want                   stopWhy
	}{
		{name: "nothing asked", want: goOn},
		{name: "paused", paused: true, want: stopPause},
		{name: "yield asked", yield: true, want: stopYield},
		{name: "budget spent", overrun: true, want: stopBudget},
		{name: "a pause named first", paused: true, yield: true, overrun: true, want: stopPause},
		{name: "a yield before the budget", yield: true, overrun: true, want: stopYield},
		{name: "a wait that holds nothing leaves out the budget", overrun: true, except: []stopWhy{stopBudget}, want: goOn},
		{name: "a release reason leaves out the pause", paused: true, overrun: true, except: []stopWhy{stopPause}, want: stopBudget},
		{name: "the restart wait heeds only a pause", yield: true, overrun: true, except: []stopWhy{stopYield, stopBudget}, want: goOn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.ExecuteWorkflow(func(ctx workflow.Context) (stopWhy, error) {
				r := runOf("j", "")
				r.Paused = tc.paused
				if tc.yield {
					r.Pool = &PoolPlace{Place: PlaceYielding}
				}
				if tc.overrun {
					r.spec.BudgetUSD = 1
					r.Ledger.Open(cost.Segment{InstanceID: "i", PricePerHour: 10, Start: workflow.Now(ctx).Add(-time.Hour)})
				}
				return r.mustStop(ctx, tc.except...), nil
			})
			var got stopWhy
			if err := env.GetWorkflowResult(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("mustStop = %q, want %q", got, tc.want)
			}
		})
	}
}
