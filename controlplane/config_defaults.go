package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"refuel/activities"
	"refuel/internal/cluster"
	"refuel/workflows/registry"
)

func (cfg Config) withDefaults() (Config, error) {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.DataDir == "" {
		cfg.DataDir = ".refuel"
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = DefaultStopTimeout
	}
	if cfg.Workflows == nil {
		cfg.Workflows = registry.New()
	}
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return cfg, err
	}
	cfg.DataDir = abs
	// The data directory holds histories, checkpoints and logs: only this
	// user may look in, including into one an older refuel made.
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return cfg, fmt.Errorf("--data-dir %s: %w", cfg.DataDir, err)
	}
	if err := os.Chmod(cfg.DataDir, 0o700); err != nil {
		return cfg, fmt.Errorf("--data-dir %s: %w", cfg.DataDir, err)
	}
	if cfg.FrontendAddr == "" {
		cfg.FrontendAddr = cluster.DefaultFrontendAddr
	}
	if cfg.UIAddr == "" {
		cfg.UIAddr = cluster.DefaultUIAddr
	}
	if cfg.MetricsAddr == "" {
		cfg.MetricsAddr = cluster.DefaultMetricsAddr
	}
	if cfg.CheckpointURL == "" {
		cfg.CheckpointURL = "file://" + filepath.Join(cfg.DataDir, "checkpoints")
	}
	if cfg.Workflows.Run.StoreURL == "" {
		cfg.Workflows.Run.StoreURL = cfg.CheckpointURL
	}
	if len(cfg.SelfCommand) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return cfg, err
		}
		cfg.SelfCommand = []string{exe}
	}
	if cfg.DemoStepTime <= 0 {
		cfg.DemoStepTime = 100 * time.Millisecond
	}
	if cfg.JanitorEvery == 0 {
		cfg.JanitorEvery = time.Minute
	}
	if cfg.Deployment == "" {
		cfg.Deployment = activities.DefaultDeployment
	}
	switch {
	case cfg.PlanCacheMB == 0:
		cfg.PlanCacheMB = 256
	case cfg.PlanCacheMB < 0:
		return cfg, fmt.Errorf("--plan-cache-mb %d is negative: give the megabytes of plans to keep (default 256)", cfg.PlanCacheMB)
	}
	if err := activities.CheckDeployment(cfg.Deployment); err != nil {
		return cfg, fmt.Errorf("--deployment: %w", err)
	}
	switch cfg.Instances {
	case "":
		cfg.Instances = InstancesProcess
	case InstancesProcess:
	case InstancesVirtual:
		if cfg.Provider == ProviderAWS && cfg.Sim.ServeEC2 == "" {
			return cfg, fmt.Errorf("--instances virtual hosts the sim and local clouds' instances in this process, and --provider aws launches real machines: leave --instances out, or add --ec2-sim")
		}
	default:
		return cfg, fmt.Errorf("--instances %q: use process (a node-agent process per instance) or virtual (every instance inside this worker)", cfg.Instances)
	}
	return cfg, nil
}
