package workload

import (
	"hash/fnv"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
)

// Attempt is one attempt on what a workload holds: the node agent of
// every rank runs the job, from the latest checkpoint, under one attempt
// number, until it completes or is stopped. The workload launches it,
// follows it while its market watches, and settles it into a verdict
// (verdict.go); the host acts on the verdict.
type Attempt struct {
	W       *Workload
	ranks   []*rankAttempt // rank 0 first
	started time.Time
	// MayContinue is set when the workload may continue as new while the
	// attempt runs (push control, and a market that allows it).
	MayContinue bool
	// cause is why the workload stopped the attempt, when its market did.
	cause StopCause
}

// rankAttempt is one rank's part of an attempt: the RunTraining activity
// on its instance's own task queue.
type rankAttempt struct {
	lease  *Lease
	in     activities.TrainingInput
	Result workflow.Future
	// A workload stops an attempt by push (StopTraining on the instance's
	// own queue, once: push holds the context it goes out on), or,
	// recorded before push control, by cancelling its activity.
	push    workflow.Context
	stopped bool
	cancel  workflow.CancelFunc
	// MayContinue: see attempt.MayContinue.
	mayContinue bool
	// heard is set once the rank's agent reported progress, or the
	// cluster says it heartbeats (attempt.send).
	heard bool
}

// StopCause says why a market stopped an attempt.
type StopCause string

const (
	// MovedByMarket: the workload's policy chose to hold something else.
	MovedByMarket StopCause = "moved"
	// TakenByMarket: the market took the spot instance back.
	TakenByMarket StopCause = "taken"
	// DoneByMarket: the market's account says the work is done.
	DoneByMarket StopCause = "done"
	// GrownByMarket: an elastic gang got nodes it was short of.
	GrownByMarket StopCause = "grown"
)

// AttemptEnd is how an attempt ended, as rank 0 reported it.
type AttemptEnd struct {
	Res     activities.TrainingResult
	Err     error
	started time.Time
	Cause   StopCause
	// silent is set when the instance was lost without a word and its
	// agent's last heartbeat was heard: everything since the latest
	// checkpoint is lost.
	silent bool
}

// Launch starts an attempt on every instance the workload holds: in is
// rank 0's input, under the attempt number it names (a gang's are its
// own, one for each start, which every rank's trainer runs under). For a
// workload that continued as new while it ran, launching attaches to the
// agents still running it. The host watches the attempt from when rank 0
// is launched (AttemptStarted); a gang's other ranks are stopped when
// any rank ends first.
func (w *Workload) Launch(ctx workflow.Context, in activities.TrainingInput, started time.Time) *Attempt {
	a := &Attempt{W: w, started: started}
	w.Attempt = a
	if w.Nodes() > 1 {
		in.Gang = activities.Gang{Rank: 0, Nodes: w.NodesNow(), MasterAddr: w.Held.Lease.Instance.Address, MasterPort: masterPort(w.Identity, in.Attempt)}
	}
	lead := a.launchRank(ctx, w.Held.Lease, in)
	w.Host.AttemptStarted(ctx, a)
	for i, l := range w.Held.Peers {
		pin := in
		pin.InstanceID, pin.Gang.Rank = l.Instance.ID, i+1
		a.launchRank(ctx, l, pin)
	}
	a.MayContinue = lead.mayContinue
	if len(a.ranks) > 1 {
		a.watchGang(ctx)
	}
	return a
}

