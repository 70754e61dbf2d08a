package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"gocloud.dev/gcerrors"
)

// Latest returns the newest checkpoint whose data verifies. Incomplete and
// corrupt checkpoints are skipped; when none is good it returns a
// *NotFoundError listing what was skipped.
func (s *Store) Latest(ctx context.Context) (Manifest, error) {
	steps, err := s.steps(ctx)
	if err != nil {
		return Manifest{}, err
	}
	notFound := &NotFoundError{URL: s.url}
	for _, step := range steps {
		m, sum, err := s.readManifest(ctx, step)
		if err == nil {
			err = s.Verify(ctx, m)
		}
		var corrupt *CorruptError
		if errors.As(err, &corrupt) {
			notFound.Skipped = append(notFound.Skipped, corrupt)
			continue
		}
		if err != nil {
			return Manifest{}, err
		}
		s.trust(step, sum)
		return m, nil
	}
	return Manifest{}, notFound
}

// Verify reads every file of m back and checks its size and sha256. It
// returns a *CorruptError naming the first file that is missing or differs.
func (s *Store) Verify(ctx context.Context, m Manifest) error {
	for _, f := range m.Files {
		if err := s.verifyFile(ctx, m.Step, f); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) verifyFile(ctx context.Context, step int64, f File) error {
	if !filepath.IsLocal(filepath.FromSlash(f.Path)) {
		return &CorruptError{Step: step, File: f.Path, Reason: "path leaves the checkpoint"}
	}
	r, err := s.bucket.NewReader(ctx, dataKey(step, f.Path), nil)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return &CorruptError{Step: step, File: f.Path, Reason: "missing"}
	}
	if err != nil {
		return fmt.Errorf("checkpoint: read %s of step %d: %w", f.Path, step, err)
	}
	defer r.Close()
	if r.Size() != f.Size {
		return &CorruptError{Step: step, File: f.Path, Reason: fmt.Sprintf("size %d, manifest says %d", r.Size(), f.Size)}
	}
	return copyVerified(step, f, r, io.Discard)
}

// copyVerified copies r to w and returns a *CorruptError unless exactly the
// manifest's bytes arrive. Read and write failures are returned as they are:
// they say nothing about the checkpoint.
func copyVerified(step int64, f File, r io.Reader, w io.Writer) error {
	h := sha256.New()
	// One byte more than expected is enough to tell the object grew.
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(r, f.Size+1))
	if err != nil {
		return fmt.Errorf("checkpoint: copy %s of step %d: %w", f.Path, step, err)
	}
	if n != f.Size {
		return &CorruptError{Step: step, File: f.Path, Reason: fmt.Sprintf("read %d bytes, manifest says %d", n, f.Size)}
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
		return &CorruptError{Step: step, File: f.Path, Reason: fmt.Sprintf("sha256 %s, manifest says %s", got, f.SHA256)}
	}
	return nil
}

func (s *Store) trust(step int64, manifestSum [sha256.Size]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trusted[step] = manifestSum
}

func (s *Store) forget(step int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.trusted, step)
}

func (s *Store) trusts(step int64, manifestSum [sha256.Size]byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum, ok := s.trusted[step]
	return ok && sum == manifestSum
}
