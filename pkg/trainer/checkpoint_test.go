package trainer

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestParseStepName(t *testing.T) {
	tests := map[string]struct {
		step int64
		ok   bool
	}{
		"step-0":                   {0, true},
		"step-12":                  {12, true},
		"step-0012":                {12, true},
		"step-9223372036854775807": {9223372036854775807, true},
		"step-9223372036854775808": {0, false},
		"step-":                    {0, false},
		"step--1":                  {0, false},
		"step-+1":                  {0, false},
		"step-1a":                  {0, false},
		"step-1 ":                  {0, false},
		"Step-1":                   {0, false},
		".tmp-step-3-123":          {0, false},
		"step-3.old":               {0, false},
		"checkpoint-3":             {0, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			step, ok := parseStepName(name)
			if step != tc.step || ok != tc.ok {
				t.Errorf("parseStepName(%q) = %d, %v; want %d, %v", name, step, ok, tc.step, tc.ok)
			}
		})
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	cfg := Config{Steps: 40, Seed: 3, Features: 5}
	tests := map[string]int64{"start": 0, "middle": 17, "end": 40}
	for name, step := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			want := Train(Config{Steps: step, Seed: cfg.Seed, Features: cfg.Features})
			if err := writeCheckpoint(dir, cfg, want); err != nil {
				t.Fatal(err)
			}
			got, st, err := readCheckpoint(filepath.Join(dir, stepDirName(step)))
			if err != nil {
				t.Fatal(err)
			}
			if got.Digest() != want.Digest() || got.Step != want.Step || got.Loss != want.Loss {
				t.Errorf("read step %d loss %g %s, wrote step %d loss %g %s", got.Step, got.Loss, got.Digest(), want.Step, want.Loss, want.Digest())
			}
			if st.Total != cfg.Steps || st.Seed != cfg.Seed || st.Features != cfg.Features {
				t.Errorf("state = %+v, want total %d seed %d features %d", st, cfg.Steps, cfg.Seed, cfg.Features)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("dir holds %d entries, want only %s", len(entries), stepDirName(step))
			}
			ckpt := filepath.Join(dir, stepDirName(step))
			for path, want := range map[string]os.FileMode{ckpt: 0o700, filepath.Join(ckpt, modelFile): 0o600, filepath.Join(ckpt, stateFile): 0o600} {
				if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
					t.Errorf("%s: mode %v, %v; want %v", path, fi.Mode().Perm(), err, want)
				}
			}
		})
	}
}

// damage is one way a checkpoint directory can be left broken.
type damage func(t *testing.T, dir string)

