package workflows

import (
	"errors"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/internal/telemetry"
	"refuel/pkg/capacity"
	"refuel/pkg/policy"
)

// attempt is one training attempt under way on the run's lease: the
// node agent on the instance runs the trainer, from the latest
// checkpoint, until it completes or is stopped.
type attempt struct {
	lease   *Lease
	in      activities.TrainingInput
	started time.Time
	result  workflow.Future
	// A run stops an attempt by push (StopTraining on the instance's own
	// queue, once: push holds the context it goes out on), or, recorded
	// before push control, by cancelling its activity.
	push    workflow.Context
	stopped bool
	cancel  workflow.CancelFunc
	// mayContinue is set when the run may continue as new while the
	// attempt trains (push control, and not on a clocked market).
	mayContinue bool
	// cause is why the run stopped the attempt, when the market did.
	cause stopCause
	// heard is set once the attempt's agent reported progress.
	heard bool
}

// stop asks the trainer to stop at a checkpoint; the attempt then ends.
func (a *attempt) stop() {
	if a.push == nil {
		a.cancel()
		return
	}
	if a.stopped {
		return
	}
	a.stopped = true
	in := activities.StopInput{JobID: a.in.Spec.ID, Attempt: a.in.Attempt}
	workflow.ExecuteActivity(stopOptions(a.push, a.lease.Instance.TaskQueue, a.in.Attempt), activities.StopTrainingName, in)
}

// stopCause says why a market stopped a training attempt.
type stopCause string

const (
	// movedByMarket: the run's policy chose to hold something else.
	movedByMarket stopCause = "moved"
	// takenByMarket: the market took the spot instance back.
	takenByMarket stopCause = "taken"
	// doneByMarket: the market's account says the work is done.
	doneByMarket stopCause = "done"
	// grownByMarket: an elastic gang got nodes it was short of.
	grownByMarket stopCause = "grown"
)

// attemptEnd is how a training attempt ended.
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

// train runs the job on the run's lease until the attempt ends. A market
// may move the run meanwhile: a deadline run on on-demand changes over
// to a spot instance it got, and trains on there.
func (r *run) train(ctx workflow.Context) (attemptEnd, error) {
	if r.mustStop(ctx) != goOn {
		// Asked to stop while it acquired: the instance goes back untrained.
		return attemptEnd{res: activities.TrainingResult{Outcome: activities.OutcomeStopped}, started: workflow.Now(ctx)}, nil
	}
	r.startAttempt(ctx)
	return r.trainOn(ctx)
}

// trainOn follows the attempt under way until it ends.
func (r *run) trainOn(ctx workflow.Context) (attemptEnd, error) {
	for {
		m := r.market.watch(ctx, r)
		if m.grow {
			return r.stopAttempt(ctx, grownByMarket), nil
		}
		if m.spot == nil {
			return m.end, m.err
		}
		end, moved := r.changeOver(ctx, m.spot)
		if !moved {
			return end, nil
		}
		r.startAttempt(ctx)
	}
}

// startAttempt starts the trainer on the run's lease; the node agent
// restores the latest checkpoint first.
func (r *run) startAttempt(ctx workflow.Context) {
	r.enter(ctx, StateRunning)
	l := r.Lease
	started := workflow.Now(ctx)
	in := activities.TrainingInput{
		Spec: r.spec, Attempt: l.Attempt, InstanceID: l.Instance.ID, CheckpointURL: r.spec.Checkpoint.URL, RunIdentity: r.identity,
		CheckpointInterval: r.checkpointInterval(ctx), StopGrace: r.opts.StopGrace,
	}
	if r.nodes() > 1 {
		r.Attempts++
		in.Attempt = r.Attempts
		r.startGang(ctx, in, started)
		return
	}
	r.launchAttempt(ctx, in, started)
}

// launchAttempt schedules RunTraining for the attempt: to start its
// trainer, or, for a run that continued as new while it trained, to
// attach to the trainer still running.
func (r *run) launchAttempt(ctx workflow.Context, in activities.TrainingInput, started time.Time) {
	r.attempt = r.launchOn(ctx, r.Lease, in, started)
	r.watchBudget(ctx, r.attempt)
}

