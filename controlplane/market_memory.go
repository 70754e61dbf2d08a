package controlplane

import (
	"context"
	"fmt"
	"path/filepath"

	"refuel/pkg/marketmem"
)

// openMarketMemory opens the deployment's market memory at
// cfg.MarketMemory (default file://<DataDir>/market-memory, mem:// with
// InMemory) and folds in the logs an older refuel kept in the data dir.
func openMarketMemory(ctx context.Context, cfg Config) (*marketmem.Store, error) {
	url := cfg.MarketMemory
	switch {
	case url != "":
	case cfg.InMemory:
		url = "mem://"
	default:
		url = "file://" + filepath.Join(cfg.DataDir, "market-memory")
	}
	m, err := marketmem.Open(ctx, url, cfg.Deployment, marketmem.Options{})
	if err != nil {
		return nil, fmt.Errorf("--market-memory: %w", err)
	}
	if !cfg.InMemory {
		err = m.Migrate(ctx, filepath.Join(cfg.DataDir, "stock-logs.json"), filepath.Join(cfg.DataDir, "checkpoint-logs.json"))
	}
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("market memory: fold in the data dir's logs: %w", err)
	}
	return m, nil
}
