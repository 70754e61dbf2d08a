package workflows

import (
	"hash/fnv"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
)

// attempt is one attempt on what a workload holds: the node agent of
// every rank runs the job, from the latest checkpoint, under one attempt
// number, until it completes or is stopped. The workload launches it,
// follows it while its market watches, and settles it into a verdict
// (verdict.go); the host acts on the verdict.
type attempt struct {
	w       *workload
	ranks   []*rankAttempt // rank 0 first
	started time.Time
	// mayContinue is set when the workload may continue as new while the
	// attempt runs (push control, and a market that allows it).
	mayContinue bool
	// cause is why the workload stopped the attempt, when its market did.
	cause stopCause
}

// rankAttempt is one rank's part of an attempt: the RunTraining activity
// on its instance's own task queue.
type rankAttempt struct {
	lease  *Lease
	in     activities.TrainingInput
	result workflow.Future
	// A workload stops an attempt by push (StopTraining on the instance's
	// own queue, once: push holds the context it goes out on), or,
	// recorded before push control, by cancelling its activity.
	push    workflow.Context
	stopped bool
	cancel  workflow.CancelFunc
	// mayContinue: see attempt.mayContinue.
	mayContinue bool
	// heard is set once the rank's agent reported progress, or the
	// cluster says it heartbeats (attempt.send).
	heard bool
}

// stopCause says why a market stopped an attempt.
type stopCause string

const (
	// movedByMarket: the workload's policy chose to hold something else.
	movedByMarket stopCause = "moved"
	// takenByMarket: the market took the spot instance back.
	takenByMarket stopCause = "taken"
	// doneByMarket: the market's account says the work is done.
	doneByMarket stopCause = "done"
	// grownByMarket: an elastic gang got nodes it was short of.
	grownByMarket stopCause = "grown"
)

// attemptEnd is how an attempt ended, as rank 0 reported it.
type attemptEnd struct {
	res     activities.TrainingResult
	err     error
	started time.Time
	cause   stopCause
	// silent is set when the instance was lost without a word and its
	// agent's last heartbeat was heard: everything since the latest
	// checkpoint is lost.
	silent bool
}

// launch starts an attempt on every instance the workload holds: in is
// rank 0's input, under the attempt number it names (a gang's are its
// own, one for each start, which every rank's trainer runs under). For a
// workload that continued as new while it ran, launching attaches to the
// agents still running it. The host watches the attempt from when rank 0
// is launched (attemptStarted); a gang's other ranks are stopped when
// any rank ends first.
func (w *workload) launch(ctx workflow.Context, in activities.TrainingInput, started time.Time) *attempt {
	a := &attempt{w: w, started: started}
	w.attempt = a
	if w.nodes() > 1 {
		in.Gang = activities.Gang{Rank: 0, Nodes: w.width(), MasterAddr: w.h.Lease.Instance.Address, MasterPort: masterPort(w.identity, in.Attempt)}
	}
	lead := a.launchRank(ctx, w.h.Lease, in)
	w.host.attemptStarted(ctx, a)
	for i, l := range w.h.Peers {
		pin := in
		pin.InstanceID, pin.Gang.Rank = l.Instance.ID, i+1
		a.launchRank(ctx, l, pin)
	}
	a.mayContinue = lead.mayContinue
	if len(a.ranks) > 1 {
		a.watchGang(ctx)
	}
	return a
}

// launchRank schedules RunTraining on one rank's instance.
func (a *attempt) launchRank(ctx workflow.Context, l *Lease, in activities.TrainingInput) *rankAttempt {
	w := a.w
	k := &rankAttempt{lease: l, in: in}
	a.ranks = append(a.ranks, k)
	actx := titled(trainingOptions(ctx, l.Instance.TaskQueue, w.spec.Work.D(), *w.opts),
		"train attempt "+strconv.Itoa(l.Attempt)+" on "+l.Instance.ID+" ("+offeringName(l.Offering())+") from the latest checkpoint")
	if workflow.GetVersion(ctx, pushControlVersion, workflow.DefaultVersion, 1) >= 1 {
		// The activity goes on when the workflow is cancelled: the
		// workload stops the agent by push and waits for its final
		// checkpoint.
		k.in.Control = activities.ControlPush
		k.in.HeartbeatEvery = w.opts.HeartbeatTimeout / 3
		k.in.SignalEvery = w.opts.SignalEvery
		k.push, _ = workflow.NewDisconnectedContext(ctx)
		actx, _ = workflow.NewDisconnectedContext(actx)
		k.mayContinue = w.market.continuesAsNew() && workflow.GetVersion(ctx, continueWhileTrainingVersion, workflow.DefaultVersion, 1) >= 1
		if workflow.GetVersion(ctx, rideOutVersion, workflow.DefaultVersion, 1) >= 1 {
			k.in.ControlPlaneTolerance = w.opts.ControlPlaneTolerance
			k.result = a.follow(actx, k)
			return k
		}
	} else {
		actx, k.cancel = workflow.WithCancel(actx)
	}
	k.result = workflow.ExecuteActivity(actx, activities.RunTrainingName, k.in)
	return k
}