// launchOn schedules RunTraining on one lease's instance.
func (r *run) launchOn(ctx workflow.Context, l *Lease, in activities.TrainingInput, started time.Time) *attempt {
	a := &attempt{lease: l, in: in, started: started}
	actx := titled(trainingOptions(ctx, l.Instance.TaskQueue, r.spec.Work.D(), r.opts),
		"train attempt "+strconv.Itoa(l.Attempt)+" on "+l.Instance.ID+" ("+offeringName(l.Offering())+") from the latest checkpoint")
	if workflow.GetVersion(ctx, pushControlVersion, workflow.DefaultVersion, 1) >= 1 {
		// The activity goes on when the run is cancelled: the run stops
		// the trainer by push and waits for its final checkpoint.
		a.in.Control = activities.ControlPush
		a.in.HeartbeatEvery = r.opts.HeartbeatTimeout / 3
		a.in.SignalEvery = r.opts.SignalEvery
		a.push, _ = workflow.NewDisconnectedContext(ctx)
		actx, _ = workflow.NewDisconnectedContext(actx)
		_, isClocked := r.market.(*clockedMarket)
		a.mayContinue = !isClocked && workflow.GetVersion(ctx, continueWhileTrainingVersion, workflow.DefaultVersion, 1) >= 1
		if workflow.GetVersion(ctx, rideOutVersion, workflow.DefaultVersion, 1) >= 1 {
			a.in.ControlPlaneTolerance = r.opts.ControlPlaneTolerance
			a.result = r.followAttempt(actx, a)
			return a
		}
	} else {
		actx, a.cancel = workflow.WithCancel(actx)
	}
	a.result = workflow.ExecuteActivity(actx, activities.RunTrainingName, a.in)
	return a
}

// attemptResult waits for the training attempt to end.
func (r *run) attemptResult(ctx workflow.Context) attemptEnd {
	a := r.attempt
	var res activities.TrainingResult
	err := a.result.Get(ctx, &res)
	r.attempt = nil
	return attemptEnd{res: res, err: err, started: a.started, cause: a.cause}
}

// awaitAttempt waits for the training attempt to end. A run whose
// history grew long meanwhile continues as new instead, handing the
// attempt on: the trainer goes on, and the next run attaches to it.
func (r *run) awaitAttempt(ctx workflow.Context) (attemptEnd, error) {
	a := r.attempt
	if a.mayContinue {
		if err := workflow.Await(ctx, func() bool { return a.result.IsReady() || r.handOn }); err != nil {
			return attemptEnd{}, err
		}
		if !a.result.IsReady() && r.standby == nil {
			return attemptEnd{}, r.continueTraining(ctx)
		}
	}
	return r.attemptResult(ctx), nil
}

// stopAttempt stops the trainer at a checkpoint and waits for the
// attempt to end.
func (r *run) stopAttempt(ctx workflow.Context, cause stopCause) attemptEnd {
	r.attempt.cause = cause
	r.attempt.stop()
	return r.attemptResult(ctx)
}

// settle acts on how an attempt ended, for one node or a gang alike (e
// is rank 0's): every rank's end is collected (a run of one node has
// only e), classified once (ending) and acted on once. A lost node is
// settled by nodesLost, whatever the width.
func (r *run) settle(ctx workflow.Context, e attemptEnd) error {
	if ctx.Err() != nil {
		return temporal.NewCanceledError()
	}
	ends := r.rankEnds(ctx, e)
	r.observeResult(ctx, e)
	v := r.classify(e, ends)
	if r.grew(ctx, e, v) {
		return nil
	}
	switch v.ending {
	case endMoved:
		r.release(ctx, activities.ReleasePaused)
	case endDone:
		r.release(ctx, activities.ReleaseCompleted)
		r.finished = true
	case endTaken:
		return r.takenByMarket(ctx, e, v.silent)
	case endCompleted:
		r.completed(ctx, e.res.ModelDigest)
	case endCheckpointsFailed:
		return r.checkpointsFailed(ctx, e.err)
	case endTrainerFailed:
		return r.trainerFailed(ctx, v.message)
	case endLost:
		return r.nodesLost(ctx, v.lost)
	default:
		r.stopped(ctx)
	}
	return nil
}

