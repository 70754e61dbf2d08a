package activities

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"refuel/pkg/agent"
	"refuel/pkg/checkpoint"
)

// What the agent's events become on the activity's side: progress kept for
// the workflow, heartbeats sent when worth one, and the answers heartbeats
// bring back (cancelled, gone, the cluster away).

// reporter turns agent events into heartbeats (always) and progress
// signals (only the few events the run acts on, to keep its history
// short: checkpoints closer together than signalEvery are told together).
type reporter struct {
	node        *Node
	store       *checkpoint.Store
	workflowID  string
	signalEvery time.Duration

	mu       sync.Mutex
	progress Progress
	sentAt   time.Time // the last checkpoint signal
	pending  *Progress // checkpoints not signalled yet
	outage   Outage    // what the agent saw of the control plane
	sending  sync.Mutex
	// devToldAt is when a development environment's run was last told
	// of it.
	devToldAt time.Time
	// beat is what the last heartbeat carried, and soon asks the
	// heartbeat loop for one before the next is due (see worthABeat).
	beat Progress
	soon chan struct{}
}

// outageSeen is what the agent saw of the control plane so far.
func (r *reporter) outageSeen() Outage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.outage
}

func (r *reporter) onEvent(e agent.Event) {
	if r.devEvent(e) {
		return
	}
	r.mu.Lock()
	r.progress.Step = max(r.progress.Step, e.Step)
	if e.Total > 0 {
		r.progress.TotalSteps = e.Total
	}
	p := r.progress
	p.Time = e.Time
	var held *Progress
	switch e.Kind {
	case agent.EventRestored:
		p.Kind, p.Step = ProgressRestored, e.Step
	case agent.EventCheckpoint:
		p.Kind, p.Checkpoints = ProgressCheckpoint, 1
		if e.Checkpoint != nil {
			p.Checkpoint = refOf(r.store, *e.Checkpoint)
			p.Checkpoint.WriteSeconds = e.WriteTime.Seconds()
		}
		if q := r.pending; q != nil {
			p.Checkpoints += q.Checkpoints
			if p.Checkpoint != nil && q.Checkpoint != nil {
				p.Checkpoint.WriteSeconds += q.Checkpoint.WriteSeconds
			}
		}
		if p.Checkpoint != nil {
			// Heartbeats carry the latest checkpoint too: a run whose
			// instance goes silent learns of those not signalled yet.
			latest := *p.Checkpoint
			r.progress.Checkpoint = &latest
		}
		if r.signalEvery > 0 && e.Time.Sub(r.sentAt) < r.signalEvery {
			r.pending = &p
			r.beatSoon() // the heartbeat tells it meanwhile
			r.mu.Unlock()
			return
		}
		r.pending, r.sentAt = nil, e.Time
	case agent.EventNotice:
		// The checkpoints held back are told with it: the run counts the
		// work it loses from the latest.
		held, r.pending = r.pending, nil
		p.Kind = ProgressNotice
	case agent.EventRebalance:
		p.Kind = ProgressRebalance
	default:
		r.beatSoon()
		r.mu.Unlock()
		return
	}
	r.beatSoon()
	r.mu.Unlock()
	if held != nil {
		r.send(*held)
	}
	r.send(p)
}

// worthABeat reports whether the agent's report now is worth a
// heartbeat before the next is due (every third of the heartbeat
// timeout, 20 s by default), the last heartbeat having carried last:
// status reads step and checkpoint from the heartbeat. The first step the
// trainer reports is (status would show step 0 until the next), and so
// is a checkpoint the run is not told of yet (untold: checkpoints close
// together are told together). Anything else waits for the next
// heartbeat, so a run costs the control plane no more while it trains.
func worthABeat(last, now Progress, untold bool) bool {
	switch {
	case last.Step == 0 && now.Step > 0:
		return true
	case untold && now.Checkpoint != nil && (last.Checkpoint == nil || now.Checkpoint.Step != last.Checkpoint.Step):
		return true
	}
	return false
}