// watchGang stops the gang's ranks when any of them ends first: the
// others cannot train on without it.
func (a *attempt) watchGang(ctx workflow.Context) {
	workflow.Go(ctx, func(ctx workflow.Context) {
		sel := workflow.NewSelector(ctx)
		completed := false
		for _, k := range a.ranks {
			sel.AddFuture(k.result, func(f workflow.Future) {
				var res activities.TrainingResult
				completed = f.Get(ctx, &res) == nil && res.Outcome == activities.OutcomeCompleted
			})
		}
		sel.Select(ctx)
		if completed {
			// The ranks finish the last step together: stopping the
			// others now would only race rank 0's final model.
			return
		}
		for _, k := range a.ranks {
			k.stop()
		}
	})
}

// masterPort is where rank 0 listens for the other ranks: a port of its
// own for each workload and attempt, as gangs on one machine's loopback
// (the local and simulated clouds) must not meet. The embedded server
// never picks a port of this range for itself (devserver's gangPorts).
func masterPort(identity string, attempt int) int {
	h := fnv.New32a()
	h.Write([]byte(identity + "/" + strconv.Itoa(attempt)))
	return 20000 + int(h.Sum32()%10000)
}

// lead is rank 0's part: the one the workload follows.
func (a *attempt) lead() *rankAttempt { return a.ranks[0] }

// number is the attempt's number, which its agents run under.
func (a *attempt) number() int { return a.lead().in.Attempt }

// stop asks the agent to stop at a checkpoint; the rank's attempt then
// ends.
func (k *rankAttempt) stop() {
	if k.push == nil {
		k.cancel()
		return
	}
	if k.stopped {
		return
	}
	k.stopped = true
	in := activities.StopInput{JobID: k.in.Spec.ID, Attempt: k.in.Attempt}
	workflow.ExecuteActivity(stopOptions(k.push, k.lease.Instance.TaskQueue, k.in.Attempt), activities.StopTrainingName, in)
}

// stop asks rank 0 to stop at a checkpoint; a gang's others follow it.
func (a *attempt) stop() { a.lead().stop() }

// wait waits for rank 0's end; the workload then has no attempt under
// way.
func (a *attempt) wait(ctx workflow.Context) attemptEnd {
	var res activities.TrainingResult
	err := a.lead().result.Get(ctx, &res)
	if a.w.attempt == a {
		a.w.attempt = nil
	}
	return attemptEnd{res: res, err: err, started: a.started, cause: a.cause}
}

// await waits for the attempt to end. A workload whose history grew long
// meanwhile continues as new instead, handing the attempt on: the agents
// go on, and the next run of the workflow attaches to them.
func (a *attempt) await(ctx workflow.Context) (attemptEnd, error) {
	w := a.w
	if a.mayContinue {
		lead := a.lead()
		if err := workflow.Await(ctx, func() bool { return lead.result.IsReady() || w.handOn }); err != nil {
			return attemptEnd{}, err
		}
		if !lead.result.IsReady() && w.standby == nil {
			return attemptEnd{}, a.handOff(ctx)
		}
	}
	return a.wait(ctx), nil
}

// stopFor stops the attempt at a checkpoint for the market's cause and
// waits for it to end.
func (a *attempt) stopFor(ctx workflow.Context, cause stopCause) attemptEnd {
	a.cause = cause
	a.stop()
	return a.wait(ctx)
}