// nodeEnd is how one rank's attempt ended.
type nodeEnd struct {
	lease *Lease
	end   attemptEnd
}

// lost reports whether the rank's instance was taken or went silent: a
// rank stopped by cancellation, or whose checkpoints fail to verify, is
// not lost, and neither is one that ended in an outcome the run knows
// otherwise.
func (n nodeEnd) lost() bool {
	var canceled *temporal.CanceledError
	if err := n.end.err; err != nil {
		return !errors.As(err, &canceled) && !failedOn(err, classCheckpoint)
	}
	switch n.end.res.Outcome {
	case activities.OutcomeCompleted, activities.OutcomeFailed, activities.OutcomeStopped, activities.OutcomeGangStopped:
		return false
	}
	return true // taken with notice, or an end no agent reports: gone either way
}

// noticed reports whether the rank's instance was taken with notice.
func (n nodeEnd) noticed() bool {
	return n.end.err == nil && n.end.res.Outcome == activities.OutcomePreempted
}

// message is what the failure a lost rank books says.
func (n nodeEnd) message() string {
	if n.end.err != nil {
		return n.end.err.Error()
	}
	return "the attempt ended with outcome " + strconv.Quote(string(n.end.res.Outcome))
}

// rankEnds stops the ranks after rank 0 and waits for each: every rank's
// end, rank 0's (e) first.
func (r *run) rankEnds(ctx workflow.Context, e attemptEnd) []nodeEnd {
	ends := []nodeEnd{{r.Lease, e}}
	for i, p := range r.peers {
		p.stop()
		var res activities.TrainingResult
		err := p.result.Get(ctx, &res)
		ends = append(ends, nodeEnd{r.Peers[i], attemptEnd{res: res, err: err, started: p.started}})
	}
	r.peers = nil
	return ends
}

// ending is what an attempt's end comes to, every rank's end taken
// together.
type ending int

const (
	// endStopped: stopped at a checkpoint or cancelled, for a pause, a
	// yield, a spent budget or a cancel.
	endStopped ending = iota
	endCompleted
	endCheckpointsFailed // no checkpoint verifies: the run ends
	endTrainerFailed     // a rank's trainer failed
	endLost              // a rank's instance was taken or went silent
	// The market's own ends: its policy moved the run, its account says
	// the work is done, or it took a spot instance back.
	endMoved
	endDone
	endTaken
)

// verdict is how settle classifies an attempt's end.
type verdict struct {
	ending ending
	// failed: a rank's trainer failed; message is what the last one
	// that failed said.
	failed  bool
	message string
	lost    []nodeEnd // the ranks lost, in rank order
	// silent is a gang's rank lost without a word when the market took
	// it (endTaken): a fault besides.
	silent *nodeEnd
}

// classify makes one verdict of every rank's end. A run of one node
// heeds the market first: the market stopped its attempt, and a notice
// its agent had not seen yet is the market's preemption all the same. A
// gang heeds its ranks' completion and failures first, then a market
// clock's account; a gang moved by its policy is stopped.
func (r *run) classify(e attemptEnd, ends []nodeEnd) verdict {
	var v verdict
	for _, n := range ends {
		switch {
		case n.lost():
			v.lost = append(v.lost, n)
		case n.end.res.Outcome == activities.OutcomeFailed:
			v.failed, v.message = true, n.end.res.Message
		}
	}
	completed := e.err == nil && e.res.Outcome == activities.OutcomeCompleted
	gang := r.nodes() > 1
	switch {
	case !gang && e.cause == movedByMarket:
		v.ending = endMoved
	case !gang && e.cause == doneByMarket:
		v.ending = endDone
	case !gang && e.cause == takenByMarket && !completed:
		v.ending = endTaken
	case completed:
		v.ending = endCompleted
	case failedOn(e.err, classCheckpoint):
		v.ending = endCheckpointsFailed
	case v.failed:
		v.ending = endTrainerFailed
	case gang && r.onMarketClock() && e.cause == doneByMarket:
		v.ending = endDone
	case gang && r.onMarketClock() && (len(v.lost) > 0 || e.cause == takenByMarket):
		v.ending = endTaken
		for i := range v.lost {
			if v.lost[i].end.err != nil {
				v.silent = &v.lost[i]
			}
		}
	case len(v.lost) > 0:
		v.ending = endLost
	}
	return v
}

