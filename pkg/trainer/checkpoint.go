package trainer

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

const (
	modelFile  = "model.bin"
	stateFile  = "state.json"
	stepPrefix = "step-"
	// tempPrefix starts with "." so that nothing that lists step-<N>
	// directories, the resume scan or the agent, sees a half-written one.
	tempPrefix = ".tmp-"
)

// state is state.json: what a checkpoint is, beside its weights.
type state struct {
	Step     int64   `json:"step"`
	Total    int64   `json:"total"`
	Seed     uint64  `json:"seed"`
	Loss     float64 `json:"loss"`
	Features int     `json:"features"`
	Digest   string  `json:"digest"`
}

// CheckpointError says a checkpoint directory cannot be resumed from.
type CheckpointError struct {
	Dir string
	// Missing is true when a file is absent, as in a copy cut short, and
	// false when the files are present but unreadable or disagree.
	Missing bool
	Err     error
}

func (e *CheckpointError) Error() string {
	problem := "corrupt"
	if e.Missing {
		problem = "incomplete"
	}
	return fmt.Sprintf("checkpoint %s is %s: %v", e.Dir, problem, e.Err)
}

func (e *CheckpointError) Unwrap() error { return e.Err }

// IsMissingCheckpoint reports whether err says a checkpoint lacks a file.
func IsMissingCheckpoint(err error) bool {
	var ce *CheckpointError
	return errors.As(err, &ce) && ce.Missing
}

// IsCorruptCheckpoint reports whether err says a checkpoint's files are
// present but unreadable or inconsistent.
func IsCorruptCheckpoint(err error) bool {
	var ce *CheckpointError
	return errors.As(err, &ce) && !ce.Missing
}

// ReadCheckpoint reads a checkpoint directory (model.bin and state.json).
// It returns a *CheckpointError when a file is missing, does not parse, or
// disagrees with the other (size, digest) or with a step-<N> directory
// name; other errors are I/O failures.
func ReadCheckpoint(dir string) (Model, error) {
	m, _, err := readCheckpoint(dir)
	return m, err
}

func readCheckpoint(dir string) (Model, state, error) {
	var st state
	raw, err := readFile(dir, stateFile)
	if err != nil {
		return Model{}, st, err
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return Model{}, st, &CheckpointError{Dir: dir, Err: fmt.Errorf("%s: %w", stateFile, err)}
	}
	weights, err := readFile(dir, modelFile)
	if err != nil {
		return Model{}, st, err
	}
	corrupt := func(format string, args ...any) (Model, state, error) {
		return Model{}, st, &CheckpointError{Dir: dir, Err: fmt.Errorf(format, args...)}
	}
	if st.Step < 0 || st.Features < 1 {
		return corrupt("%s: step %d, features %d", stateFile, st.Step, st.Features)
	}
	if len(weights) != 8*st.Features {
		return corrupt("%s has %d bytes, want %d for %d features", modelFile, len(weights), 8*st.Features, st.Features)
	}
	if n, ok := parseStepName(filepath.Base(dir)); ok && n != st.Step {
		return corrupt("%s says step %d", stateFile, st.Step)
	}
	m := Model{Step: st.Step, Weights: decodeWeights(weights), Loss: st.Loss}
	if d := m.Digest(); d != st.Digest {
		return corrupt("%s digest %s, %s says %s", modelFile, d, stateFile, st.Digest)
	}
	return m, st, nil
}

func readFile(dir, name string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &CheckpointError{Dir: dir, Missing: true, Err: err}
	}
	return b, err
}

// parseStepName returns N for a directory named step-<N>, N plain or
// zero-padded decimal.
func parseStepName(name string) (int64, bool) {
	digits, ok := strings.CutPrefix(name, stepPrefix)
	if !ok || digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

func stepDirName(n int64) string { return stepPrefix + strconv.FormatInt(n, 10) }

// latest finds the newest checkpoint in dir that reads back whole, logging
// each newer one it skips. found is false when there is none.
func latest(dir string, log io.Writer) (m Model, st state, found bool, err error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return Model{}, state{}, false, nil
	}
	if err != nil {
		return Model{}, state{}, false, err
	}
	type candidate struct {
		step int64
		name string
	}
	var cands []candidate
	for _, e := range entries {
		if n, ok := parseStepName(e.Name()); ok && e.IsDir() {
			cands = append(cands, candidate{n, e.Name()})
		}
	}
	// Newest first; a plain and a padded name for the same step are tried
	// in name order so the choice never depends on the directory listing.
	slices.SortFunc(cands, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(b.step, a.step), strings.Compare(a.name, b.name))
	})
	for _, c := range cands {
		m, st, err := readCheckpoint(filepath.Join(dir, c.name))
		var ce *CheckpointError
		if errors.As(err, &ce) {
			fmt.Fprintf(log, "trainer: skipping %v\n", err)
			continue
		}
		return m, st, err == nil, err
	}
	return Model{}, state{}, false, nil
}

// writeCheckpoint makes dir/step-<N> appear whole or not at all: the files
// are written and synced in a hidden temp directory, which is then renamed.
func writeCheckpoint(dir string, cfg Config, m Model) (err error) {
	// MkdirTemp makes it 0700 and the files are 0600: the weights are the
	// job's alone, and the agent that uploads them runs as the trainer's user.
	tmp, err := os.MkdirTemp(dir, tempPrefix+stepDirName(m.Step)+"-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	meta, err := json.Marshal(state{
		Step:     m.Step,
		Total:    cfg.Steps,
		Seed:     cfg.Seed,
		Loss:     m.Loss,
		Features: len(m.Weights),
		Digest:   m.Digest(),
	})
	if err != nil {
		return err
	}
	if err := writeSynced(filepath.Join(tmp, modelFile), encodeWeights(m.Weights)); err != nil {
		return err
	}
	if err := writeSynced(filepath.Join(tmp, stateFile), append(meta, '\n')); err != nil {
		return err
	}
	if err := syncDir(tmp); err != nil {
		return err
	}
	// rename(2) will not replace a non-empty directory, so a step-<N> left
	// by an earlier life (one the resume scan skipped) is moved aside first.
	final := filepath.Join(dir, stepDirName(m.Step))
	aside := tmp + ".old"
	if err := os.Rename(final, aside); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	return os.RemoveAll(aside)
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir makes a directory's entries (a new file, a rename) durable.
func syncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}
