package agent

import (
	"context"
	"time"
)

// supervise runs the trainer to its end and settles the result: the way
// out is a natural exit, an interruption notice or a stop request, and each
// ends with a last upload of what the trainer wrote. A machine killed
// under it ends it at once, with nothing more uploaded.
func (r *run) supervise(ctx context.Context) (Result, error) {
	defer r.log.close()
	s := newSyncer(r)
	stderr := newTail(stderrLines)
	t, err := r.start(stderr)
	if err != nil {
		r.say("cannot start the trainer: %v", err)
		r.result.Outcome = Failed
		r.result.ExitCode = -1
		r.result.Stderr = err.Error()
		// The reason is worth keeping even when the run is being stopped.
		uploadCtx, cancel := r.detached(ctx, time.Now().Add(r.cfg.StopGrace))
		defer cancel()
		r.result.LogsErr = r.log.upload(uploadCtx)
		if r.cfg.Machine.Lost() {
			return Result{}, ErrMachineGone
		}
		return r.result, nil
	}
	dev := r.startDev()
	notices, stopWatching := r.watchNotices(ctx)
	final := make(chan context.Context)
	synced := make(chan error, 1)
	syncCtx, stopSync := r.cfg.Machine.bound(ctx)
	defer stopSync()
	go func() { synced <- s.loop(syncCtx, final) }()
	// Ending the periodic uploads also cancels one under way: the last
	// upload after the trainer's exit sends the same output and more.
	logsCtx, stopLogs := r.cfg.Machine.bound(ctx)
	logsStopped := make(chan struct{})
	go func() {
		defer close(logsStopped)
		r.log.loop(logsCtx)
	}()

	end := r.await(ctx, t, notices)
	defer end.cancel()
	stopWatching()
	// Whatever the trainer left running in its group has no one to serve.
	t.kill()
	// A development environment's last save is the final checkpoint.
	dev.finish(end.uploadCtx)
	// The final checkpoint goes first: within a notice's window it is
	// worth more than the output. On a machine that is gone, its context
	// is too, and nothing more reaches the store.
	final <- end.uploadCtx
	syncErr := <-synced
	stopLogs()
	<-logsStopped
	if r.cfg.Machine.Lost() {
		return Result{}, ErrMachineGone
	}

	r.mu.Lock()
	r.result.Killed = end.killed
	r.result.ExitCode = t.exitCode()
	r.result.Stderr = stderr.String()
	switch {
	case end.outcome != "":
		r.result.Outcome = end.outcome
	case r.result.ExitCode == 0 && r.gangStopped:
		r.result.Outcome = GangStopped
	case r.result.ExitCode == 0:
		r.result.Outcome = Completed
	default:
		r.result.Outcome = Failed
	}
	res := r.result
	r.mu.Unlock()
	r.say("trainer exited with code %d: %s", res.ExitCode, res.Outcome)
	if n := r.log.droppedSegments(); n > 0 {
		r.say("%d segments of output were dropped on the instance before the store took them", n)
	}
	err = dev.settle(&res, syncErr)
	res.LogsErr = r.log.upload(end.uploadCtx)
	return res, err
}

// detached is a context for the last uploads: it outlives ctx, since the
// trainer's final checkpoint is the point of stopping gracefully, but not
// deadline, nor the machine.
func (r *run) detached(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	dctx, cancelDeadline := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	mctx, cancelMachine := r.cfg.Machine.bound(dctx)
	return mctx, func() {
		cancelMachine()
		cancelDeadline()
	}
}

// outliving is a context for the last uploads of a trainer that exited
// by itself: it lasts as long as ctx and grace after ctx is cancelled,
// but not past the machine.
func (r *run) outliving(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopWatch := context.AfterFunc(ctx, func() { time.AfterFunc(grace, cancel) })
	mctx, cancelMachine := r.cfg.Machine.bound(dctx)
	return mctx, func() {
		stopWatch()
		cancelMachine()
		cancel()
	}
}

