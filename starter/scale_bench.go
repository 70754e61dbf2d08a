package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"
)

// benchBinary is the binary of the benchmarks that start an embedded
// Temporal stack. They are kept out of the starter, which would otherwise
// carry the Temporal server: 266 MB and 0.33 s to start (every shell
// completion runs it) against 79 MB and 0.04 s without.
const benchBinary = "refuel-bench"

// scaleBenchCommand is `starter scale-bench` (docs/contracts.md): it runs
// `refuel-bench scale` with the same arguments and exit status.
func scaleBenchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scale-bench [--runs N] [--storm FRACTION] [--json]",
		Short: "a thousand runs on one worker: raw rate, steady-state cost, a storm of preemptions (make bench-scale)",
		Long: `A thousand runs on one worker, on an embedded stack of the bench's own:
the server's raw rate, the steady state's requests per running job, a storm
of preemptions and the recoveries. It runs refuel-bench scale (beside this
binary, or on PATH; make build builds both) with these arguments: its flags
are refuel-bench scale -h's.`,
		Example:            "  starter scale-bench --runs 1000 --storm 0.3 --json",
		DisableFlagParsing: true,
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		// Help is the bench's own, which has its flags; without the
		// bench, this command's, which says where to get it.
		bin, err := findBench()
		if err != nil {
			if wantsHelp(args) {
				return cmd.Help()
			}
			return err
		}
		x := exec.Command(bin, append([]string{"scale"}, args...)...)
		x.Stdin, x.Stdout, x.Stderr = os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()
		err = x.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return &exitStatus{code: exit.ExitCode()} // the bench said why
		}
		return err
	}
	return cmd
}

// findBench is refuel-bench beside this binary, else on PATH.
func findBench() (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), benchBinary)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath(benchBinary); err == nil {
		return p, nil
	}
	return "", errors.New(benchBinary + " is neither beside the starter nor on PATH: make build builds both into bin/, or run go run ./bench scale")
}

// exitStatus is a child's exit status, passed on; the child has already
// said why.
type exitStatus struct{ code int }

func (e *exitStatus) Error() string { return "exit status " + strconv.Itoa(e.code) }
