package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"refuel/jobs"
	"refuel/pkg/agent"
	"refuel/pkg/checkpoint"
	"refuel/workflows"
)

// logsPoll is how often --follow looks for new output; the agent uploads
// every few seconds.
const logsPoll = time.Second

func logsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "logs ID [--follow] [--attempt N] [--progress]",
		Short:   "print a run's trainer output, every attempt's in order",
		Example: "  starter logs llama-ft-0427 --follow\n  starter logs llama-ft-0427 --attempt 2",
		Args:    exactArgs(1, "give one run id: starter logs ID [--follow] [--attempt N]"),
	}
	conn := addClientFlags(cmd)
	fs := cmd.Flags()
	follow := fs.Bool("follow", false, "keep printing new output until the run ends")
	progress := fs.Bool("progress", false, "print the trainer's REFUEL_PROGRESS lines too (hidden: the agent reads them, and status shows where they got)")
	attempt := fs.Int("attempt", 0, "print only attempt N (status shows a run's attempt)")
	storeURL := fs.String("checkpoint-url", defaultStoreURL(),
		"checkpoint store of runs that do not record theirs in status (started by an older refuel) and whose spec names none: the worker's --checkpoint-url (default REFUEL_CHECKPOINT_URL, else <REFUEL_DATA_DIR, or ./.refuel>/checkpoints)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if *attempt < 0 {
			return usagef("--attempt %d: attempts are numbered from 1; leave it out for every attempt", *attempt)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		return conn.withClient(ctx, func(c client.Client) error {
			return printLogs(ctx, c, conn, args[0], logOptions{attempt: *attempt, follow: *follow, progress: *progress, storeURL: *storeURL}, cmd.OutOrStdout(), cmd.ErrOrStderr())
		})
	}
	return cmd
}

// logOptions are what logs prints: an attempt's output or every one (0),
// followed or not, with progress lines or without.
type logOptions struct {
	attempt          int
	follow, progress bool
	storeURL         string
}

func printLogs(ctx context.Context, c client.Client, conn *clientFlags, id string, o logOptions, stdout, stderr io.Writer) error {
	attempt := o.attempt
	if _, err := jobs.RequireType(ctx, c, id, workflows.TrainingRunName, "services have no trainer; only training runs have logs"); err != nil {
		return err
	}
	url, err := jobs.StoreURL(ctx, c, conn.dataConverter(), id, o.storeURL)
	if err != nil {
		return err
	}
	store, err := checkpoint.Open(ctx, url, id)
	if err != nil {
		return err
	}
	defer store.Close()

	var attempts []int
	if attempt > 0 {
		attempts = []int{attempt}
	}
	var running func(context.Context) (bool, error)
	if o.follow {
		running = func(ctx context.Context) (bool, error) {
			w, err := jobs.Describe(ctx, c, id)
			return w.Running, err
		}
	}
	p := &logPrinter{w: stdout, progress: o.progress}
	err = followLogs(ctx, store.NewLogReader(attempts...), p, logsPoll, running)
	if ctx.Err() != nil {
		return nil // Ctrl-C ends a follow
	}
	if err != nil || p.printed {
		return err
	}
	return noOutput(ctx, store, id, attempt, stderr)
}

// noOutput explains an empty answer: nothing stored yet, or not for the
// attempt asked for (an error, naming the attempts that have output).
func noOutput(ctx context.Context, store *checkpoint.Store, id string, attempt int, stderr io.Writer) error {
	if attempt == 0 {
		fmt.Fprintf(stderr, "no output of %s stored yet in %s\n", id, store.LogsURL())
		return nil
	}
	segs, err := store.LogSegments(ctx)
	if err != nil {
		return err
	}
	var have []string
	for _, g := range segs {
		if a := fmt.Sprint(g.Attempt); !slices.Contains(have, a) {
			have = append(have, a)
		}
	}
	if len(have) == 0 {
		return fmt.Errorf("%s has no output of attempt %d in %s, nor of any other yet", id, attempt, store.LogsURL())
	}
	return fmt.Errorf("%s has no output of attempt %d in %s; attempts with output: %s", id, attempt, store.LogsURL(), strings.Join(have, ", "))
}

// followLogs prints what r reads. With running set it goes on polling
// until running says the run ended, then reads once more: a run's last
// attempt uploads its output before the run can end.
func followLogs(ctx context.Context, r *checkpoint.LogReader, p *logPrinter, poll time.Duration, running func(context.Context) (bool, error)) error {
	for {
		chunks, err := r.Next(ctx)
		if err != nil {
			return err
		}
		p.print(chunks)
		if running == nil {
			return nil
		}
		on, err := running(ctx)
		if err != nil {
			return err
		}
		if !on {
			running = nil // one last read
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// logPrinter prints output chunks, under a header whenever the attempt
// or instance changes, as tail does for several files. The trainer's
// progress lines are left out unless progress is set.
type logPrinter struct {
	w        io.Writer
	progress bool
	last     *checkpoint.LogSource
	printed  bool
	// partial is the stream whose last text printed was part of a line,
	// so no newline was printed after it; "" when none.
	partial checkpoint.LogStream
}

func (p *logPrinter) print(chunks []checkpoint.LogChunk) {
	for _, c := range chunks {
		if p.last == nil || *p.last != c.LogSource {
			p.endLine()
			if p.printed {
				fmt.Fprintln(p.w)
			}
			fmt.Fprintf(p.w, "==> attempt %d on %s <==\n", c.Attempt, c.Instance)
			src := c.LogSource
			p.last = &src
		}
		if c.Missing > 0 {
			p.endLine()
			fmt.Fprintf(p.w, "[refuel] ... %d earlier segments of this output are no longer kept\n", c.Missing)
		}
		for _, l := range c.Lines {
			if !p.progress && l.Stream == checkpoint.Stdout && !l.Partial && p.partial == "" && agent.ProgressLine(l.Text) {
				continue
			}
			if l.Stream != p.partial {
				p.endLine()
			}
			if l.Stream == checkpoint.AgentStream {
				fmt.Fprintf(p.w, "[refuel] %s\n", l.Text)
				continue
			}
			fmt.Fprint(p.w, l.Text)
			p.partial = ""
			if l.Partial {
				p.partial = l.Stream
			} else {
				fmt.Fprintln(p.w)
			}
		}
		p.printed = true
	}
}

func (p *logPrinter) endLine() {
	if p.partial != "" {
		fmt.Fprintln(p.w)
		p.partial = ""
	}
}

// defaultStoreURL is the worker's default store as this shell would
// start it: REFUEL_CHECKPOINT_URL, else <data-dir>/checkpoints.
func defaultStoreURL() string {
	if u := os.Getenv("REFUEL_CHECKPOINT_URL"); u != "" {
		return u
	}
	dir := os.Getenv("REFUEL_DATA_DIR")
	if dir == "" {
		dir = ".refuel"
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	return "file://" + filepath.Join(abs, "checkpoints")
}