// watchNotices starts watching the instance's notices, in-process or on
// its metadata service (EC2's or Compute Engine's), if it has either.
// The returned func stops the watch and returns once no more events can
// come from it.
func (r *run) watchNotices(ctx context.Context) (<-chan Notice, func()) {
	notices := make(chan Notice, 1)
	var feed noticeFeed
	switch {
	case r.cfg.Notices != nil:
		feed = &sourceFeed{src: r.cfg.Notices}
	case r.cfg.GCEMetadataHost != "":
		feed = newGCEWatcher(r.cfg.GCEMetadataHost)
	case r.cfg.MetadataEndpoint != "":
		feed = newNoticeWatcher(r.cfg.MetadataEndpoint, r.cfg.NoticePoll)
	default:
		return notices, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		watch(ctx, feed, notices, func(n Notice) {
			r.say("rebalance recommendation: the provider may reclaim this instance soon")
			r.emit(Event{Kind: EventRebalance, Notice: &n})
		})
	}()
	return notices, func() {
		cancel()
		<-done
	}
}

// ending is how the trainer's run ended.
type ending struct {
	// outcome is "" for the trainer's own exit, settled by its exit code.
	outcome Outcome
	killed  bool
	// uploadCtx is what the last upload may use, and cancel releases it.
	uploadCtx context.Context
	cancel    context.CancelFunc
}

// await waits for the trainer to exit, stopping it first on a notice or
// when ctx is cancelled, and killing it when the machine is gone.
func (r *run) await(ctx context.Context, t running, notices <-chan Notice) ending {
	var notice *Notice
	stopping, neverReady := false, false
	select {
	case <-t.done():
	case n := <-notices:
		notice = &n
	case <-ctx.Done():
		stopping = true
	case <-r.dev.notReady():
		stopping, neverReady = true, true
	case <-r.cfg.Machine.gone():
	}
	if r.cfg.Machine.Lost() {
		// Whatever else happened, the power went off: no grace, no upload.
		t.kill()
		<-t.done()
		lost, cancel := context.WithCancel(ctx)
		cancel()
		return ending{killed: true, uploadCtx: lost, cancel: cancel}
	}
	if exited(t) {
		// An exit that raced the request is the trainer's own outcome.
		// Its last checkpoint is uploaded even when the run is stopped
		// meanwhile (a gang's ranks are, once one of them ended), within
		// the grace a stop gets.
		uploadCtx, cancel := r.outliving(ctx, r.cfg.StopGrace)
		return ending{uploadCtx: uploadCtx, cancel: cancel}
	}
	if stopping {
		r.say("stop requested: sent SIGTERM; the trainer has %s to save a final checkpoint and exit", r.cfg.StopGrace)
		killed := stopTrainer(t, time.Now().Add(r.cfg.StopGrace), r.cfg.Machine.gone())
		if killed {
			r.say("the trainer did not exit within %s: killed", r.cfg.StopGrace)
		}
		uploadCtx, cancel := r.detached(ctx, time.Now().Add(r.cfg.StopGrace))
		outcome := Stopped
		if neverReady {
			outcome = Failed
		}
		return ending{outcome: outcome, killed: killed, uploadCtx: uploadCtx, cancel: cancel}
	}
	seen := time.Now()
	terminateAt := notice.Time
	if terminateAt.IsZero() {
		terminateAt = seen.Add(unknownNoticeWindow)
	}
	r.mu.Lock()
	r.result.Notice, r.result.NoticeAt = notice, seen
	r.mu.Unlock()
	r.emit(Event{Kind: EventNotice, Notice: notice})
	// Keep the upload margin from the window, but never most of it: a
	// short notice still leaves the trainer time for its final checkpoint.
	margin := min(r.cfg.UploadMargin, terminateAt.Sub(seen)/4)
	r.dev.holdOnNotice(t, seen, terminateAt.Add(-margin))
	r.say("interruption notice (%s at %s): sent SIGTERM; the trainer has until %s to save a final checkpoint and exit",
		notice.Action, terminateAt.UTC().Format(time.RFC3339), terminateAt.Add(-margin).UTC().Format(time.RFC3339))
	killed := stopTrainer(t, terminateAt.Add(-margin), r.cfg.Machine.gone())
	if killed {
		r.say("the trainer did not exit in time: killed")
	}
	uploadCtx, cancel := r.detached(ctx, terminateAt)
	return ending{outcome: Preempted, killed: killed, uploadCtx: uploadCtx, cancel: cancel}
}
