package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/internal/telemetry"
	"refuel/pkg/capacity"
)

// recovery gets a workload running again after it lost what an attempt
// ran on, one node's or a gang's, for every cause: the market took an
// instance with notice, an instance or its agent went silent, a base
// machine was lost, the trainer failed, or no checkpoint verifies. What
// each cause counts against and what cures it is the fault table's
// (capacity.FaultRemedy). A recovery goes in four steps (run):
//
//  1. book the loss: the failure, the work lost, the preemption;
//  2. give back what was lost, and keep a gang's other nodes where it
//     can go on without them;
//  3. replace the nodes lost, shrink to those kept, or restart;
//  4. record the recovery: opened when the loss is booked (or a yield
//     gives the capacity back), the replacement named when it is
//     acquired (replaced), closed when the workload runs on it again
//     (resumed).
//
// Only a recovery writes Holding.Recovery and Record.LastRecovery.
type recovery struct{ w *workload }

func (w *workload) recovery() recovery { return recovery{w} }

// loss is what a workload lost, and why.
type loss struct {
	// fault is why; "" for an instance the market took with notice.
	fault capacity.Fault
	msg   string // what the failure booked for the fault says
	// lead is the rank that names the loss (rank 0 for the whole
	// attempt's); struck is the instance the fault struck, if another.
	lead   nodeEnd
	struck *Lease
	lost   []nodeEnd // the ranks lost
	atStep int64     // the step the workload had reached
	// whole: everything held goes back (the market took the whole gang,
	// or the fault was the attempt's, not one node's).
	whole bool
}

// noticed reports whether the market announced the loss.
func (l loss) noticed() bool { return l.fault == "" }

// remedy is what the fault counts against and what cures it; a loss
// with notice is cured by a new instance.
func (l loss) remedy() capacity.FaultRemedy {
	if l.noticed() {
		return capacity.FaultRemedy{Preemption: true, Teaches: true, Cure: capacity.NewInstance}
	}
	return l.fault.Remedy()
}

// losesInstance reports whether the instance was lost, with the work
// since the latest checkpoint: not so when the trainer failed on it or
// no checkpoint verifies.
func (l loss) losesInstance() bool {
	c := l.remedy().Cure
	return c == capacity.NewInstance || c == capacity.OtherMachine
}

// releaseReason is why what was lost is given back, by its cure.
func (l loss) releaseReason() activities.ReleaseReason {
	switch l.remedy().Cure {
	case capacity.OtherMachine:
		return activities.ReleaseReason(l.fault)
	case capacity.RestartTrainer, capacity.NoCure:
		return activities.ReleaseFailed
	}
	return activities.ReleasePreempted
}

// run recovers from l, step by step.
func (rc recovery) run(ctx workflow.Context, l loss) error {
	// 1. Book the loss.
	oneTrip := rc.book(ctx, l)
	// 2. Give back what was lost; a gang keeps its other nodes.
	gang := rc.giveBack(ctx, l, oneTrip)
	// 3. Replace, shrink or restart.
	return rc.resume(ctx, l, gang)
	// 4. The replacement is recorded when it is acquired (replaced),
	// the recovery closed when the workload runs on it (resumed).
}

