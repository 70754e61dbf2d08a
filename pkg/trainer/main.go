package trainer

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
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
	// exitKilled is an Embedded trainer's when killed, as a shell reports
	// a process killed by SIGKILL.
	exitKilled = 128 + 9
)

// Main is the `trainer` subcommand of the worker binary. args are the
// arguments after the subcommand name; the checkpoint directory comes from
// $REFUEL_CHECKPOINT_DIR, the trainer's place in a gang from
// $REFUEL_NUM_NODES and the rest. SIGTERM and SIGINT stop the run at the
// end of the current step with a checkpoint. It returns the process exit
// code.
func Main(args []string, stdout, stderr io.Writer) int {
	// Registered before the first protocol line, so an agent that signals as
	// soon as it sees progress never hits the default action (death).
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return start(ctx, nil, args, os.Getenv, stdout, stderr)
}

// Embedded is Main run inside the caller's process, as a node agent hosts
// the demo trainer on a virtual instance: the same flags, checkpoints,
// protocol lines and exit codes, and so the same model. env is its whole
// environment, where $REFUEL_CHECKPOINT_DIR and the gang's variables are
// read. Cancelling ctx is
// SIGTERM: the step under way is finished and checkpointed, and it returns
// 0. Closing kill is SIGKILL: it returns at once, 137, leaving at most a
// checkpoint it was writing (whole, or only as a temp directory).
func Embedded(ctx context.Context, kill <-chan struct{}, args, env []string, stdout, stderr io.Writer) int {
	getenv := func(name string) string {
		value := ""
		for _, kv := range env {
			if n, v, _ := strings.Cut(kv, "="); n == name {
				value = v
			}
		}
		return value
	}
	return start(ctx, kill, args, getenv, stdout, stderr)
}

// start is one life of the trainer, in a process of its own or not:
// ctx is its SIGTERM and kill, nil for a process, its SIGKILL; getenv
// reads its environment.
func start(ctx context.Context, kill <-chan struct{}, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitUsage
	}
	dir := getenv(CheckpointDirEnv)
	if dir == "" {
		fmt.Fprintf(stderr, "trainer: %s is not set\n", CheckpointDirEnv)
		return exitUsage
	}
	g, err := gangFromEnv(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "trainer: %v\n", err)
		return exitUsage
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		fmt.Fprintf(stderr, "trainer: %v\n", err)
		return exitFailed
	}
	s := session{cfg: cfg, gang: g, dir: dir, out: stdout, log: stderr, kill: kill}
	_, err = s.run(ctx)
	switch {
	case errors.Is(err, errKilled):
		return exitKilled
	case err != nil:
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
	fs.DurationVar(&cfg.JoinTimeout, "join-timeout", DefaultJoinTimeout, "in a gang: how long the ranks wait for each other to start")
	fs.DurationVar(&cfg.PeerTimeout, "peer-timeout", DefaultPeerTimeout, "in a gang: how long a step's exchange may wait for another rank")
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