// handOff continues as new with the attempt under way: its agents go on
// running, and the next run of the workflow attaches to them.
func (a *attempt) handOff(ctx workflow.Context) error {
	t := &CarriedAttempt{Started: a.started, Interval: a.lead().in.CheckpointInterval}
	if len(a.ranks) > 1 {
		t.Attempt = a.number()
	}
	a.w.h.Training = t
	return a.w.host.continueAsNew(ctx)
}

// historyFull reports whether this run of the workflow should hand on to
// the next: the server suggests it, or the history passed MaxHistory.
func (w *workload) historyFull(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= w.opts.MaxHistory
}

// ends stops the ranks after rank 0 and waits for each: every rank's
// end, rank 0's (e) first.
func (a *attempt) ends(ctx workflow.Context, e attemptEnd) []nodeEnd {
	ends := []nodeEnd{{a.lead().lease, e}}
	for _, k := range a.ranks[1:] {
		k.stop()
		var res activities.TrainingResult
		err := k.result.Get(ctx, &res)
		ends = append(ends, nodeEnd{k.lease, attemptEnd{res: res, err: err, started: a.started}})
	}
	return ends
}

// peersStopped stops a gang's ranks after rank 0 and reports whether each
// ended stopped. Their results stay ready for ends.
func (a *attempt) peersStopped(ctx workflow.Context) bool {
	ok := true
	for _, k := range a.ranks[1:] {
		k.stop()
		var res activities.TrainingResult
		err := k.result.Get(ctx, &res)
		ok = ok && stoppedCleanly(res, err)
	}
	return ok
}

// settle collects every rank's end (rank 0's is e) and classifies them
// into one verdict.
func (a *attempt) settle(ctx workflow.Context, e attemptEnd) verdict {
	return a.classify(e, a.ends(ctx, e))
}

// stopOptions send StopTraining to the instance's own queue. A stop that
// finds no agent polling is given up quickly: the heartbeat timeout
// finds a dead agent anyway.
func stopOptions(ctx workflow.Context, taskQueue string, attempt int) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              taskQueue,
		ScheduleToStartTimeout: 30 * time.Second,
		StartToCloseTimeout:    10 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 3},
		Summary:                "stop attempt " + strconv.Itoa(attempt) + " at a checkpoint",
	})
}

// follow waits beside the attempt while the workload's market watches,
// until it ends: by itself, stopped, moved by the market, or changed
// over; then every rank's end is collected and classified into the
// verdict.
func (w *workload) follow(ctx workflow.Context, a *attempt) (verdict, error) {
	m := w.market.watch(ctx, w, a)
	e := m.end
	switch {
	case m.err != nil:
		return verdict{}, m.err
	case m.grow:
		e = a.stopFor(ctx, grownByMarket)
	case m.spot != nil:
		return w.changeOver(ctx, a, m.spot)
	}
	return w.verdictOf(ctx, a, e)
}

// verdictOf settles the attempt whose rank 0 ended e into a verdict, and
// folds its final report into the record.
func (w *workload) verdictOf(ctx workflow.Context, a *attempt, e attemptEnd) (verdict, error) {
	if ctx.Err() != nil {
		return verdict{}, temporal.NewCanceledError()
	}
	v := a.settle(ctx, e)
	w.observeResult(ctx, e)
	return v, nil
}

// changeOver stops the attempt on the workload's on-demand instance at a
// checkpoint to move to the spot one it just got (a gang: every rank, at
// the checkpoint it stopped at). If the attempt ended otherwise
// meanwhile (completed, failed, or stopped for a pause or cancel), the
// spot instance is given back unused and that ending is settled as it
// came.
func (w *workload) changeOver(ctx workflow.Context, a *attempt, spot *Lease) (verdict, error) {
	end := a.stopFor(ctx, "")
	stopped := stoppedCleanly(end.res, end.err)
	if stopped && len(a.ranks) > 1 {
		stopped = a.peersStopped(ctx)
	}
	w.standby = nil
	// A spent budget is left to the budget's watcher, which stops the
	// attempt on the new instance at once.
	if !stopped || w.host.mustStop(ctx, stopBudget) != goOn || ctx.Err() != nil {
		w.h.Leases.release(ctx, spot, activities.ReleaseCleanup)
		w.releaseStandbyPeers(ctx)
		return w.verdictOf(ctx, a, end)
	}
	w.observeResult(ctx, end)
	return verdict{ending: endChangedOver, end: end, standby: spot}, nil
}