func removeFile(name string) damage {
	return func(t *testing.T, dir string) {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

func overwrite(name, content string) damage {
	return func(t *testing.T, dir string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func flipByte(name string, at int) damage {
	return func(t *testing.T, dir string) {
		path := filepath.Join(dir, name)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[at] ^= 1
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func truncate(name string, size int64) damage {
	return func(t *testing.T, dir string) {
		if err := os.Truncate(filepath.Join(dir, name), size); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadCheckpointErrors(t *testing.T) {
	tests := map[string]struct {
		damage  damage
		missing bool
	}{
		"no model.bin":         {removeFile(modelFile), true},
		"no state.json":        {removeFile(stateFile), true},
		"state not json":       {overwrite(stateFile, "{\"step\":"), false},
		"model.bin truncated":  {truncate(modelFile, 12), false},
		"model.bin empty":      {truncate(modelFile, 0), false},
		"weights altered":      {flipByte(modelFile, 3), false},
		"step disagrees":       {overwrite(stateFile, `{"step":6,"features":5}`), false},
		"no features":          {overwrite(stateFile, `{"step":7}`), false},
		"negative step":        {overwrite(stateFile, `{"step":-1,"features":5}`), false},
		"digest left out":      {overwrite(stateFile, `{"step":7,"features":5}`), false},
		"state of wrong shape": {overwrite(stateFile, `[7]`), false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{Steps: 10, Seed: 1, Features: 5}
			if err := writeCheckpoint(dir, cfg, Train(Config{Steps: 7, Seed: 1, Features: 5})); err != nil {
				t.Fatal(err)
			}
			ckpt := filepath.Join(dir, stepDirName(7))
			tc.damage(t, ckpt)
			_, err := ReadCheckpoint(ckpt)
			if err == nil {
				t.Fatal("ReadCheckpoint succeeded on a damaged checkpoint")
			}
			if IsMissingCheckpoint(err) != tc.missing || IsCorruptCheckpoint(err) == tc.missing {
				t.Errorf("IsMissing = %v, IsCorrupt = %v, want missing %v: %v", IsMissingCheckpoint(err), IsCorruptCheckpoint(err), tc.missing, err)
			}
		})
	}
}

func TestReadCheckpointNoDir(t *testing.T) {
	_, err := ReadCheckpoint(filepath.Join(t.TempDir(), "step-3"))
	if !IsMissingCheckpoint(err) {
		t.Errorf("err = %v, want a missing checkpoint", err)
	}
}

// TestLatestSkipsBadCheckpoints puts a good step-10 next to newer entries
// that must not be resumed from, or newer good ones that must.
func TestLatestSkipsBadCheckpoints(t *testing.T) {
	cfg := Config{Steps: 30, CheckpointEvery: 10, Seed: 9, Features: 6}
	tests := map[string]struct {
		setup func(t *testing.T, dir string)
		want  int64
	}{
		"only the good one": {func(*testing.T, string) {}, 10},
		"leftover temp dir": {func(t *testing.T, dir string) {
			hidden(t, dir, cfg, 20, ".tmp-step-20-123456")
		}, 10},
		"old dir moved aside": {func(t *testing.T, dir string) {
			hidden(t, dir, cfg, 20, ".tmp-step-20-123456.old")
		}, 10},
		"step dir missing model.bin": {func(t *testing.T, dir string) {
			removeFile(modelFile)(t, good(t, dir, cfg, 20))
		}, 10},
		"step dir missing state.json": {func(t *testing.T, dir string) {
			removeFile(stateFile)(t, good(t, dir, cfg, 20))
		}, 10},
		"empty step dir": {func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, "step-20"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, 10},
		"corrupt weights": {func(t *testing.T, dir string) {
			flipByte(modelFile, 0)(t, good(t, dir, cfg, 20))
		}, 10},
		"a file named like a step": {func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "step-20"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}, 10},
		"several bad newer ones": {func(t *testing.T, dir string) {
			removeFile(modelFile)(t, good(t, dir, cfg, 20))
			truncate(modelFile, 1)(t, good(t, dir, cfg, 25))
			hidden(t, dir, cfg, 29, ".tmp-step-29-1")
		}, 10},
		"a newer good one": {func(t *testing.T, dir string) {
			good(t, dir, cfg, 20)
		}, 20},
		"zero-padded name": {func(t *testing.T, dir string) {
			rename(t, good(t, dir, cfg, 20), filepath.Join(dir, "step-0020"))
		}, 20},
		"newer good behind a bad one": {func(t *testing.T, dir string) {
			good(t, dir, cfg, 15)
			removeFile(modelFile)(t, good(t, dir, cfg, 20))
		}, 15},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			good(t, dir, cfg, 10)
			tc.setup(t, dir)
			m, _, found, err := latest(dir, io.Discard)
			if err != nil || !found {
				t.Fatalf("latest = found %v, %v", found, err)
			}
			if m.Step != tc.want {
				t.Errorf("resumes from step %d, want %d", m.Step, tc.want)
			}
			// Finishing from there, replacing any broken step dir on the
			// way, must still end exactly where Train does.
			s := session{cfg: cfg, dir: dir, out: io.Discard, log: io.Discard}
			got, err := s.run(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if want := Train(cfg); got.Digest() != want.Digest() {
				t.Errorf("finished at %s, want %s", got.Digest(), want.Digest())
			}
			checkStepDirs(t, dir, cfg)
		})
	}
}

func TestLatestEmpty(t *testing.T) {
	tests := map[string]func(t *testing.T) string{
		"no dir":    func(t *testing.T) string { return filepath.Join(t.TempDir(), "absent") },
		"empty dir": func(t *testing.T) string { return t.TempDir() },
	}
	for name, dir := range tests {
		t.Run(name, func(t *testing.T) {
			_, _, found, err := latest(dir(t), io.Discard)
			if err != nil || found {
				t.Errorf("latest = found %v, %v; want nothing, no error", found, err)
			}
		})
	}
}

// good writes the reference checkpoint of step n and returns its path.
func good(t *testing.T, dir string, cfg Config, n int64) string {
	t.Helper()
	ref := cfg
	ref.Steps = n
	if err := writeCheckpoint(dir, cfg, Train(ref)); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, stepDirName(n))
}

// hidden leaves a complete checkpoint of step n under a hidden name.
func hidden(t *testing.T, dir string, cfg Config, n int64, name string) {
	t.Helper()
	rename(t, good(t, dir, cfg, n), filepath.Join(dir, name))
}

func rename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

// checkStepDirs checks every readable step-<N> in dir against Train at N.
func checkStepDirs(t *testing.T, dir string, cfg Config) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		n, ok := parseStepName(e.Name())
		if !ok {
			continue
		}
		m, err := ReadCheckpoint(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		ref := cfg
		ref.Steps = n
		if want := Train(ref); m.Digest() != want.Digest() || m.Loss != want.Loss {
			t.Errorf("%s holds %s (loss %g), Train at step %d gives %s (loss %g)", e.Name(), m.Digest(), m.Loss, n, want.Digest(), want.Loss)
		}
	}
	final, err := ReadCheckpoint(filepath.Join(dir, stepDirName(cfg.Steps)))
	if err != nil {
		t.Errorf("final checkpoint: %v", err)
	} else if want := Train(cfg); final.Digest() != want.Digest() {
		t.Errorf("final checkpoint holds %s, want %s", final.Digest(), want.Digest())
	}
}
