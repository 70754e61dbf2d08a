package marketmem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"refuel/pkg/policy"
)

// Migrate folds into the memory the logs an older refuel kept in its data
// dir: stockPath (stock-logs.json, per offering key a StockLog) and
// checkpointPath (checkpoint-logs.json, per pool key a CheckpointLog).
// A missing file is nothing to fold. Each file is folded once, whichever
// writer does it and however often it is called: the memory keeps the
// file's sha256. The files are left as they are.
func (s *Store) Migrate(ctx context.Context, stockPath, checkpointPath string) error {
	var stock map[string]StockLog
	stockSum, err := readLegacy(stockPath, "stock logs", &stock)
	if err != nil {
		return err
	}
	var pools map[string]policy.CheckpointLog
	poolsSum, err := readLegacy(checkpointPath, "checkpoint logs", &pools)
	if err != nil {
		return err
	}
	if stockSum == "" && poolsSum == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.refresh(ctx); err != nil {
		// Folding a file in without knowing it is not already would
		// count it twice.
		return err
	}
	changed := false
	if stockSum != "" && !s.view.imported(stockSum) {
		for k, l := range stock {
			p := s.own.Stock[k]
			p.In, p.Out = p.In.Plus(l.In), p.Out.Plus(l.Out)
			if p.NoneSince.IsZero() {
				p.NoneSince = l.NoneSince
			}
			s.own.setStock(k, p)
		}
		s.own.Imported = union(s.own.Imported, []string{stockSum})
		changed = true
	}
	if poolsSum != "" && !s.view.imported(poolsSum) {
		for k, l := range pools {
			s.own.fold(Observation{Key: k, Log: &l})
		}
		s.own.Imported = union(s.own.Imported, []string{poolsSum})
		changed = true
	}
	if !changed {
		return nil
	}
	return s.save(ctx)
}

// readLegacy decodes the file at path into v and returns its sha256; a
// missing file (or no path) gives "".
func readLegacy(path, what string, v any) (string, error) {
	if path == "" {
		return "", nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return "", fmt.Errorf("%s: %w; delete it to start the %s afresh", path, err, what)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}