// nodesLost settles ranks lost, one node's or a gang's alike: what rank
// 0's agent last reported counts when it went silent; a joined base
// machine lost is node-lost, whatever the width. Otherwise a run of one
// node taken with notice gives its instance back on the way to the
// replacement (one trip, preempted) and a silent one restarts as a fault
// max_restarts caps; a gang replaces the nodes lost, and a gang that
// lost every node is a run that lost its one (replaceNodes).
func (r *run) nodesLost(ctx workflow.Context, lost []nodeEnd) error {
	n := lost[0]
	if j := joinedMachineLost(lost); j != nil {
		n = *j
	}
	if n.lease == r.Lease && !n.noticed() && r.countsLastHeartbeat(ctx) {
		r.observeLastHeartbeat(n.end.err)
		n.end.silent = true
	}
	if onJoinedMachine(n.lease) {
		r.addFailure(ctx, string(capacity.NodeLost), n.lease.Offering().Key(), n.message())
		r.nodeLost(ctx, n.end)
		return nil
	}
	if r.nodes() > 1 {
		return r.replaceNodes(ctx, n, lost)
	}
	if n.noticed() {
		r.preempted(ctx, n.end, n.end.res.LastStep, true)
		return nil
	}
	cause, msg := lossCause(n.end.err), n.message()
	r.addFailure(ctx, string(cause), n.lease.Offering().Key(), msg)
	if cause.Remedy().Preemption {
		r.preempted(ctx, n.end, r.Step, false)
	}
	return r.restart(ctx, cause, msg)
}

// countsLastHeartbeat reports whether a silent rank 0's last heartbeat
// counts. Runs of one node recorded before it counted a silent loss from
// their own record, which checkpoints reach in batches: often no work
// lost.
func (r *run) countsLastHeartbeat(ctx workflow.Context) bool {
	return r.nodes() > 1 || workflow.GetVersion(ctx, silentLossVersion, workflow.DefaultVersion, 1) >= 1
}

// takenByMarket settles a run whose spot instance a market's account
// took (a gang: any of its nodes, and the whole gang goes back, as
// `starter sim --nodes N` replays it). The agent may not have seen the
// notice yet: the account counts the preemption either way. A gang's
// node lost without a word is a fault besides, which max_restarts caps.
func (r *run) takenByMarket(ctx workflow.Context, e attemptEnd, silent *nodeEnd) error {
	atStep := max(e.res.LastStep, r.Step)
	if silent == nil {
		r.preempted(ctx, e, atStep, true)
		return nil
	}
	if silent.lease == r.Lease {
		r.observeLastHeartbeat(silent.end.err)
		e.silent = true
	}
	cause, msg := lossCause(silent.end.err), silent.end.err.Error()
	r.addFailure(ctx, string(cause), silent.lease.Offering().Key(), msg)
	r.preempted(ctx, e, atStep, false)
	return r.restart(ctx, cause, msg)
}

// The ends of an attempt settled alike for every width: every instance
// held is given back for the same reason.

// completed ends the run's work: the model is done.
func (r *run) completed(ctx workflow.Context, digest string) {
	r.finished = true
	r.ModelDigest = digest
	r.release(ctx, activities.ReleaseCompleted)
}

// trainerFailed books a trainer that failed, a fault max_restarts caps.
func (r *run) trainerFailed(ctx workflow.Context, msg string) error {
	r.addFailure(ctx, string(capacity.TrainerFault), r.Lease.Offering().Key(), msg)
	r.release(ctx, activities.ReleaseFailed)
	return r.restart(ctx, capacity.TrainerFault, msg)
}

// checkpointsFailed ends the run: no checkpoint verifies, and training
// again from step 0 would throw the work away silently.
func (r *run) checkpointsFailed(ctx workflow.Context, err error) error {
	r.addFailure(ctx, classCheckpoint, r.Lease.Offering().Key(), err.Error())
	r.release(ctx, activities.ReleaseFailed)
	return temporal.NewNonRetryableApplicationError(err.Error(), classCheckpoint, nil)
}

