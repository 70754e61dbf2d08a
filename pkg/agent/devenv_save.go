package agent

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// A development environment's workspace is kept as saves: each a tar.gz
// archive of the whole workspace, written into the checkpoint directory
// under a hidden name and renamed into place, so the syncer uploads only
// whole saves.

// saveLoop saves the workspace every SaveEvery until ctx ends; a save
// that fails is tried again at the next.
func (d *devSession) saveLoop(ctx context.Context) {
	tick := time.NewTicker(d.cfg.SaveEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if _, err := d.save(ctx); err != nil && ctx.Err() == nil {
				d.r.say("the workspace could not be saved: %v (trying again in %s)", err, d.cfg.SaveEvery)
			}
		}
	}
}

// save writes the workspace as the next save into the checkpoint
// directory, where the syncer uploads it, unless nothing in it changed
// since the last save; it returns the save's step, 0 for none.
func (d *devSession) save(ctx context.Context) (int64, error) {
	ws := d.cfg.Workspace
	sum, err := fingerprint(ws)
	if err != nil {
		return 0, err
	}
	if d.haveSum && sum == d.lastSum {
		return 0, nil
	}
	step := d.next
	dir := d.r.checkpointDir()
	// A name starting with "." is not a checkpoint until the rename.
	tmp := filepath.Join(dir, ".workspace-"+strconv.FormatInt(step, 10))
	if err := os.RemoveAll(tmp); err != nil {
		return 0, err
	}
	if err := makePrivateDir(tmp); err != nil {
		return 0, err
	}
	st, err := writeArchiveFile(ctx, ws, filepath.Join(tmp, WorkspaceArchive))
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, stepName(step)))
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return 0, err
	}
	d.next++
	d.lastSum, d.haveSum, d.lastWritten = sum, true, step
	d.r.say("saved the workspace as step %d: %s", step, st)
	return step, nil
}

func writeArchiveFile(ctx context.Context, dir, path string) (archiveStats, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return archiveStats{}, err
	}
	st, err := writeArchive(ctx, dir, f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return st, err
}
