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

	m := Manifest{JobID: s.jobID, Step: step, InstanceID: instanceID, Files: []File{}, Run: s.run}
	dirs := map[string]bool{}
	for _, p := range paths {
		f, fileDir, err := s.upload(ctx, step, dir, p)
		if err != nil {
			return Manifest{}, err
		}
		m.Files = append(m.Files, f)
		dirs[fileDir] = true
	}
	// The data must be durable before the manifest that vouches for it.
	for d := range dirs {
		if err := syncDir(d); err != nil {
			return Manifest{}, fmt.Errorf("checkpoint: step %d: %w", step, err)
		}
	}
	m.CreatedAt = time.Now().UTC()
	raw, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Manifest{}, err
	}
	manifestDir, err := s.put(ctx, manifestKey(step), "application/json", func(w io.Writer) error {
		_, err := w.Write(raw)
		return err
	})
	if err == nil {
		err = syncDir(manifestDir)
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("checkpoint: write manifest of step %d: %w", step, err)
	}
	s.trust(step, sha256.Sum256(raw))
	return m, nil
}

// put writes one object with what write writes. In a bucket on the local
// file system the object is a file of mode 0600, synced before it is
// renamed into place; put returns its directory so that the caller can
// sync the rename too ("" in other buckets, whose writes are durable once
// they return).
func (s *Store) put(ctx context.Context, key, contentType string, write func(io.Writer) error) (string, error) {
	var f *os.File
	opts := &blob.WriterOptions{
		// With a content type the writer opens at once, so the file exists
		// to be synced before Close renames it.
		ContentType: contentType,
		BeforeWrite: func(as func(any) bool) error {
			if as(&f) {
				return f.Chmod(0o600)
			}
			return nil
		},
	}
	// A cancelled context makes the writer discard the partial object.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.bucket.NewWriter(wctx, key, opts)
	if err != nil {
		return "", err
	}
	err = write(w)
	if err == nil && f != nil {
		err = f.Sync()
	}
	if err != nil {
		cancel()
		_ = w.Close()
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	if f == nil {
		return "", nil
	}
	return filepath.Dir(f.Name()), nil
}

// syncDir makes the renames into a local directory durable; "" is no
// local directory.
func syncDir(dir string) error {
	if dir == "" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// upload copies one file to the bucket, hashing it on the way, and
// returns the local directory it went to, if any (see put).
func (s *Store) upload(ctx context.Context, step int64, dir, path string) (File, string, error) {
	src, err := os.Open(filepath.Join(dir, filepath.FromSlash(path)))
	if err != nil {
		return File{}, "", fmt.Errorf("checkpoint: %w", err)
	}
	defer src.Close()
	h := sha256.New()
	var n int64
	objectDir, err := s.put(ctx, dataKey(step, path), "application/octet-stream", func(w io.Writer) error {
		var err error
		n, err = io.Copy(io.MultiWriter(w, h), src)
		return err
	})
	if err != nil {
		return File{}, "", fmt.Errorf("checkpoint: upload %s of step %d: %w", path, step, err)
	}
	return File{Path: path, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, objectDir, nil
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