// launchRank schedules RunTraining on one rank's instance.
func (a *Attempt) launchRank(ctx workflow.Context, l *Lease, in activities.TrainingInput) *rankAttempt {
	w := a.W
	k := &rankAttempt{lease: l, in: in}
	a.ranks = append(a.ranks, k)
	actx := Titled(trainingOptions(ctx, l.Instance.TaskQueue, w.Spec.Work.D(), *w.Opts),
		"train attempt "+strconv.Itoa(l.Attempt)+" on "+l.Instance.ID+" ("+OfferingName(l.Offering())+") from the latest checkpoint")
	if workflow.GetVersion(ctx, pushControlVersion, workflow.DefaultVersion, 1) >= 1 {
		// The activity goes on when the workflow is cancelled: the
		// workload stops the agent by push and waits for its final
		// checkpoint.
		k.in.Control = activities.ControlPush
		k.in.HeartbeatEvery = w.Opts.HeartbeatTimeout / 3
		k.in.SignalEvery = w.Opts.SignalEvery
		k.push, _ = workflow.NewDisconnectedContext(ctx)
		actx, _ = workflow.NewDisconnectedContext(actx)
		k.mayContinue = w.Market.ContinuesAsNew() && workflow.GetVersion(ctx, continueWhileTrainingVersion, workflow.DefaultVersion, 1) >= 1
		if workflow.GetVersion(ctx, rideOutVersion, workflow.DefaultVersion, 1) >= 1 {
			k.in.ControlPlaneTolerance = w.Opts.ControlPlaneTolerance
			k.Result = a.Follow(actx, k)
			return k
		}
	} else {
		actx, k.cancel = workflow.WithCancel(actx)
	}
	k.Result = workflow.ExecuteActivity(actx, activities.RunTrainingName, k.in)
	return k
}

