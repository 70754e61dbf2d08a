package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// Save uploads every regular file under dir, recursively, as checkpoint
// step, then its manifest. Symlinks and empty directories are not kept.
// Saving a step again replaces it; its old manifest is removed first so the
// step is never good while its data is being rewritten.
func (s *Store) Save(ctx context.Context, step int64, dir, instanceID string) (Manifest, error) {
	if step < 0 {
		return Manifest{}, fmt.Errorf("checkpoint: negative step %d", step)
	}
	paths, err := regularFiles(dir)
	if err != nil {
		return Manifest{}, fmt.Errorf("checkpoint: read %s: %w", dir, err)
	}
	if err := s.bucket.Delete(ctx, manifestKey(step)); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return Manifest{}, fmt.Errorf("checkpoint: replace step %d: %w", step, err)
	}
	s.forget(step)

	m := Manifest{JobID: s.jobID, Step: step, InstanceID: instanceID, Files: []File{}}
	for _, p := range paths {
		f, err := s.upload(ctx, step, dir, p)
		if err != nil {
			return Manifest{}, err
		}
		m.Files = append(m.Files, f)
	}
	m.CreatedAt = time.Now().UTC()
	raw, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Manifest{}, err
	}
	opts := &blob.WriterOptions{ContentType: "application/json"}
	if err := s.bucket.WriteAll(ctx, manifestKey(step), raw, opts); err != nil {
		return Manifest{}, fmt.Errorf("checkpoint: write manifest of step %d: %w", step, err)
	}
	s.trust(step, sha256.Sum256(raw))
	return m, nil
}

// upload copies one file to the bucket, hashing it on the way.
func (s *Store) upload(ctx context.Context, step int64, dir, path string) (File, error) {
	src, err := os.Open(filepath.Join(dir, filepath.FromSlash(path)))
	if err != nil {
		return File{}, fmt.Errorf("checkpoint: %w", err)
	}
	defer src.Close()
	// A cancelled context makes the writer discard the partial object.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.bucket.NewWriter(wctx, dataKey(step, path), nil)
	if err != nil {
		return File{}, fmt.Errorf("checkpoint: upload %s of step %d: %w", path, step, err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), src)
	if err != nil {
		cancel()
		w.Close()
		return File{}, fmt.Errorf("checkpoint: upload %s of step %d: %w", path, step, err)
	}
	if err := w.Close(); err != nil {
		return File{}, fmt.Errorf("checkpoint: upload %s of step %d: %w", path, step, err)
	}
	return File{Path: path, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// regularFiles lists the regular files under dir as slash-separated
// relative paths, in lexical order.
func regularFiles(dir string) ([]string, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		paths = append(paths, filepath.ToSlash(rel))
		return nil
	})
	return paths, err
}
