// The starter is refuel's CLI for pipelines and operators: submit jobs,
// list, watch, wait for and cancel them, pause, resume, re-prioritise and
// interrupt them; start, load, watch and stop inference services; show
// the capacity pool; run the interruption drill and the demo, replay
// spot-market traces against policies, and run the benchmarks. Every
// Temporal call goes through package jobs. Exit status: 0 success, 1 the
// command or the run it watches failed, 2 a usage mistake.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit statuses (docs/contracts.md).
const (
	exitOK     = 0 // success
	exitFailed = 1 // the command failed, or the run it watches failed, was cancelled or terminated; a failed check
	exitUsage  = 2 // a mistake in how the command was called
)

// run is the CLI with its exit status.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(normalizeArgs(root, args))
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	var child *exitStatus
	if errors.As(err, &child) {
		return child.code
	}
	name := cmd.CommandPath()
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	code := exitCode(err)
	if code == exitUsage {
		fmt.Fprintf(stderr, "run `%s -h` for its flags and an example\n", name)
	}
	return code
}

// exitCode is the exit status err calls for.
func exitCode(err error) int {
	var ue usageError
	var fe *FlagError
	if errors.As(err, &ue) || errors.As(err, &fe) {
		return exitUsage
	}
	return exitFailed
}

// usageError is a mistake in how a command was called (exit 2): a
// missing or extra argument, an unknown flag, a bad flag value.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }
