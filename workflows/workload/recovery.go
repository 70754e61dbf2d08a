package workload

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/internal/telemetry"
	"refuel/pkg/capacity"
	"refuel/workflows"
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
type recovery struct{ w *Workload }

func (w *Workload) Recover() recovery { return recovery{w} }

// Loss is what a workload lost, and why.
type Loss struct {
	// Fault is why; "" for an instance the market took with notice.
	Fault capacity.Fault
	msg   string // what the failure booked for the fault says
	// lead is the rank that names the loss (rank 0 for the whole
	// attempt's); struck is the instance the fault struck, if another.
	lead   NodeEnd
	struck *Lease
	lost   []NodeEnd // the ranks lost
	atStep int64     // the step the workload had reached
	// whole: everything held goes back (the market took the whole gang,
	// or the fault was the attempt's, not one node's).
	whole bool
}

// Noticed reports whether the market announced the loss.
func (l Loss) Noticed() bool { return l.Fault == "" }

// remedy is what the fault counts against and what cures it; a loss
// with notice is cured by a new instance.
func (l Loss) remedy() capacity.FaultRemedy {
	if l.Noticed() {
		return capacity.FaultRemedy{Preemption: true, Teaches: true, Cure: capacity.NewInstance}
	}
	return l.Fault.Remedy()
}

// losesInstance reports whether the instance was lost, with the work
// since the latest checkpoint: not so when the trainer failed on it or
// no checkpoint verifies.
func (l Loss) losesInstance() bool {
	c := l.remedy().Cure
	return c == capacity.NewInstance || c == capacity.OtherMachine
}

// ReleaseReason is why what was lost is given back, by its cure.
func (l Loss) ReleaseReason() activities.ReleaseReason {
	switch l.remedy().Cure {
	case capacity.OtherMachine:
		return activities.ReleaseReason(l.Fault)
	case capacity.RestartTrainer, capacity.NoCure:
		return activities.ReleaseFailed
	}
	return activities.ReleasePreempted
}