// stopped gives back what an attempt stopped at a checkpoint held: for a
// yield to the pool, a spent budget, or a pause.
func (r *run) stopped(ctx workflow.Context) {
	reason := activities.ReleasePaused // a pause, or a cancel
	switch r.mustStop(ctx, stopPause) {
	case stopYield:
		reason = activities.ReleaseYielded
	case stopBudget:
		reason = activities.ReleaseOverBudget
	}
	r.release(ctx, reason)
}

// classCheckpoint is the failure of a run none of whose checkpoints
// verifies; the node agent fails an attempt with an application error of
// this type.
const classCheckpoint = "checkpoint"

// failedOn reports whether err is an application error of the type.
func failedOn(err error, errType string) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == errType
}

// observeResult folds an attempt's final report into status.
func (r *run) observeResult(ctx workflow.Context, e attemptEnd) {
	res := e.res
	if r.Recovery != nil && r.LastRecovery != nil && res.Outcome != activities.OutcomeFailed {
		// The "restored" signal never came (or came late): the attempt's
		// own report shows it did resume.
		r.recovered(ctx, res.RestoredStep, e.started)
	}
	r.foldProgress(res.LastStep, res.TotalSteps, res.LastCheckpoint)
}

// foldProgress folds what an attempt reached into the record, from its
// progress signals, its result or its last heartbeat alike: the step
// (never back), the total steps when known, and a checkpoint no older
// than the one recorded.
func (r *run) foldProgress(step, total int64, c *activities.CheckpointRef) {
	r.Step = max(r.Step, step)
	if total > 0 {
		r.TotalSteps = total
	}
	if c != nil && (r.LastCheckpoint == nil || c.Step >= r.LastCheckpoint.Step) {
		r.LastCheckpoint = c
	}
}

// observeLastHeartbeat folds in what the agent of an attempt that went
// silent last reported: the step it reached and its latest checkpoint,
// which the run may not have been signalled yet (checkpoints close
// together are told together). The work lost is counted from them.
func (r *run) observeLastHeartbeat(err error) {
	var timeout *temporal.TimeoutError
	if !errors.As(err, &timeout) || !timeout.HasLastHeartbeatDetails() {
		return
	}
	var last activities.Progress
	if timeout.LastHeartbeatDetails(&last) != nil {
		return
	}
	c := last.Checkpoint
	if c != nil && r.LastCheckpoint != nil && c.Step == r.LastCheckpoint.Step {
		c = nil // a signal told this checkpoint first: it stays as told
	}
	r.foldProgress(last.Step, 0, c)
}

// preempted records that the market took the run's instance and gives
// back what is left of it; the loop then acquires a replacement, trying
// this zone last, and resumes from the latest checkpoint.
func (r *run) preempted(ctx workflow.Context, e attemptEnd, atStep int64, withNotice bool) {
	oneTrip := r.recoversInOneTrip(ctx)
	r.lose(ctx, lostNodes{lead: r.Lease, end: e, atStep: atStep, withNotice: withNotice, preemption: true})
	if oneTrip && withNotice {
		// A silent loss waits before it restarts: its instance is
		// released at once.
		r.releaseLater(ctx, activities.ReleasePreempted)
		return
	}
	r.release(ctx, activities.ReleasePreempted)
}

// lostNodes is a loss of one node or more of the run's gang (one node,
// for a run of one), lead the one that names it.
type lostNodes struct {
	lead   *Lease
	end    attemptEnd // lead's
	atStep int64      // the step the gang had reached
	// withNotice: the market announced it. preemption: it counts as one
	// (capacity.FaultRemedy.Preemption, or any loss with notice).
	withNotice, preemption bool
}