// beatSoon asks for a heartbeat before the next is due when the report
// is worth one; r.mu is held.
func (r *reporter) beatSoon() {
	if r.soon != nil && worthABeat(r.beat, r.progress, r.pending != nil) {
		select {
		case r.soon <- struct{}{}:
		default: // one is asked for already
		}
	}
}

// flush signals the checkpoints not told yet.
func (r *reporter) flush() {
	r.mu.Lock()
	p := r.pending
	r.pending = nil
	r.mu.Unlock()
	if p != nil {
		r.send(*p)
	}
}

// send signals the run, one signal at a time, without holding the
// trainer up: a signal the cluster does not take within a while is
// dropped, as the attempt's result and its heartbeats carry the same
// facts.
func (r *reporter) send(p Progress) {
	if r.node.Machine.Lost() {
		return // a machine that is gone tells nothing, checkpoints held back included
	}
	go func() {
		r.sending.Lock()
		defer r.sending.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), signalTimeout)
		defer cancel()
		if err := r.node.Signaler.SignalWorkflow(ctx, r.workflowID, "", r.node.ProgressSignal, p); err != nil {
			r.node.Logger.Warn("progress signal not delivered", zap.String("kind", string(p.Kind)), zap.Error(err))
		}
	}()
}

// heartbeatAnswer is what the cluster answered a heartbeat with, when it
// was not a plain yes.
type heartbeatAnswer int

const (
	// cancelAsked: the run cancelled the activity.
	cancelAsked heartbeatAnswer = iota + 1
	// notWaitedOn: the cluster no longer waits on the activity (its run
	// timed it out, or continued as new, or ended).
	notWaitedOn
)

// heartbeat reports progress every so often: liveness, and for runs
// recorded before push control, the way a stop request reaches the
// activity. A heartbeat the cluster does not take is tried again within
// seconds, and is never a reason to stop the trainer: the agent keeps
// training, checkpointing and honouring notices without the cluster, and
// the run attaches again when it is back. Answers other than a plain yes
// go to answers, once.
func (r *reporter) heartbeat(ctx context.Context, token []byte, every time.Duration, answers chan<- heartbeatAnswer) {
	var failingSince time.Time
	wait := every
	for {
		r.mu.Lock()
		p := r.progress
		r.beat = p
		select {
		case <-r.soon: // this heartbeat tells it
		default:
		}
		r.mu.Unlock()
		sent := time.Now()
		callCtx, cancel := context.WithTimeout(ctx, heartbeatCallTimeout(every))
		err := r.node.Signaler.RecordActivityHeartbeat(callCtx, token, p)
		cancel()
		if ctx.Err() != nil {
			return
		}
		var canceled *temporal.CanceledError
		var notFound *serviceerror.NotFound
		switch {
		case err == nil:
			if !failingSince.IsZero() {
				r.node.Logger.Info("the cluster takes heartbeats again", zap.String("run", r.workflowID),
					zap.Duration("after", time.Since(failingSince).Round(time.Millisecond)))
				failingSince = time.Time{}
			}
			wait = every
		case errors.As(err, &canceled):
			answers <- cancelAsked
			return
		case errors.As(err, &notFound):
			answers <- notWaitedOn
			return
		default:
			now := time.Now()
			if failingSince.IsZero() {
				failingSince = now
				r.node.Logger.Warn("heartbeat not taken: the trainer trains on, and the heartbeat is tried again",
					zap.String("run", r.workflowID), zap.Error(err))
				wait = min(time.Second, every)
			} else {
				wait = min(2*wait, every)
			}
			r.mu.Lock()
			r.outage.FailedHeartbeats++
			r.outage.LongestSeconds = max(r.outage.LongestSeconds, now.Sub(failingSince).Seconds())
			r.mu.Unlock()
		}
		// A report worth telling is told sooner, once the cluster takes
		// heartbeats, and never more often than every second.
		soon := r.soon
		if err != nil {
			soon = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		case <-soon:
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(sent.Add(min(time.Second, every)))):
			}
		}
	}
}

// heartbeatCallTimeout bounds one heartbeat call, its retries included: a
// slow cluster gets time to answer, but a call never outlasts the next.
func heartbeatCallTimeout(every time.Duration) time.Duration {
	return min(max(every, 5*time.Second), 30*time.Second)
}
