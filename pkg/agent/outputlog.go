package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"refuel/pkg/checkpoint"
)

// LogOptions shape how an attempt's output is kept. Zero fields take the
// defaults.
type LogOptions struct {
	// SegmentBytes is the size at which a segment of output is closed and
	// the next one begun; default 1 MiB.
	SegmentBytes int
	// LocalSegments is how many segments stay on the instance's disk, and
	// how many closed ones wait in memory while the store cannot be
	// reached; default 8.
	LocalSegments int
	// StoreSegments is how many of an attempt's newest segments the store
	// keeps; default 256.
	StoreSegments int
	// UploadEvery is how often new output is uploaded while the trainer
	// runs; default 5s.
	UploadEvery time.Duration
}

const (
	defaultSegmentBytes  = 1 << 20
	defaultLocalSegments = 8
	defaultStoreSegments = 256
	defaultLogUpload     = 5 * time.Second
)

func (o *LogOptions) setDefaults() {
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = defaultSegmentBytes
	}
	if o.LocalSegments <= 0 {
		o.LocalSegments = defaultLocalSegments
	}
	if o.StoreSegments <= 0 {
		o.StoreSegments = defaultStoreSegments
	}
	if o.UploadEvery <= 0 {
		o.UploadEvery = defaultLogUpload
	}
}

// outputLog keeps an attempt's output, the trainer's stdout and stderr and
// the agent's own lines, in the order they come, in numbered segments of
// about SegmentBytes: on the instance's disk (the newest LocalSegments)
// and in the store (the newest StoreSegments). A full disk or an
// unreachable store costs output, never the trainer's run.
type outputLog struct {
	opts  LogOptions
	dir   string
	store *checkpoint.Store
	src   checkpoint.LogSegment // Attempt and Instance of every segment

	mu      sync.Mutex
	index   int      // the current segment, from 1
	cur     []byte   // its content
	dirty   bool     // cur changed since it was last uploaded
	file    *os.File // its local copy; nil once a local write failed
	pending []segment
	// lost counts closed segments dropped before they were uploaded.
	lost int

	uploading sync.Mutex // one upload at a time
}

// segment is a closed segment waiting for its upload.
type segment struct {
	index int
	data  []byte
}

func newOutputLog(dir string, store *checkpoint.Store, attempt int, instance string, opts LogOptions) (*outputLog, error) {
	if err := makePrivateDir(dir); err != nil {
		return nil, err
	}
	opts.setDefaults()
	l := &outputLog{opts: opts, dir: dir, store: store, src: checkpoint.LogSegment{Attempt: attempt, Instance: instance}, index: 1}
	l.openFile()
	return l, nil
}

func (l *outputLog) path(index int) string {
	return filepath.Join(l.dir, fmt.Sprintf("output-%06d.log", index))
}

// openFile starts the current segment's local copy.
func (l *outputLog) openFile() {
	f, err := os.OpenFile(l.path(l.index), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err == nil {
		l.file = f
	}
}

// add appends one line from stream.
func (l *outputLog) add(stream checkpoint.LogStream, text string, partial bool) {
	rec := checkpoint.LogLine{Time: time.Now(), Stream: stream, Partial: partial, Text: text}.Append(nil)
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.cur) > 0 && len(l.cur)+len(rec) > l.opts.SegmentBytes {
		l.rotate()
	}
	l.cur = append(l.cur, rec...)
	l.dirty = true
	if l.file != nil {
		if _, err := l.file.Write(rec); err != nil {
			l.file.Close()
			l.file = nil
		}
	}
}

// rotate closes the current segment and begins the next.
func (l *outputLog) rotate() {
	l.queue(segment{index: l.index, data: l.cur})
	if l.file != nil {
		l.file.Close()
	}
	if old := l.index + 1 - l.opts.LocalSegments; old >= 1 {
		_ = os.Remove(l.path(old))
	}
	l.index++
	l.cur, l.dirty = nil, false
	l.openFile()
}

// queue adds closed segments to those waiting for upload, dropping the
// oldest beyond LocalSegments.
func (l *outputLog) queue(segs ...segment) {
	l.pending = append(l.pending, segs...)
	slices.SortFunc(l.pending, func(a, b segment) int { return a.index - b.index })
	if over := len(l.pending) - l.opts.LocalSegments; over > 0 {
		l.pending = l.pending[over:]
		l.lost += over
	}
}

// upload stores every closed segment not yet stored and the current one
// if it changed. What fails is kept for the next upload.
func (l *outputLog) upload(ctx context.Context) error {
	l.uploading.Lock()
	defer l.uploading.Unlock()
	l.mu.Lock()
	pending := l.pending
	l.pending = nil
	index, cur, dirty := l.index, slices.Clip(l.cur), l.dirty
	l.dirty = false
	l.mu.Unlock()

	for i, g := range pending {
		if err := l.put(ctx, g.index, g.data); err != nil {
			l.mu.Lock()
			l.queue(pending[i:]...)
			l.dirty = l.dirty || dirty && l.index == index
			l.mu.Unlock()
			return err
		}
		// Keeping the store's share bounded is housekeeping: what is not
		// deleted now outlives its turn, nothing worse.
		if old := g.index - l.opts.StoreSegments; old >= 1 {
			_ = l.store.DeleteLogSegment(ctx, l.segment(old))
		}
	}
	if !dirty {
		return nil
	}
	if err := l.put(ctx, index, cur); err != nil {
		l.mu.Lock()
		// Once rotated, the whole segment waits in pending instead.
		l.dirty = l.dirty || l.index == index
		l.mu.Unlock()
		return err
	}
	return nil
}

func (l *outputLog) segment(index int) checkpoint.LogSegment {
	g := l.src
	g.Index = index
	return g
}

func (l *outputLog) put(ctx context.Context, index int, data []byte) error {
	return l.store.PutLogSegment(ctx, l.segment(index), data)
}

// loop uploads every UploadEvery until ctx ends.
func (l *outputLog) loop(ctx context.Context) {
	tick := time.NewTicker(l.opts.UploadEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			_ = l.upload(ctx)
		}
	}
}

// close ends the local copy; uploads may still follow.
func (l *outputLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file != nil {
		l.file.Close()
		l.file = nil
	}
}

// droppedSegments is how many segments never reached the store.
func (l *outputLog) droppedSegments() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// makePrivateDir creates dir, or makes an existing one, readable by the
// agent's user alone: checkpoints and output are the job's.
func makePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	return nil
}
