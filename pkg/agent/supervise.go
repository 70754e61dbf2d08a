package agent

import (
	"context"
	"time"
)

// supervise runs the trainer to its end and settles the result: the way
// out is a natural exit, an interruption notice or a stop request, and each
// ends with a last upload of what the trainer wrote.
func (r *run) supervise(ctx context.Context) (Result, error) {
	s := newSyncer(r)
	t, err := r.start()
	if err != nil {
		r.result.Outcome = Failed
		r.result.ExitCode = -1
		r.result.Stderr = err.Error()
		return r.result, nil
	}
	notices, stopWatching := r.watchNotices(ctx)
	final := make(chan context.Context)
	synced := make(chan error, 1)
	go func() { synced <- s.loop(ctx, final) }()

	end := r.await(ctx, t, notices)
	defer end.cancel()
	stopWatching()
	// Whatever the trainer left running in its group has no one to serve.
	t.kill()
	final <- end.uploadCtx
	syncErr := <-synced

	r.mu.Lock()
	defer r.mu.Unlock()
	r.result.Killed = end.killed
	r.result.ExitCode = t.exitCode()
	r.result.Stderr = t.stderr.String()
	switch {
	case end.outcome != "":
		r.result.Outcome = end.outcome
	case r.result.ExitCode == 0:
		r.result.Outcome = Completed
	default:
		r.result.Outcome = Failed
	}
	return r.result, syncErr
}

// watchNotices starts watching the metadata service, if there is one. The
// returned func stops the watch and returns once no more events can come
// from it.
func (r *run) watchNotices(ctx context.Context) (<-chan Notice, func()) {
	notices := make(chan Notice, 1)
	if r.cfg.MetadataEndpoint == "" {
		return notices, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	w := newNoticeWatcher(r.cfg.MetadataEndpoint, r.cfg.NoticePoll)
	go func() {
		defer close(done)
		w.watch(ctx, notices, func(n Notice) { r.emit(Event{Kind: EventRebalance, Notice: &n}) })
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
// when ctx is cancelled.
func (r *run) await(ctx context.Context, t *trainer, notices <-chan Notice) ending {
	var notice *Notice
	stopping := false
	select {
	case <-t.done:
	case n := <-notices:
		notice = &n
	case <-ctx.Done():
		stopping = true
	}
	if exited(t) {
		// An exit that raced the request is the trainer's own outcome.
		return ending{uploadCtx: ctx, cancel: func() {}}
	}
	// The last upload outlives a cancelled ctx, since the trainer's final
	// checkpoint is the point of stopping gracefully, but not the instance.
	if stopping {
		killed := t.stop(time.Now().Add(r.cfg.StopGrace))
		uploadCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.StopGrace)
		return ending{outcome: Stopped, killed: killed, uploadCtx: uploadCtx, cancel: cancel}
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
	killed := t.stop(terminateAt.Add(-margin))
	uploadCtx, cancel := context.WithDeadline(context.WithoutCancel(ctx), terminateAt)
	return ending{outcome: Preempted, killed: killed, uploadCtx: uploadCtx, cancel: cancel}
}

func exited(t *trainer) bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}
