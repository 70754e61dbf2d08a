// refuel-bench runs the benchmarks that start an embedded Temporal stack
// of their own. They live apart from the starter so that the CLI people
// type into (and their shells complete with) does not carry the Temporal
// server: `starter scale-bench` runs `refuel-bench scale`. Exit status: 0
// success, 1 the bench failed, 2 a usage mistake.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	root := &cobra.Command{
		Use:           "refuel-bench",
		Short:         "refuel's benchmarks that run an embedded stack of their own",
		SilenceErrors: true,
		SilenceUsage:  true,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown benchmark %q; refuel-bench -h lists them", args[0])
			}
			return nil
		},
		RunE: func(*cobra.Command, []string) error { return usagef("give a benchmark: refuel-bench scale") },
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(args)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err.Error()} })
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(scaleCommand())
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), err)
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "run `%s -h` for its flags and an example\n", cmd.CommandPath())
		return 2
	}
	return 1
}

// usageError is a mistake in how the bench was called (exit 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// noArgs wants no arguments; otherwise it is the usage error msg.
func noArgs(msg string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 0 {
			return usageError{msg}
		}
		return nil
	}
}
