package checkpoint

import (
	"bytes"
	"context"
	"slices"
	"strings"
)

// LogReader reads a job's output in order across attempts and instances
// and remembers how far it got, so each Next returns only what is new:
// read once, or follow a run as it trains.
type LogReader struct {
	store    *Store
	attempts []int // nil: every attempt
	offsets  map[LogSegment]int64
	// last is the highest segment index read per attempt and instance, to
	// tell segments the store no longer keeps.
	last map[LogSource]int
}

// LogSource is the output of one attempt on one instance.
type LogSource struct {
	Attempt  int
	Instance string
}

// LogChunk is new output of one source.
type LogChunk struct {
	LogSource
	// Missing counts segments before Lines that the store no longer has:
	// it keeps only the newest segments of a long output.
	Missing int
	Lines   []LogLine
}

// NewLogReader reads the given attempts of the job, or all of them.
func (s *Store) NewLogReader(attempts ...int) *LogReader {
	return &LogReader{store: s, attempts: attempts, offsets: map[LogSegment]int64{}, last: map[LogSource]int{}}
}

// Next returns the output stored since the last call, in order. A line
// that cannot be parsed is returned as stdout text, so nothing is hidden.
func (r *LogReader) Next(ctx context.Context) ([]LogChunk, error) {
	segs, err := r.store.LogSegments(ctx)
	if err != nil {
		return nil, err
	}
	var chunks []LogChunk
	for _, g := range segs {
		if r.attempts != nil && !slices.Contains(r.attempts, g.Attempt) {
			continue
		}
		id := LogSegment{Attempt: g.Attempt, Instance: g.Instance, Index: g.Index}
		off := r.offsets[id]
		// Segments only grow, so a size no larger than what was read means
		// nothing new (and ranges past the end are errors on some stores).
		if g.Size <= off {
			continue
		}
		data, err := r.store.ReadLogSegment(ctx, g, off)
		if err != nil {
			return chunks, err
		}
		// Only whole lines count; the rest is read again next time.
		end := bytes.LastIndexByte(data, '\n') + 1
		if end == 0 {
			continue
		}
		r.offsets[id] = off + int64(end)
		src := LogSource{Attempt: g.Attempt, Instance: g.Instance}
		missing := 0
		if last := r.last[src]; g.Index > last+1 {
			missing = g.Index - last - 1
		}
		r.last[src] = max(r.last[src], g.Index)
		lines := parseLogLines(data[:end])
		if n := len(chunks); n > 0 && chunks[n-1].LogSource == src && missing == 0 {
			chunks[n-1].Lines = append(chunks[n-1].Lines, lines...)
			continue
		}
		chunks = append(chunks, LogChunk{LogSource: src, Missing: missing, Lines: lines})
	}
	return chunks, nil
}

func parseLogLines(data []byte) []LogLine {
	var lines []LogLine
	for s := range strings.Lines(string(data)) {
		s = strings.TrimSuffix(s, "\n")
		l, err := ParseLogLine(s)
		if err != nil {
			l = LogLine{Stream: Stdout, Text: s}
		}
		lines = append(lines, l)
	}
	return lines
}
