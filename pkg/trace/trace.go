// Package trace reads spot market traces: the availability of one pool
// (a zone and an instance type) sampled at a fixed interval, in the format
// of shared/traces ({"metadata":{"gap_seconds":N},"data":[...]}).
package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Trace is the sampled spot availability of one pool.
type Trace struct {
	// Name is the file name without its extension, such as
	// "us-west-2a_v100_1"; it identifies the pool among others.
	Name string
	// Zone, Instance and Count are read from a name of the form
	// ZONE_INSTANCE_COUNT or ZONE_INSTANCE; a name of another form is all
	// Zone, with Instance empty and Count 0.
	Zone     string
	Instance string
	Count    int
	// File is the path the trace was read from.
	File string
	// Gap is the time between two consecutive points.
	Gap time.Duration
	// Points holds, per tick, the instances available (or still running);
	// a point above 0 means spot capacity can be had during that tick for
	// one instance (a gang of several: see Gang).
	Points []int
}

// Available reports whether spot can be had during tick i. Ticks outside
// the trace have no capacity: nothing is known of them.
func (t *Trace) Available(i int) bool {
	return i >= 0 && i < len(t.Points) && t.Points[i] > 0
}

// Len is the number of ticks.
func (t *Trace) Len() int { return len(t.Points) }

// Span is the time the trace covers.
func (t *Trace) Span() time.Duration { return time.Duration(len(t.Points)) * t.Gap }

// file is the JSON layout; pointers tell a missing field from a zero one.
type file struct {
	Metadata *struct {
		GapSeconds *float64 `json:"gap_seconds"`
	} `json:"metadata"`
	Data *[]float64 `json:"data"`
}

// Load reads one trace file.
func Load(path string) (*Trace, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Problem: "cannot be read", Err: err}
	}
	return Parse(path, b)
}

// Parse reads a trace from the bytes of the file at path; path names the
// trace and appears in errors.
func Parse(path string, b []byte) (*Trace, error) {
	bad := func(problem string, err error) (*Trace, error) {
		return nil, &Error{File: path, Problem: problem, Err: err}
	}
	var f file
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&f); err != nil {
		return bad("is not a JSON trace", err)
	}
	switch {
	case f.Metadata == nil || f.Metadata.GapSeconds == nil:
		return bad("has no metadata.gap_seconds", nil)
	case !(*f.Metadata.GapSeconds > 0) || math.IsInf(*f.Metadata.GapSeconds, 0):
		return bad(fmt.Sprintf("metadata.gap_seconds is %v; it must be a positive number of seconds", *f.Metadata.GapSeconds), nil)
	case f.Data == nil:
		return bad("has no data array", nil)
	case len(*f.Data) == 0:
		return bad("has an empty data array", nil)
	}
	gap := time.Duration(math.Round(*f.Metadata.GapSeconds * float64(time.Second)))
	if gap <= 0 {
		return bad(fmt.Sprintf("metadata.gap_seconds %v is below a nanosecond", *f.Metadata.GapSeconds), nil)
	}
	points := make([]int, len(*f.Data))
	for i, v := range *f.Data {
		if v < 0 || v != math.Trunc(v) || v > math.MaxInt32 {
			return bad(fmt.Sprintf("data[%d] is %v; points are counts of instances (0, 1, 2, ...)", i, v), nil)
		}
		points[i] = int(v)
	}
	t := &Trace{File: path, Gap: gap, Points: points}
	t.Name, t.Zone, t.Instance, t.Count = nameOf(path)
	return t, nil
}

// nameOf splits a file name ZONE_INSTANCE[_COUNT].json into its parts.
func nameOf(path string) (name, zone, instance string, count int) {
	name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	parts := strings.Split(name, "_")
	switch len(parts) {
	case 3:
		if n, err := strconv.Atoi(parts[2]); err == nil && n >= 0 {
			return name, parts[0], parts[1], n
		}
	case 2:
		return name, parts[0], parts[1], 0
	}
	return name, name, "", 0
}

// Find lists every trace file (*.json) under dir, at any depth, sorted so
// that runs over the same directory are reproducible.
func Find(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.EqualFold(filepath.Ext(p), ".json") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, &Error{File: dir, Problem: "cannot be listed", Err: err}
	}
	if len(out) == 0 {
		return nil, &Error{File: dir, Problem: "holds no trace files (*.json)"}
	}
	sort.Strings(out)
	return out, nil
}

// LoadAll loads every file in paths, stopping at the first that is bad.
func LoadAll(paths []string) ([]*Trace, error) {
	out := make([]*Trace, 0, len(paths))
	for _, p := range paths {
		t, err := Load(p)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}