// book books the loss: the failure, for a fault; for a lost instance the
// work lost on every node held and, when it counts as one, the
// preemption (its zone tried last); the recovery is open from now.
func (rc recovery) book(ctx workflow.Context, l loss) (oneTrip bool) {
	w := rc.w
	if !l.noticed() {
		struck := l.struck
		if struck == nil {
			struck = l.lead.lease
		}
		w.addFailure(ctx, string(l.fault), struck.Offering().Key(), l.msg)
	}
	if !l.losesInstance() {
		return false
	}
	preemption := l.remedy().Preemption
	if preemption {
		oneTrip = w.recoversInOneTrip(ctx)
	}
	if l.fault == capacity.NodeLost {
		workflow.GetLogger(ctx).Warn("base machine lost under the workload; recovering from the latest checkpoint", "instance", l.lead.lease.Instance.ID)
	}
	now := workflow.Now(ctx)
	ckptStep := int64(0)
	if c := w.rec.LastCheckpoint; c != nil {
		ckptStep = c.Step
	}
	// Every node held computed the steps past the latest checkpoint and
	// computes them again: the work lost is each node's.
	perNode := rc.lostWorkSeconds(now, l.lead.end, l.atStep, ckptStep, l.noticed())
	for _, held := range w.gang() {
		w.h.Ledger.AddLostWork(held.Instance.ID, perNode)
	}
	lost := perNode * float64(w.width())
	w.rec.LostWorkSecs += lost
	rc.begin(now)
	if preemption {
		lead := l.lead.lease
		w.rec.Preemptions++
		w.rec.LastPreemption = &PreemptionInfo{
			Time: now, InstanceID: lead.Instance.ID, Zone: lead.Offering().Zone,
			AtStep: l.atStep, CheckpointStep: ckptStep, WithNotice: l.noticed(),
		}
		w.h.AvoidZone = lead.Offering().Zone
		m := workflow.GetMetricsHandler(ctx).WithTags(telemetry.OfferingTags(lead.Offering()))
		m.Counter(telemetry.PreemptionsTotal).Inc(1)
		m.Counter(telemetry.LostWorkSeconds).Inc(int64(lost))
	}
	w.host.enter(ctx, StatePreempted)
	return oneTrip
}

// giveBack gives back what was lost, for the reason its cure names. A
// gang the market took only some nodes of keeps the others: it returns
// the gang in rank order, nil where a node was given back. A run of one
// node taken with notice, recovering in one trip, gives its instance
// back on the way to the replacement (releaseLater).
func (rc recovery) giveBack(ctx workflow.Context, l loss, oneTrip bool) []*Lease {
	w := rc.w
	if w.nodes() > 1 && !l.whole && l.remedy().Cure == capacity.NewInstance {
		gang := w.gang()
		for rank, held := range gang {
			if endOf(l.lost, held) != nil {
				w.h.Leases.release(ctx, held, activities.ReleasePreempted)
				gang[rank] = nil
			}
		}
		w.h.Lease, w.h.Peers = nil, nil
		return gang
	}
	if oneTrip && l.noticed() {
		w.releaseLater(ctx, l.releaseReason())
		return nil
	}
	w.release(ctx, l.releaseReason())
	return nil
}

// resume is what the workload does next: a fault no instance cures ends
// it; a gang that kept nodes replaces the others; a fault that counts
// restarts after its backoff; a loss with notice acquires again at
// once.
func (rc recovery) resume(ctx workflow.Context, l loss, gang []*Lease) error {
	switch {
	case l.remedy().Cure == capacity.NoCure:
		return temporal.NewNonRetryableApplicationError(l.msg, l.remedy().Type, nil)
	case gang != nil:
		return rc.replace(ctx, l, gang)
	case l.noticed():
		return nil
	}
	return rc.restart(ctx, l.fault, l.msg)
}

// begin opens a recovery: the workload lost its capacity (or gave it back
// to the pool) at now, and resumes from its latest checkpoint on the
// next.
func (rc recovery) begin(now time.Time) {
	rc.w.h.Recovery = &Recovery{Since: now}
}

// replaced names the replacement of a recovery under way: l, acquired
// at at (its launch, or when a gang went on with the nodes it kept).
func (rc recovery) replaced(l *Lease, at time.Time) {
	if rc.w.h.Recovery != nil {
		rc.w.rec.LastRecovery = &RecoveryInfo{ReplacementAt: at, InstanceID: l.Instance.ID}
	}
}

