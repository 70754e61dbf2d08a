package trainer

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// CheckpointDirEnv names the environment variable through which the node
// agent hands the trainer its checkpoint directory.
const CheckpointDirEnv = "REFUEL_CHECKPOINT_DIR"

// Exit codes, as documented in the package doc.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

// Main is the `trainer` subcommand of the worker binary. args are the
// arguments after the subcommand name; the checkpoint directory comes from
// $REFUEL_CHECKPOINT_DIR. SIGTERM and SIGINT stop the run at the end of the
// current step with a checkpoint. It returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitUsage
	}
	dir := os.Getenv(CheckpointDirEnv)
	if dir == "" {
		fmt.Fprintf(stderr, "trainer: %s is not set\n", CheckpointDirEnv)
		return exitUsage
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		fmt.Fprintf(stderr, "trainer: %v\n", err)
		return exitFailed
	}
	// Registered before the first protocol line, so an agent that signals as
	// soon as it sees progress never hits the default action (death).
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	s := session{cfg: cfg, dir: dir, out: stdout, log: stderr}
	if _, err := s.run(ctx); err != nil {
		fmt.Fprintf(stderr, "trainer: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// parseFlags reads and checks the flags, reporting any problem on stderr
// itself, as the flag package does for the ones it finds.
func parseFlags(args []string, stderr io.Writer) (Config, error) {
	fs := flag.NewFlagSet("trainer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	fs.Int64Var(&cfg.Steps, "steps", 0, "total steps (required)")
	fs.Int64Var(&cfg.CheckpointEvery, "checkpoint-every", DefaultCheckpointEvery, "checkpoint every K steps; 0: only at the end and on SIGTERM")
	fs.DurationVar(&cfg.StepTime, "step-time", DefaultStepTime, "pace each step to take at least this long; 0: as fast as possible")
	fs.Uint64Var(&cfg.Seed, "seed", DefaultSeed, "problem seed")
	fs.IntVar(&cfg.Features, "features", DefaultFeatures, "number of weights")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	err := cfg.validate()
	if fs.NArg() > 0 {
		err = errors.Join(fmt.Errorf("unexpected arguments %q", fs.Args()), err)
	}
	if err != nil {
		fmt.Fprintf(stderr, "trainer: %v\n", err)
	}
	return cfg, err
}