// lose books a loss, for one node or a gang alike: every node held
// computed the steps past the latest checkpoint and computes them again,
// so the work lost is each node's. A preemption is counted, named in
// last_preemption and its zone tried last; either way a recovery starts
// and the run is preempted until it trains again.
func (r *run) lose(ctx workflow.Context, n lostNodes) {
	now := workflow.Now(ctx)
	ckptStep := int64(0)
	if r.LastCheckpoint != nil {
		ckptStep = r.LastCheckpoint.Step
	}
	perNode := r.lostWorkSeconds(now, n.end, n.atStep, ckptStep, n.withNotice)
	for _, l := range r.gang() {
		r.Ledger.AddLostWork(l.Instance.ID, perNode)
	}
	lost := perNode * float64(r.width())
	r.LostWorkSecs += lost
	r.Recovery = &Recovery{Since: now}
	if n.preemption {
		r.Preemptions++
		r.LastPreemption = &PreemptionInfo{
			Time: now, InstanceID: n.lead.Instance.ID, Zone: n.lead.Offering().Zone,
			AtStep: n.atStep, CheckpointStep: ckptStep, WithNotice: n.withNotice,
		}
		r.AvoidZone = n.lead.Offering().Zone
		m := workflow.GetMetricsHandler(ctx).WithTags(telemetry.OfferingTags(n.lead.Offering()))
		m.Counter(telemetry.PreemptionsTotal).Inc(1)
		m.Counter(telemetry.LostWorkSeconds).Inc(int64(lost))
	}
	r.enter(ctx, StatePreempted)
}

// onJoinedMachine reports whether the lease is on a machine that joined
// the base group: its loss is the machine's, cause node-lost.
func onJoinedMachine(l *Lease) bool {
	return l != nil && l.Instance.Tags[capacity.TagJoined] != ""
}

// nodeLost books a joined base machine gone silent under the run: the
// work since the latest checkpoint is lost and the run recovers from it
// elsewhere, as after a preemption, but it is no spot preemption and no
// fault: counted apart (restarts node-lost), against no max_restarts,
// and its release teaches the market memory nothing. A gang goes back
// whole. The pool, told by the machine's BaseNode workflow, asks the run
// to move (a gang: yields its grant and places it again); it waits for
// that in admit.
func (r *run) nodeLost(ctx workflow.Context, e attemptEnd) {
	r.Restarts.NodeLost++
	workflow.GetLogger(ctx).Warn("base machine lost under the run; recovering from the latest checkpoint", "instance", r.Lease.Instance.ID)
	r.lose(ctx, lostNodes{lead: r.Lease, end: e, atStep: r.Step, preemption: capacity.NodeLost.Remedy().Preemption})
	r.release(ctx, activities.ReleaseReason(capacity.NodeLost))
}

// lostWorkSeconds estimates the compute that must be redone: the steps
// past the last checkpoint, at the pace the attempt trained since it
// started.
func (r *run) lostWorkSeconds(now time.Time, e attemptEnd, atStep, ckptStep int64, withNotice bool) float64 {
	ckpt := r.LastCheckpoint
	if e.silent && ckpt != nil && ckpt.Time.After(e.started) {
		// Everything since the latest checkpoint is gone, the steps since
		// its agent last reported included. (The checkpoint's time is the
		// instance's clock, which may run ahead.)
		return max(0, now.Sub(ckpt.Time).Seconds())
	}
	if atStep <= ckptStep {
		return 0
	}
	trained := now.Sub(e.started).Seconds()
	if !withNotice && ckpt != nil && ckpt.Time.After(e.started) {
		// A silent loss of a run recorded before silentLossVersion.
		return now.Sub(ckpt.Time).Seconds()
	}
	progressed := atStep - r.resumedFrom()
	if progressed <= 0 || trained <= 0 {
		return 0
	}
	return float64(atStep-ckptStep) * trained / float64(progressed)
}

// resumedFrom is the step training resumed from on the current lease.
func (r *run) resumedFrom() int64 {
	if lr := r.LastRecovery; lr != nil {
		for _, l := range r.gang() {
			if lr.InstanceID == l.Instance.ID {
				return lr.ResumedFromStep
			}
		}
	}
	return 0
}

// latest is the later of two times.
func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// recovered records that training resumed on the replacement instance,
// and books the recovery's overhead: the replacement was paid for from
// its launch, and trained only from now.
func (r *run) recovered(ctx workflow.Context, fromStep int64, at time.Time) {
	since := r.Recovery.Since
	if !since.IsZero() && r.Lease != nil {
		telemetry.ObserveRecovery(workflow.GetMetricsHandler(ctx), r.Lease.Offering(), at.Sub(since))
	}
	r.Recovery = nil
	lr := r.LastRecovery
	r.Recoveries++
	lr.ResumedAt = at
	lr.ResumedFromStep = fromStep
	if r.nodes() > 1 {
		// Every node of the gang waited: a kept one from the loss, a new
		// one from its launch.
		for _, l := range r.gang() {
			r.Ledger.AddRecovery(l.Instance.ID, at.Sub(latest(l.Since, since)).Seconds())
		}
	} else {
		r.Ledger.AddRecovery(lr.InstanceID, at.Sub(lr.ReplacementAt).Seconds())
	}
	workflow.GetMetricsHandler(ctx).Counter(telemetry.RecoveriesTotal).Inc(1)
}

