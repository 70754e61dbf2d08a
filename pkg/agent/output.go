package agent

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"sync"
)

const (
	// stderrLines is how much of stderr a failure reports.
	stderrLines = 20
	// maxLine cuts lines that never end, so a trainer printing a progress
	// bar without newlines cannot grow the agent's memory.
	maxLine = 64 << 10
	// progressPrefix starts a progress line on the trainer's stdout.
	progressPrefix = "REFUEL_PROGRESS"
)

// lineWriter passes output through to copy and hands each line to line;
// partial is true for a piece of a line cut at maxLine. It is safe for
// concurrent use, as an in-process trainer's stdout must be.
type lineWriter struct {
	copy io.Writer
	line func(text string, partial bool)

	mu  sync.Mutex
	buf []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.copy != nil {
		// A broken copy must not stall or kill the trainer.
		_, _ = w.copy.Write(p)
	}
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.line(string(bytes.TrimSuffix(w.buf[:i], []byte("\r"))), false)
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > maxLine {
		w.line(string(w.buf), true)
		w.buf = nil
	}
	return len(p), nil
}

// flush hands over a last line that had no newline.
func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.line(string(w.buf), false)
	}
	w.buf = nil
}

// progressLine reports a REFUEL_PROGRESS line as an event.
func (r *run) progressLine(line string) {
	if step, total, ok := parseProgress(line); ok {
		r.emit(Event{Kind: EventProgress, Step: step, Total: total})
	}
}

// ProgressLine reports whether a line of a trainer's stdout is a progress
// report: the agent's to read, noise to a person reading the output.
func ProgressLine(line string) bool {
	_, _, ok := parseProgress(line)
	return ok
}

// parseProgress reads "REFUEL_PROGRESS step=<N> [total=<T>]". Keys it does
// not know are ignored, so trainers may add their own.
func parseProgress(line string) (step, total int64, ok bool) {
	fields := strings.Fields(line)
	if len(fields) < 2 || fields[0] != progressPrefix {
		return 0, 0, false
	}
	hasStep := false
	for _, f := range fields[1:] {
		key, value, _ := strings.Cut(f, "=")
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			continue
		}
		switch key {
		case "step":
			step, hasStep = n, true
		case "total":
			total = n
		}
	}
	if !hasStep {
		return 0, 0, false
	}
	return step, total, true
}

// tail keeps the last lines written to it.
type tail struct {
	lines []string
	max   int
}

func newTail(max int) *tail { return &tail{max: max} }

func (t *tail) add(line string) {
	t.lines = append(t.lines, line)
	if len(t.lines) > t.max {
		t.lines = t.lines[len(t.lines)-t.max:]
	}
}

func (t *tail) String() string { return strings.Join(t.lines, "\n") }