// resumed closes the recovery under way, if its replacement is known:
// the workload ran again from fromStep at at. It books the recovery's
// overhead: the replacement was paid for from its launch, and worked
// only from at.
func (rc recovery) resumed(ctx workflow.Context, fromStep int64, at time.Time) {
	w := rc.w
	if w.h.Recovery == nil || w.rec.LastRecovery == nil {
		return
	}
	since := w.h.Recovery.Since
	if !since.IsZero() && w.h.Lease != nil {
		telemetry.ObserveRecovery(workflow.GetMetricsHandler(ctx), w.h.Lease.Offering(), at.Sub(since))
	}
	w.h.Recovery = nil
	lr := w.rec.LastRecovery
	w.rec.Recoveries++
	lr.ResumedAt = at
	lr.ResumedFromStep = fromStep
	if w.nodes() > 1 {
		// Every node of the gang waited: a kept one from the loss, a new
		// one from its launch.
		for _, held := range w.gang() {
			w.h.Ledger.AddRecovery(held.Instance.ID, at.Sub(latest(held.Since, since)).Seconds())
		}
	} else {
		w.h.Ledger.AddRecovery(lr.InstanceID, at.Sub(lr.ReplacementAt).Seconds())
	}
	workflow.GetMetricsHandler(ctx).Counter(telemetry.RecoveriesTotal).Inc(1)
}

// lostWorkSeconds estimates the compute that must be redone: the steps
// past the last checkpoint, at the pace the attempt ran since it
// started.
func (rc recovery) lostWorkSeconds(now time.Time, e attemptEnd, atStep, ckptStep int64, withNotice bool) float64 {
	ckpt := rc.w.rec.LastCheckpoint
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
	progressed := atStep - rc.resumedFrom()
	if progressed <= 0 || trained <= 0 {
		return 0
	}
	return float64(atStep-ckptStep) * trained / float64(progressed)
}

// resumedFrom is the step the workload resumed from on what it holds.
func (rc recovery) resumedFrom() int64 {
	if lr := rc.w.rec.LastRecovery; lr != nil {
		for _, held := range rc.w.gang() {
			if lr.InstanceID == held.Instance.ID {
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

// lossOf is what a verdict of a lost or failed attempt lost: the ranks
// lost (endLost), what the market took (endTaken), or the attempt to a
// trainer's failure or to checkpoints that fail to verify.
func (rc recovery) lossOf(ctx workflow.Context, v verdict) loss {
	w := rc.w
	e := v.end
	whole := nodeEnd{lease: w.h.Lease, end: e}
	switch v.ending {
	case endTrainerFailed:
		return loss{fault: capacity.TrainerFault, msg: v.message, lead: whole, whole: true}
	case endCheckpointsFailed:
		return loss{fault: capacity.CheckpointFault, msg: e.err.Error(), lead: whole, whole: true}
	case endTaken:
		// The market's account took the spot instance (a gang: any of
		// its nodes, and the whole gang goes back, as `starter sim
		// --nodes N` replays it). The agent may not have seen the notice
		// yet: the account counts the preemption either way. A gang's
		// node lost without a word is a fault besides.
		l := loss{lead: whole, atStep: max(e.res.LastStep, w.rec.Step), whole: true}
		if s := v.silent; s != nil {
			if s.lease == w.h.Lease {
				w.observeLastHeartbeat(s.end.err)
				l.lead.end.silent = true
			}
			l.fault, l.msg, l.struck = lossCause(s.end.err), s.end.err.Error(), s.lease
		}
		return l
	}
	// A joined base machine lost is node-lost, whatever the width, and
	// its gang goes back whole. What rank 0's agent last reported counts
	// when it went silent.
	n := v.lost[0]
	if j := joinedMachineLost(v.lost); j != nil {
		n = *j
	}
	if n.lease == w.h.Lease && !n.noticed() && rc.countsLastHeartbeat(ctx) {
		w.observeLastHeartbeat(n.end.err)
		n.end.silent = true
	}
	l := loss{lead: n, lost: v.lost, atStep: w.rec.Step, msg: n.message()}
	switch {
	case onJoinedMachine(n.lease):
		l.fault, l.whole = capacity.NodeLost, true
	case n.noticed() && w.nodes() == 1:
		l.atStep = n.end.res.LastStep
	case !n.noticed():
		l.fault = lossCause(n.end.err)
	}
	return l
}

// countsLastHeartbeat reports whether a silent rank 0's last heartbeat
// counts. Runs of one node recorded before it counted a silent loss from
// their own record, which checkpoints reach in batches: often no work
// lost.
func (rc recovery) countsLastHeartbeat(ctx workflow.Context) bool {
	w := rc.w
	return w.nodes() > 1 || workflow.GetVersion(ctx, silentLossVersion, workflow.DefaultVersion, 1) >= 1
}