// changeOver moves the run from its on-demand instance to the spot one
// it just got: the trainer stops at a checkpoint, the on-demand instance
// is released (reason changeover) and the spot one becomes the run's,
// paid for since it was launched. If the attempt ended otherwise
// meanwhile (completed, failed, or stopped for a pause or cancel), the
// spot instance is given back unused and that ending is returned to
// settle; moved is false then.
func (r *run) changeOver(ctx workflow.Context, spot *Lease) (end attemptEnd, moved bool) {
	end = r.stopAttempt(ctx, "")
	stopped := stoppedCleanly(end.res, end.err)
	if stopped && len(r.peers) > 0 {
		// A gang changes over whole, every rank at the checkpoint it
		// stopped at; a rank that ended otherwise is settled as the gang.
		stopped = r.peersStopped(ctx)
	}
	r.standby = nil
	// A spent budget is left to the budget's watcher, which stops the
	// attempt on the new instance at once.
	if !stopped || r.mustStop(ctx, stopBudget) != goOn || ctx.Err() != nil {
		r.Leases.release(ctx, spot, activities.ReleaseCleanup)
		r.releaseStandbyPeers(ctx)
		return end, false
	}
	r.observeResult(ctx, end)
	r.peers = nil
	r.release(ctx, activities.ReleaseChangeover)
	r.use(ctx, spot)
	r.Peers, r.standbyPeers = r.standbyPeers, nil
	r.Changeovers++
	return end, true
}

// stoppedCleanly reports whether an attempt ended because it was stopped:
// at a checkpoint, by push, or cancelled; a gang's rank also when its
// trainer stopped because its gang did.
func stoppedCleanly(res activities.TrainingResult, err error) bool {
	var canceled *temporal.CanceledError
	stopped := res.Outcome == activities.OutcomeStopped || res.Outcome == activities.OutcomeGangStopped
	return (err == nil && stopped) || errors.As(err, &canceled)
}

// peersStopped stops a gang's ranks after rank 0 and reports whether each
// ended stopped. Their results stay ready for settle (rankEnds).
func (r *run) peersStopped(ctx workflow.Context) bool {
	ok := true
	for _, p := range r.peers {
		p.stop()
		var res activities.TrainingResult
		err := p.result.Get(ctx, &res)
		ok = ok && stoppedCleanly(res, err)
	}
	return ok
}

// checkpointInterval is how often the trainer on the run's instance
// should checkpoint: the spec's interval, or for "auto" the Young/Daly
// optimum from what every run so far measured on the instance's pool
// (write times, time held, preemptions), within the spec's bounds.
func (r *run) checkpointInterval(ctx workflow.Context) time.Duration {
	if d, ok := r.spec.Checkpoint.FixedInterval(); ok {
		return d
	}
	c := r.spec.Checkpoint
	var log policy.CheckpointLog
	if workflow.GetVersion(ctx, autoCheckpointVersion, workflow.DefaultVersion, 1) >= 1 {
		err := r.readMemory(ctx, activities.PoolCheckpointLogName, "what runs measured on "+offeringName(r.Lease.Offering())+" (interval: auto)", r.Lease.Offering()).Get(ctx, &log)
		if err != nil {
			workflow.GetLogger(ctx).Warn("pool's checkpoint log unavailable; checkpointing at the lower bound", "error", err)
		}
	}
	d := log.Interval(autoCheckpointPrior, c.MinInterval.D(), c.MaxInterval.D())
	r.CheckpointIntervalSecs = d.Seconds()
	return d
}

// autoCheckpointPrior is the preemption-free time a pool is credited with
// before any is measured: a new pool is neither trusted forever nor
// assumed to be taken at once.
const autoCheckpointPrior = time.Hour
