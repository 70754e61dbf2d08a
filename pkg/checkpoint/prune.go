package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"refuel/pkg/listing"
)

// Prune keeps the newest keep good checkpoints (at least one) and deletes
// every older step, good or not. Steps newer than the newest good one are
// left alone: they may be uploads still in progress. It returns the deleted
// steps, newest first.
//
// Checkpoints this Store saved or verified are not downloaded again; others
// are verified in full, so a corrupt newest checkpoint never causes an
// older good one to be deleted.
func (s *Store) Prune(ctx context.Context, keep int) ([]int64, error) {
	keep = max(keep, 1)
	steps, err := s.steps(ctx)
	if err != nil {
		return nil, err
	}
	var removed []int64
	good := 0
	for _, step := range steps {
		ok, err := s.good(ctx, step)
		if err != nil {
			return removed, err
		}
		if ok && good < keep {
			good++
			continue
		}
		if good == 0 {
			continue
		}
		if err := s.deleteStep(ctx, step); err != nil {
			return removed, err
		}
		removed = append(removed, step)
	}
	return removed, nil
}

// good reports whether a step is a complete checkpoint whose data verifies.
func (s *Store) good(ctx context.Context, step int64) (bool, error) {
	m, sum, err := s.readManifest(ctx, step)
	if err == nil && !s.trusts(step, sum) {
		if err = s.Verify(ctx, m); err == nil {
			s.trust(step, sum)
		}
	}
	var corrupt *CorruptError
	if errors.As(err, &corrupt) {
		return false, nil
	}
	return err == nil, err
}

// deleteStep removes a step's manifest first, so a step half deleted is
// incomplete rather than good with missing data.
func (s *Store) deleteStep(ctx context.Context, step int64) error {
	s.forget(step)
	if err := s.bucket.Delete(ctx, manifestKey(step)); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("checkpoint: delete step %d: %w", step, err)
	}
	// Collect first: deleting while listing confuses some drivers' paging.
	objs, err := listing.All(ctx, s.bucket, &blob.ListOptions{Prefix: stepDir(step) + "/"})
	if err != nil {
		return fmt.Errorf("checkpoint: delete step %d: %w", step, err)
	}
	for _, obj := range objs {
		if err := s.bucket.Delete(ctx, obj.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return fmt.Errorf("checkpoint: delete step %d: %w", step, err)
		}
	}
	s.removeEmptyDirs(stepDir(step))
	return nil
}

// removeEmptyDirs removes the directories left empty under prefix in a
// bucket on the local file system, whose driver deletes files but not
// the directories that held them. Others have no directories.
func (s *Store) removeEmptyDirs(prefix string) {
	u, err := url.Parse(s.url)
	if err != nil || u.Scheme != "file" {
		return
	}
	root := filepath.Join(filepath.FromSlash(u.Path), filepath.FromSlash(prefix))
	var dirs []string
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	// Deepest first; a directory that is not empty stays.
	for _, d := range slices.Backward(dirs) {
		_ = os.Remove(d)
	}
}
