package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"gocloud.dev/gcerrors"
)

// Restore downloads the files of m into dir, creating directories as
// needed and checking each file's size and sha256 as it is written. Each
// file is written under a temporary name and renamed into place once it
// verifies. On any failure everything Restore created is removed again and,
// when the data differs from the manifest, a *CorruptError is returned.
func (s *Store) Restore(ctx context.Context, m Manifest, dir string) (err error) {
	var created []string // files and directories, in creation order
	defer func() {
		if err == nil {
			return
		}
		for _, p := range slices.Backward(created) {
			os.Remove(p)
		}
	}()
	if created, err = mkdirAll(dir, created); err != nil {
		return fmt.Errorf("checkpoint: restore: %w", err)
	}
	for _, f := range m.Files {
		if !filepath.IsLocal(filepath.FromSlash(f.Path)) {
			return &CorruptError{Step: m.Step, File: f.Path, Reason: "path leaves the checkpoint"}
		}
		dst := filepath.Join(dir, filepath.FromSlash(f.Path))
		if created, err = mkdirAll(filepath.Dir(dst), created); err != nil {
			return fmt.Errorf("checkpoint: restore: %w", err)
		}
		tmp := dst + ".refuel-restore"
		created = append(created, tmp)
		if err := s.download(ctx, m.Step, f, tmp); err != nil {
			return err
		}
		if err := os.Rename(tmp, dst); err != nil {
			return fmt.Errorf("checkpoint: restore: %w", err)
		}
		created[len(created)-1] = dst
	}
	return nil
}

func (s *Store) download(ctx context.Context, step int64, f File, path string) error {
	r, err := s.bucket.NewReader(ctx, dataKey(step, f.Path), nil)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return &CorruptError{Step: step, File: f.Path, Reason: "missing"}
	}
	if err != nil {
		return fmt.Errorf("checkpoint: read %s of step %d: %w", f.Path, step, err)
	}
	defer r.Close()
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("checkpoint: restore: %w", err)
	}
	if err := copyVerified(step, f, r, out); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("checkpoint: restore: %w", err)
	}
	return nil
}

// mkdirAll is os.MkdirAll that appends the directories it made to created,
// so a failed Restore can take them away again.
func mkdirAll(dir string, created []string) ([]string, error) {
	info, err := os.Stat(dir)
	if err == nil {
		if !info.IsDir() {
			return created, &fs.PathError{Op: "mkdir", Path: dir, Err: fs.ErrExist}
		}
		return created, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return created, err
	}
	if parent := filepath.Dir(dir); parent != dir {
		if created, err = mkdirAll(parent, created); err != nil {
			return created, err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return created, err
	}
	return append(created, dir), nil
}
