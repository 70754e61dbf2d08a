package checkpoint

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"refuel/pkg/listing"
)

// A job's trainer output lives beside its checkpoints, one prefix per
// attempt and instance, in numbered segments:
//
//	<jobID>/logs/attempt-000003/<instance>/output-000001.log
//
// The instance is path-escaped, so any ID makes one key component. Each
// segment holds whole LogLines (see logline.go); the newest one of an
// attempt grows while the trainer runs and is uploaded again each time.
const (
	logsDir       = "logs"
	attemptPrefix = "attempt-"
	segmentPrefix = "output-"
	segmentSuffix = ".log"
)

// LogSegment names one piece of one attempt's output on one instance.
type LogSegment struct {
	// Attempt is the run's attempt the output belongs to.
	Attempt  int
	Instance string
	// Index numbers an attempt's segments from 1, in order.
	Index int
	// Size and Modified are as listed; PutLogSegment ignores them.
	Size     int64
	Modified time.Time
}

func (g LogSegment) key() string {
	return fmt.Sprintf("%s/%s%06d/%s/%s%06d%s", logsDir, attemptPrefix, g.Attempt,
		url.PathEscape(g.Instance), segmentPrefix, g.Index, segmentSuffix)
}

// parseLogKey is the inverse of key.
func parseLogKey(key string) (LogSegment, bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 4 || parts[0] != logsDir {
		return LogSegment{}, false
	}
	attempt, ok := cutNumber(parts[1], attemptPrefix, "")
	if !ok {
		return LogSegment{}, false
	}
	instance, err := url.PathUnescape(parts[2])
	if err != nil {
		return LogSegment{}, false
	}
	index, ok := cutNumber(parts[3], segmentPrefix, segmentSuffix)
	if !ok || index < 1 {
		return LogSegment{}, false
	}
	return LogSegment{Attempt: attempt, Instance: instance, Index: index}, true
}

func cutNumber(s, prefix, suffix string) (int, bool) {
	digits, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return 0, false
	}
	if digits, ok = strings.CutSuffix(digits, suffix); !ok || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil
}

// PutLogSegment stores a segment's content, replacing what was stored for
// it before.
func (s *Store) PutLogSegment(ctx context.Context, g LogSegment, data []byte) error {
	if g.Index < 1 || g.Attempt < 0 {
		return fmt.Errorf("checkpoint: log segment %d of attempt %d: indexes start at 1", g.Index, g.Attempt)
	}
	opts := &blob.WriterOptions{ContentType: "text/plain; charset=utf-8"}
	if err := s.bucket.WriteAll(ctx, g.key(), data, opts); err != nil {
		return fmt.Errorf("checkpoint: upload log of attempt %d: %w", g.Attempt, err)
	}
	return nil
}

// DeleteLogSegment removes a segment; one already gone is no error.
func (s *Store) DeleteLogSegment(ctx context.Context, g LogSegment) error {
	if err := s.bucket.Delete(ctx, g.key()); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("checkpoint: delete log of attempt %d: %w", g.Attempt, err)
	}
	return nil
}

// LogSegments lists every stored segment of the job's output in reading
// order: by attempt, then instance, then index.
func (s *Store) LogSegments(ctx context.Context) ([]LogSegment, error) {
	objs, err := listing.All(ctx, s.bucket, &blob.ListOptions{Prefix: logsDir + "/"})
	if err != nil {
		return nil, fmt.Errorf("checkpoint: list logs in %s: %w", s.url, err)
	}
	var segs []LogSegment
	for _, obj := range objs {
		if g, ok := parseLogKey(obj.Key); ok {
			g.Size, g.Modified = obj.Size, obj.ModTime
			segs = append(segs, g)
		}
	}
	slices.SortFunc(segs, func(a, b LogSegment) int {
		return cmp.Or(cmp.Compare(a.Attempt, b.Attempt), strings.Compare(a.Instance, b.Instance), cmp.Compare(a.Index, b.Index))
	})
	return segs, nil
}

// ReadLogSegment returns a segment's content from offset on. A segment
// that is gone reads as empty: the store keeps only the newest segments
// of a long output.
func (s *Store) ReadLogSegment(ctx context.Context, g LogSegment, offset int64) ([]byte, error) {
	r, err := s.bucket.NewRangeReader(ctx, g.key(), offset, -1, nil)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: read log of attempt %d: %w", g.Attempt, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: read log of attempt %d: %w", g.Attempt, err)
	}
	return data, nil
}

// LogsURL is where this job's logs live, for people who want the files.
func (s *Store) LogsURL() string {
	u, err := url.Parse(s.url)
	if err != nil {
		return s.url + logsDir + "/"
	}
	u.Path += logsDir + "/"
	return u.String()
}
