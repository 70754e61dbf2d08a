// Package traffic holds request traffic for an inference service: a real
// trace of request arrivals with their tokens, and the longer patterns
// composed from it (a day with a daily cycle, synthetic bursts) that the
// autoscaling benchmark replays.
package traffic

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Request is one request to the service.
type Request struct {
	// At is the arrival, as an offset from the start of the trace.
	At              time.Duration
	ContextTokens   int
	GeneratedTokens int
}

// Trace is a run of requests sorted by arrival.
type Trace struct {
	Name     string
	Span     time.Duration // the trace covers [0, Span)
	Requests []Request
}

// ParseError says which line of a trace file could not be read.
type ParseError struct {
	File string
	Line int
	Err  error
}

func (e *ParseError) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }

func (e *ParseError) Unwrap() error { return e.Err }

// azureTime is the timestamp layout of the Azure LLM inference traces; the
// fraction has up to seven digits.
const azureTime = "2006-01-02 15:04:05.999999999"

// ReadAzureCSV reads a trace in the Azure LLM inference format (columns
// TIMESTAMP, ContextTokens, GeneratedTokens). Arrivals are made relative
// to the first; the span ends one second after the last arrival.
func ReadAzureCSV(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseAzureCSV(f, filepath.Base(path))
}

// ParseAzureCSV reads the Azure format from r; name labels errors and the trace.
func ParseAzureCSV(r io.Reader, name string) (*Trace, error) {
	cr := csv.NewReader(r)
	header, err := cr.Read()
	if err != nil {
		return nil, &ParseError{name, 1, fmt.Errorf("no header: %w", err)}
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(h)] = i
	}
	for _, c := range []string{"TIMESTAMP", "ContextTokens", "GeneratedTokens"} {
		if _, ok := col[c]; !ok {
			return nil, &ParseError{name, 1, fmt.Errorf("no %s column", c)}
		}
	}
	var times []time.Time
	t := &Trace{Name: name}
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, &ParseError{name, line, err}
		}
		at, err := time.Parse(azureTime, strings.TrimSpace(rec[col["TIMESTAMP"]]))
		if err != nil {
			return nil, &ParseError{name, line, err}
		}
		ctx, err1 := strconv.Atoi(strings.TrimSpace(rec[col["ContextTokens"]]))
		gen, err2 := strconv.Atoi(strings.TrimSpace(rec[col["GeneratedTokens"]]))
		if err := errors.Join(err1, err2); err != nil || ctx < 0 || gen < 0 {
			return nil, &ParseError{name, line, fmt.Errorf("token counts must be non-negative integers: %v", rec)}
		}
		times = append(times, at)
		t.Requests = append(t.Requests, Request{ContextTokens: ctx, GeneratedTokens: gen})
	}
	if len(t.Requests) == 0 {
		return nil, &ParseError{name, 2, errors.New("no requests")}
	}
	first := slices.MinFunc(times, time.Time.Compare)
	for i := range t.Requests {
		t.Requests[i].At = times[i].Sub(first)
	}
	sortByArrival(t.Requests)
	t.Span = t.Requests[len(t.Requests)-1].At.Truncate(time.Second) + time.Second
	return t, nil
}

// Slice returns the requests arriving in [from, to), shifted to start at 0.
func (t *Trace) Slice(from, to time.Duration) *Trace {
	out := &Trace{Name: fmt.Sprintf("%s[%s,%s)", t.Name, from, to), Span: to - from}
	for _, r := range t.Requests {
		if r.At >= from && r.At < to {
			r.At -= from
			out.Requests = append(out.Requests, r)
		}
	}
	return out
}

// sortByArrival orders requests by arrival, keeping the input order of
// equal arrivals so composed traces come out the same on every run.
func sortByArrival(rs []Request) {
	slices.SortStableFunc(rs, func(a, b Request) int {
		switch {
		case a.At < b.At:
			return -1
		case a.At > b.At:
			return 1
		}
		return 0
	})
}

// Steady drops the thin edges of a trace: a trace cut from a longer log
// starts and ends mid-flow, so its first and last seconds hold only part
// of the traffic around them, and laying copies end to end would put a
// false lull at every seam. The edges dropped are the leading and
// trailing 10-second bins with less than half the median bin's requests.
func (t *Trace) Steady() *Trace {
	const bin = 10 * time.Second
	n := int((t.Span + bin - 1) / bin)
	counts := make([]int, n)
	for _, r := range t.Requests {
		counts[int(r.At/bin)]++
	}
	sorted := slices.Clone(counts)
	slices.Sort(sorted)
	low := sorted[n/2] / 2
	first, last := 0, n-1
	for first < last && counts[first] < low {
		first++
	}
	for last > first && counts[last] < low {
		last--
	}
	out := t.Slice(time.Duration(first)*bin, min(t.Span, time.Duration(last+1)*bin))
	out.Name = t.Name
	return out
}
