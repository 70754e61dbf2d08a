package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"refuel/pkg/checkpoint"
)

// Gang is this node's place in a gang of several nodes training one job
// together. Its zero value, or Nodes 1, is a run of one node, exactly as
// without it.
type Gang struct {
	// Rank is this node's, 0 to Nodes-1. Rank 0's checkpoints are the
	// job's; the others' are their shards.
	Rank  int
	Nodes int
	// MasterAddr and MasterPort are where rank 0's trainer listens for the
	// others: rank 0's instance's address (capacity.Instance.Address).
	MasterAddr string
	MasterPort int
}

// together reports whether the run is one of several nodes.
func (g Gang) together() bool { return g.Nodes > 1 }

// check says what is wrong with a gang's place, naming the field.
func (g Gang) check() error {
	if !g.together() {
		return nil
	}
	var errs []error
	if g.Rank < 0 || g.Rank >= g.Nodes {
		errs = append(errs, fmt.Errorf("gang rank %d of %d nodes: want 0 to %d", g.Rank, g.Nodes, g.Nodes-1))
	}
	if g.MasterAddr == "" || strings.ContainsAny(g.MasterAddr, "\x00 ") {
		errs = append(errs, fmt.Errorf("gang master address %q: want rank 0's instance's address", g.MasterAddr))
	}
	if g.MasterPort < 1 || g.MasterPort > 65535 {
		errs = append(errs, fmt.Errorf("gang master port %d: want 1 to 65535", g.MasterPort))
	}
	return errors.Join(errs...)
}

// environment is the contract's variables of a gang; none for one node.
func (g Gang) environment() []string {
	if !g.together() {
		return nil
	}
	return []string{
		"REFUEL_NODE_RANK=" + strconv.Itoa(g.Rank),
		"REFUEL_NUM_NODES=" + strconv.Itoa(g.Nodes),
		"REFUEL_MASTER_ADDR=" + g.MasterAddr,
		"REFUEL_MASTER_PORT=" + strconv.Itoa(g.MasterPort),
	}
}

// ownsCheckpoints reports whether this node's checkpoints are the job's:
// a run of one node's, and rank 0's of a gang.
func (g Gang) ownsCheckpoints() bool { return !g.together() || g.Rank == 0 }

// stoppedPrefix starts the line a gang's trainer prints when it stops
// because its gang stopped, without being asked itself.
const stoppedPrefix = "REFUEL_STOPPED"

// stoppedLine notes a REFUEL_STOPPED line of a gang's trainer.
func (r *run) stoppedLine(line string) {
	if !r.cfg.Gang.together() {
		return
	}
	if f := strings.Fields(line); len(f) > 0 && f[0] == stoppedPrefix {
		r.mu.Lock()
		r.gangStopped = true
		r.mu.Unlock()
	}
}

// restoreShard lays this rank's own shard of step, when the store has one
// that verifies, over the job's checkpoint restored in dir: its files
// replace the job's of the same name. A shard that does not verify is
// skipped, saying so; the trainer then has the job's checkpoint alone.
func (r *run) restoreShard(ctx context.Context, step int64, dir string) error {
	ms, err := r.shards.List(ctx)
	if err != nil {
		return fmt.Errorf("agent: restore rank %d's shard: %w", r.cfg.Gang.Rank, err)
	}
	for _, m := range ms {
		if m.Step != step {
			continue
		}
		tmp := filepath.Join(r.checkpointDir(), ".shard-"+stepName(step))
		defer os.RemoveAll(tmp)
		err := r.shards.Restore(ctx, m, tmp)
		var corrupt *checkpoint.CorruptError
		if errors.As(err, &corrupt) {
			r.say("skipping rank %d's shard of step %d: %v", r.cfg.Gang.Rank, step, corrupt)
			return nil
		}
		if err != nil {
			return fmt.Errorf("agent: restore rank %d's shard: %w", r.cfg.Gang.Rank, err)
		}
		if err := overlay(tmp, dir); err != nil {
			return fmt.Errorf("agent: restore rank %d's shard: %w", r.cfg.Gang.Rank, err)
		}
		r.say("restored rank %d's shard of step %d from %s", r.cfg.Gang.Rank, step, r.shards.StepURL(step))
		return nil
	}
	r.say("rank %d has no shard of step %d in %s", r.cfg.Gang.Rank, step, r.shards.URL())
	return nil
}

// overlay moves every regular file under src to the same place under dst,
// replacing what is there.
func overlay(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
			return err
		}
		return os.Rename(path, to)
	})
}