// watchGang stops the gang's ranks when any of them ends first: the
// others cannot train on without it.
func (a *Attempt) watchGang(ctx workflow.Context) {
	workflow.Go(ctx, func(ctx workflow.Context) {
		sel := workflow.NewSelector(ctx)
		completed := false
		for _, k := range a.ranks {
			sel.AddFuture(k.Result, func(f workflow.Future) {
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
			k.Stop()
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

// Lead is rank 0's part: the one the workload follows.
func (a *Attempt) Lead() *rankAttempt { return a.ranks[0] }

// Number is the attempt's number, which its agents run under.
func (a *Attempt) Number() int { return a.Lead().in.Attempt }

// Stop asks the agent to stop at a checkpoint; the rank's attempt then
// ends.
func (k *rankAttempt) Stop() {
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

// Stop asks rank 0 to stop at a checkpoint; a gang's others follow it.
func (a *Attempt) Stop() { a.Lead().Stop() }

// Wait waits for rank 0's end; the workload then has no attempt under
// way.
func (a *Attempt) Wait(ctx workflow.Context) AttemptEnd {
	var res activities.TrainingResult
	err := a.Lead().Result.Get(ctx, &res)
	if a.W.Attempt == a {
		a.W.Attempt = nil
	}
	return AttemptEnd{Res: res, Err: err, started: a.started, Cause: a.cause}
}

// await waits for the attempt to end. A workload whose history grew long
// meanwhile continues as new instead, handing the attempt on: the agents
// go on, and the next run of the workflow attaches to them.
func (a *Attempt) await(ctx workflow.Context) (AttemptEnd, error) {
	w := a.W
	if a.MayContinue {
		lead := a.Lead()
		if err := workflow.Await(ctx, func() bool { return lead.Result.IsReady() || w.HandOn }); err != nil {
			return AttemptEnd{}, err
		}
		if !lead.Result.IsReady() && w.Standby == nil {
			return AttemptEnd{}, a.HandOff(ctx)
		}
	}
	return a.Wait(ctx), nil
}

// StopFor stops the attempt at a checkpoint for the market's cause and
// waits for it to end.
func (a *Attempt) StopFor(ctx workflow.Context, cause StopCause) AttemptEnd {
	a.cause = cause
	a.Stop()
	return a.Wait(ctx)
}

// HandOff continues as new with the attempt under way: its agents go on
// running, and the next run of the workflow attaches to them.
func (a *Attempt) HandOff(ctx workflow.Context) error {
	t := &CarriedAttempt{Started: a.started, Interval: a.Lead().in.CheckpointInterval}
	if len(a.ranks) > 1 {
		t.Attempt = a.Number()
	}
	a.W.Held.Training = t
	return a.W.Host.ContinueAsNew(ctx)
}

// HistoryFull reports whether this run of the workflow should hand on to
// the next: the server suggests it, or the history passed MaxHistory.
func (w *Workload) HistoryFull(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= w.Opts.MaxHistory
}

// ends stops the ranks after rank 0 and waits for each: every rank's
// end, rank 0's (e) first.
func (a *Attempt) ends(ctx workflow.Context, e AttemptEnd) []NodeEnd {
	ends := []NodeEnd{{a.Lead().lease, e}}
	for _, k := range a.ranks[1:] {
		k.Stop()
		var res activities.TrainingResult
		err := k.Result.Get(ctx, &res)
		ends = append(ends, NodeEnd{k.lease, AttemptEnd{Res: res, Err: err, started: a.started}})
	}
	return ends
}

// peersStopped stops a gang's ranks after rank 0 and reports whether each
// ended stopped. Their results stay ready for ends.
func (a *Attempt) peersStopped(ctx workflow.Context) bool {
	ok := true
	for _, k := range a.ranks[1:] {
		k.Stop()
		var res activities.TrainingResult
		err := k.Result.Get(ctx, &res)
		ok = ok && StoppedCleanly(res, err)
	}
	return ok
}

// settle collects every rank's end (rank 0's is e) and classifies them
// into one verdict.
func (a *Attempt) settle(ctx workflow.Context, e AttemptEnd) Verdict {
	return a.Classify(e, a.ends(ctx, e))
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

// Follow waits beside the attempt while the workload's market watches,
// until it ends: by itself, stopped, moved by the market, or changed
// over; then every rank's end is collected and classified into the
// verdict.
func (w *Workload) Follow(ctx workflow.Context, a *Attempt) (Verdict, error) {
	m := w.Market.Watch(ctx, w, a)
	e := m.End
	switch {
	case m.Err != nil:
		return Verdict{}, m.Err
	case m.Grow:
		e = a.StopFor(ctx, GrownByMarket)
	case m.Spot != nil:
		return w.changeOver(ctx, a, m.Spot)
	}
	return w.verdictOf(ctx, a, e)
}

// verdictOf settles the attempt whose rank 0 ended e into a verdict, and
// folds its final report into the record.
func (w *Workload) verdictOf(ctx workflow.Context, a *Attempt, e AttemptEnd) (Verdict, error) {
	if ctx.Err() != nil {
		return Verdict{}, temporal.NewCanceledError()
	}
	v := a.settle(ctx, e)
	w.ObserveResult(ctx, e)
	return v, nil
}

// changeOver stops the attempt on the workload's on-demand instance at a
// checkpoint to move to the spot one it just got (a gang: every rank, at
// the checkpoint it stopped at). If the attempt ended otherwise
// meanwhile (completed, failed, or stopped for a pause or cancel), the
// spot instance is given back unused and that ending is settled as it
// came.
func (w *Workload) changeOver(ctx workflow.Context, a *Attempt, spot *Lease) (Verdict, error) {
	end := a.StopFor(ctx, "")
	stopped := StoppedCleanly(end.Res, end.Err)
	if stopped && len(a.ranks) > 1 {
		stopped = a.peersStopped(ctx)
	}
	w.Standby = nil
	// A spent budget is left to the budget's watcher, which stops the
	// attempt on the new instance at once.
	if !stopped || w.Host.MustStop(ctx, StopBudget) != GoOn || ctx.Err() != nil {
		w.Held.Leases.Release(ctx, spot, activities.ReleaseCleanup)
		w.ReleaseStandbyPeers(ctx)
		return w.verdictOf(ctx, a, end)
	}
	w.ObserveResult(ctx, end)
	return Verdict{Ending: EndChangedOver, End: end, Standby: spot}, nil
}
