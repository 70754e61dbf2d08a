package agent

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
)

// Func is a trainer that runs as a function inside the agent's process
// rather than as a command, on the same contract (see the package doc):
// args are its arguments, env its whole environment (REFUEL_CHECKPOINT_DIR
// and the rest, as a command gets it; not the agent's process
// environment), and it writes its checkpoints, progress lines and logs the
// way a command does. Cancelling ctx is SIGTERM: save a final checkpoint
// and return. Closing kill is SIGKILL: return at once, writing nothing
// more. The result is the exit status. A panic is an exit status of 2 with
// the panic on stderr.
type Func func(ctx context.Context, kill <-chan struct{}, args, env []string, stdout, stderr io.Writer) int

// function is a Func running.
type function struct {
	stop     context.CancelFunc
	killCh   chan struct{}
	finished chan struct{}

	mu       sync.Mutex
	returned bool
	killed   bool
	code     int
}

func startFunction(fn Func, args, env []string, stdout, stderr *lineWriter) *function {
	ctx, stop := context.WithCancel(context.Background())
	f := &function{stop: stop, killCh: make(chan struct{}), finished: make(chan struct{})}
	go func() {
		defer close(f.finished)
		code := 2
		defer func() {
			if p := recover(); p != nil {
				fmt.Fprintf(stderr, "trainer panicked: %v\n%s", p, debug.Stack())
			}
			stdout.flush()
			stderr.flush()
			stop()
			f.mu.Lock()
			f.returned, f.code = true, code
			f.mu.Unlock()
		}()
		code = fn(ctx, f.killCh, args, env, stdout, stderr)
	}()
	return f
}

func (f *function) done() <-chan struct{} { return f.finished }
func (f *function) terminate()            { f.stop() }

// kill closes the function's kill channel if it has not returned yet.
func (f *function) kill() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.returned || f.killed {
		return
	}
	f.killed = true
	close(f.killCh)
}

// exitCode is what the function returned, or 137 if it had to be killed,
// as for a process killed by SIGKILL.
func (f *function) exitCode() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.killed {
		return exitKilled
	}
	return f.code
}
