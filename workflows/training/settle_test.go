package training

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
	"refuel/workflows/workload"
)

// TestSettleClassifiesEveryWidthOnce holds settle's one classification
// of an attempt's end: a run of one node is a gang of one, heeding the
// market first; a gang heeds its ranks first.
func TestSettleClassifiesEveryWidthOnce(t *testing.T) {
	t.Parallel()
	outcome := func(o activities.TrainingOutcome) workload.AttemptEnd {
		return workload.AttemptEnd{Res: activities.TrainingResult{Outcome: o, Message: "boom"}}
	}
	failed := func(err error) workload.AttemptEnd { return workload.AttemptEnd{Err: err} }
	silent := failed(errors.New("heartbeat timeout"))
	checkpoint := failed(temporal.NewApplicationError("no checkpoint verifies", string(capacity.CheckpointFault)))
	canceled := failed(temporal.NewCanceledError())
	withCause := func(e workload.AttemptEnd, c workload.StopCause) workload.AttemptEnd { e.Cause = c; return e }
	completed := outcome(activities.OutcomeCompleted)
	stopped := outcome(activities.OutcomeStopped)
	for _, tc := range []struct {
		name    string
		clocked bool
		ranks   []workload.AttemptEnd // rank 0 first
		want    workload.Ending
		lost    int
		silent  bool
	}{
		{name: "one node completed", ranks: []workload.AttemptEnd{completed}, want: workload.EndCompleted},
		{name: "one node taken with notice", ranks: []workload.AttemptEnd{outcome(activities.OutcomePreempted)}, want: workload.EndLost, lost: 1},
		{name: "one node silent: every node lost", ranks: []workload.AttemptEnd{silent}, want: workload.EndLost, lost: 1},
		{name: "one node's trainer failed", ranks: []workload.AttemptEnd{outcome(activities.OutcomeFailed)}, want: workload.EndTrainerFailed},
		{name: "one node stopped", ranks: []workload.AttemptEnd{stopped}, want: workload.EndStopped},
		{name: "one node cancelled", ranks: []workload.AttemptEnd{canceled}, want: workload.EndStopped},
		{name: "one node: no checkpoint verifies", ranks: []workload.AttemptEnd{checkpoint}, want: workload.EndCheckpointsFailed},
		{name: "one node: an outcome no agent reports is a loss", ranks: []workload.AttemptEnd{outcome("")}, want: workload.EndLost, lost: 1},
		{name: "one node moved by its policy though it completed", clocked: true, ranks: []workload.AttemptEnd{withCause(completed, workload.MovedByMarket)}, want: workload.EndMoved},
		{name: "one node: the account says done", clocked: true, ranks: []workload.AttemptEnd{withCause(stopped, workload.DoneByMarket)}, want: workload.EndDone},
		{name: "one node taken by the account, silent", clocked: true, ranks: []workload.AttemptEnd{withCause(silent, workload.TakenByMarket)}, want: workload.EndTaken, lost: 1},
		{name: "one node taken by the account as it completed", clocked: true, ranks: []workload.AttemptEnd{withCause(completed, workload.TakenByMarket)}, want: workload.EndCompleted},
		{name: "gang completed", ranks: []workload.AttemptEnd{completed, completed}, want: workload.EndCompleted},
		{name: "gang: a rank taken", ranks: []workload.AttemptEnd{stopped, outcome(activities.OutcomePreempted)}, want: workload.EndLost, lost: 1},
		{name: "gang: every rank lost", ranks: []workload.AttemptEnd{silent, silent}, want: workload.EndLost, lost: 2},
		{name: "gang: a trainer failure outweighs a loss", ranks: []workload.AttemptEnd{silent, outcome(activities.OutcomeFailed)}, want: workload.EndTrainerFailed, lost: 1},
		{name: "gang: a rank stopped with its gang", ranks: []workload.AttemptEnd{stopped, outcome(activities.OutcomeGangStopped)}, want: workload.EndStopped},
		{name: "gang moved by its policy is stopped", clocked: true, ranks: []workload.AttemptEnd{withCause(stopped, workload.MovedByMarket), stopped}, want: workload.EndStopped},
		{name: "clocked gang: done", clocked: true, ranks: []workload.AttemptEnd{withCause(stopped, workload.DoneByMarket), stopped}, want: workload.EndDone},
		{name: "clocked gang: a rank lost is the gang taken", clocked: true, ranks: []workload.AttemptEnd{stopped, silent}, want: workload.EndTaken, lost: 1, silent: true},
		{name: "clocked gang: completed outweighs taken", clocked: true, ranks: []workload.AttemptEnd{withCause(completed, workload.TakenByMarket), stopped}, want: workload.EndCompleted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runOf("j", "")
			r.spec = gangJob(len(tc.ranks))
			if tc.clocked {
				r.Market = &clockedMarket{r: r}
			}
			var ends []workload.NodeEnd
			for _, e := range tc.ranks {
				ends = append(ends, workload.NodeEnd{Lease: &workload.Lease{}, End: e})
			}
			v := (&workload.Attempt{W: r.Workload}).Classify(tc.ranks[0], ends)
			if v.Ending != tc.want || len(v.Lost) != tc.lost || (v.Silent != nil) != tc.silent {
				t.Errorf("classify = ending %d, %d lost, silent %v; want ending %d, %d lost, silent %v",
					v.Ending, len(v.Lost), v.Silent != nil, tc.want, tc.lost, tc.silent)
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
		except                 []workload.StopWhy
		want                   workload.StopWhy
	}{
		{name: "nothing asked", want: workload.GoOn},
		{name: "paused", paused: true, want: workload.StopPause},
		{name: "yield asked", yield: true, want: workload.StopYield},
		{name: "budget spent", overrun: true, want: workload.StopBudget},
		{name: "a pause named first", paused: true, yield: true, overrun: true, want: workload.StopPause},
		{name: "a yield before the budget", yield: true, overrun: true, want: workload.StopYield},
		{name: "a wait that holds nothing leaves out the budget", overrun: true, except: []workload.StopWhy{workload.StopBudget}, want: workload.GoOn},
		{name: "a release reason leaves out the pause", paused: true, overrun: true, except: []workload.StopWhy{workload.StopPause}, want: workload.StopBudget},
		{name: "the restart wait heeds only a pause", yield: true, overrun: true, except: []workload.StopWhy{workload.StopYield, workload.StopBudget}, want: workload.GoOn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.ExecuteWorkflow(func(ctx workflow.Context) (workload.StopWhy, error) {
				r := runOf("j", "")
				r.Paused = tc.paused
				if tc.yield {
					r.Pool = &workload.PoolPlace{Place: workload.PlaceYielding}
				}
				if tc.overrun {
					r.spec.BudgetUSD = 1
					r.Ledger.Open(cost.Segment{InstanceID: "i", PricePerHour: 10, Start: workflow.Now(ctx).Add(-time.Hour)})
				}
				return r.MustStop(ctx, tc.except...), nil
			})
			var got workload.StopWhy
			if err := env.GetWorkflowResult(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("mustStop = %q, want %q", got, tc.want)
			}
		})
	}
}