// Run recovers from l, step by step.
func (rc recovery) Run(ctx workflow.Context, l Loss) error {
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
func (rc recovery) book(ctx workflow.Context, l Loss) (oneTrip bool) {
	w := rc.w
	if !l.Noticed() {
		struck := l.struck
		if struck == nil {
			struck = l.lead.Lease
		}
		w.AddFailure(ctx, string(l.Fault), struck.Offering().Key(), l.msg)
	}
	if !l.losesInstance() {
		return false
	}
	preemption := l.remedy().Preemption
	if preemption {
		oneTrip = w.recoversInOneTrip(ctx)
	}
	if l.Fault == capacity.NodeLost {
		workflow.GetLogger(ctx).Warn("base machine lost under the workload; recovering from the latest checkpoint", "instance", l.lead.Lease.Instance.ID)
	}
	now := workflow.Now(ctx)
	ckptStep := int64(0)
	if c := w.Counts.LastCheckpoint; c != nil {
		ckptStep = c.Step
	}
	// Every node held computed the steps past the latest checkpoint and
	// computes them again: the work lost is each node's.
	perNode := rc.lostWorkSeconds(now, l.lead.End, l.atStep, ckptStep, l.Noticed())
	for _, held := range w.Gang() {
		w.Held.Ledger.AddLostWork(held.Instance.ID, perNode)
	}
	lost := perNode * float64(w.NodesNow())
	w.Counts.LostWorkSecs += lost
	rc.begin(now)
	if preemption {
		lead := l.lead.Lease
		w.Counts.Preemptions++
		w.Counts.LastPreemption = &PreemptionInfo{
			Time: now, InstanceID: lead.Instance.ID, Zone: lead.Offering().Zone,
			AtStep: l.atStep, CheckpointStep: ckptStep, WithNotice: l.Noticed(),
		}
		w.Held.AvoidZone = lead.Offering().Zone
		m := workflow.GetMetricsHandler(ctx).WithTags(telemetry.OfferingTags(lead.Offering()))
		m.Counter(telemetry.PreemptionsTotal).Inc(1)
		m.Counter(telemetry.LostWorkSeconds).Inc(int64(lost))
	}
	w.Host.Enter(ctx, workflows.StatePreempted)
	return oneTrip
}

// giveBack gives back what was lost, for the reason its cure names. A
// gang the market took only some nodes of keeps the others: it returns
// the gang in rank order, nil where a node was given back. A run of one
// node taken with notice, recovering in one trip, gives its instance
// back on the way to the replacement (releaseLater).
func (rc recovery) giveBack(ctx workflow.Context, l Loss, oneTrip bool) []*Lease {
	w := rc.w
	if w.Nodes() > 1 && !l.whole && l.remedy().Cure == capacity.NewInstance {
		gang := w.Gang()
		for rank, held := range gang {
			if endOf(l.lost, held) != nil {
				w.Held.Leases.Release(ctx, held, activities.ReleasePreempted)
				gang[rank] = nil
			}
		}
		w.Held.Lease, w.Held.Peers = nil, nil
		return gang
	}
	if oneTrip && l.Noticed() {
		w.releaseLater(ctx, l.ReleaseReason())
		return nil
	}
	w.Release(ctx, l.ReleaseReason())
	return nil
}

// resume is what the workload does next: a fault no instance cures ends
// it; a gang that kept nodes replaces the others; a fault that counts
// restarts after its backoff; a loss with notice acquires again at
// once.
func (rc recovery) resume(ctx workflow.Context, l Loss, gang []*Lease) error {
	switch {
	case l.remedy().Cure == capacity.NoCure:
		return temporal.NewNonRetryableApplicationError(l.msg, l.remedy().Type, nil)
	case gang != nil:
		return rc.replace(ctx, l, gang)
	case l.Noticed():
		return nil
	}
	return rc.restart(ctx, l.Fault, l.msg)
}

// begin opens a recovery: the workload lost its capacity (or gave it back
// to the pool) at now, and resumes from its latest checkpoint on the
// next.
func (rc recovery) begin(now time.Time) {
	rc.w.Held.Recovery = &Recovery{Since: now}
}

// replaced names the replacement of a recovery under way: l, acquired
// at at (its launch, or when a gang went on with the nodes it kept).
func (rc recovery) replaced(l *Lease, at time.Time) {
	if rc.w.Held.Recovery != nil {
		rc.w.Counts.LastRecovery = &RecoveryInfo{ReplacementAt: at, InstanceID: l.Instance.ID}
	}
}

// resumed closes the recovery under way, if its replacement is known:
// the workload ran again from fromStep at at. It books the recovery's
// overhead: the replacement was paid for from its launch, and worked
// only from at.
func (rc recovery) resumed(ctx workflow.Context, fromStep int64, at time.Time) {
	w := rc.w
	if w.Held.Recovery == nil || w.Counts.LastRecovery == nil {
		return
	}
	since := w.Held.Recovery.Since
	if !since.IsZero() && w.Held.Lease != nil {
		telemetry.ObserveRecovery(workflow.GetMetricsHandler(ctx), w.Held.Lease.Offering(), at.Sub(since))
	}
	w.Held.Recovery = nil
	lr := w.Counts.LastRecovery
	w.Counts.Recoveries++
	lr.ResumedAt = at
	lr.ResumedFromStep = fromStep
	if w.Nodes() > 1 {
		// Every node of the gang waited: a kept one from the loss, a new
		// one from its launch.
		for _, held := range w.Gang() {
			w.Held.Ledger.AddRecovery(held.Instance.ID, at.Sub(latest(held.Since, since)).Seconds())
		}
	} else {
		w.Held.Ledger.AddRecovery(lr.InstanceID, at.Sub(lr.ReplacementAt).Seconds())
	}
	workflow.GetMetricsHandler(ctx).Counter(telemetry.RecoveriesTotal).Inc(1)
}

// lostWorkSeconds estimates the compute that must be redone: the steps
// past the last checkpoint, at the pace the attempt ran since it
// started.
func (rc recovery) lostWorkSeconds(now time.Time, e AttemptEnd, atStep, ckptStep int64, withNotice bool) float64 {
	ckpt := rc.w.Counts.LastCheckpoint
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
	if lr := rc.w.Counts.LastRecovery; lr != nil {
		for _, held := range rc.w.Gang() {
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

// LossOf is what a verdict of a lost or failed attempt lost: the ranks
// lost (EndLost), what the market took (EndTaken), or the attempt to a
// trainer's failure or to checkpoints that fail to verify.
func (rc recovery) LossOf(ctx workflow.Context, v Verdict) Loss {
	w := rc.w
	e := v.End
	whole := NodeEnd{Lease: w.Held.Lease, End: e}
	switch v.Ending {
	case EndTrainerFailed:
		return Loss{Fault: capacity.TrainerFault, msg: v.Message, lead: whole, whole: true}
	case EndCheckpointsFailed:
		return Loss{Fault: capacity.CheckpointFault, msg: e.Err.Error(), lead: whole, whole: true}
	case EndTaken:
		// The market's account took the spot instance (a gang: any of
		// its nodes, and the whole gang goes back, as `starter sim
		// --nodes N` replays it). The agent may not have seen the notice
		// yet: the account counts the preemption either way. A gang's
		// node lost without a word is a fault besides.
		l := Loss{lead: whole, atStep: max(e.Res.LastStep, w.Counts.Step), whole: true}
		if s := v.Silent; s != nil {
			if s.Lease == w.Held.Lease {
				w.observeLastHeartbeat(s.End.Err)
				l.lead.End.silent = true
			}
			l.Fault, l.msg, l.struck = lossCause(s.End.Err), s.End.Err.Error(), s.Lease
		}
		return l
	}
	// A joined base machine lost is node-lost, whatever the width, and
	// its gang goes back whole. What rank 0's agent last reported counts
	// when it went silent.
	n := v.Lost[0]
	if j := joinedMachineLost(v.Lost); j != nil {
		n = *j
	}
	if n.Lease == w.Held.Lease && !n.Noticed() && rc.countsLastHeartbeat(ctx) {
		w.observeLastHeartbeat(n.End.Err)
		n.End.silent = true
	}
	l := Loss{lead: n, lost: v.Lost, atStep: w.Counts.Step, msg: n.message()}
	switch {
	case onJoinedMachine(n.Lease):
		l.Fault, l.whole = capacity.NodeLost, true
	case n.Noticed() && w.Nodes() == 1:
		l.atStep = n.End.Res.LastStep
	case !n.Noticed():
		l.Fault = lossCause(n.End.Err)
	}
	return l
}

// countsLastHeartbeat reports whether a silent rank 0's last heartbeat
// counts. Runs of one node recorded before it counted a silent loss from
// their own record, which checkpoints reach in batches: often no work
// lost.
func (rc recovery) countsLastHeartbeat(ctx workflow.Context) bool {
	w := rc.w
	return w.Nodes() > 1 || workflow.GetVersion(ctx, silentLossVersion, workflow.DefaultVersion, 1) >= 1
}
