package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/user"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"refuel/jobs"
	"refuel/pkg/devenv"
	"refuel/pkg/spec"
)

// devCommand is `starter dev`: development environments.
func devCommand() *cobra.Command {
	dev := &cobra.Command{
		Use:   "dev",
		Short: "development environments: up, list, status, connect, stop, resume, touch, delete",
		Long: `Development environments: a GPU instance running a server you connect to
(JupyterLab, sshd, code-server), in the same priority queue as training and
inference, whose workspace survives every stop, move and preemption, and
which stops by itself when nobody uses it.`,
		Example: "  starter dev up examples/dev-http.yaml\n" +
			"  starter dev up --id scratch --gpus 1 --idle 30m -- sh -c 'python3 -m http.server $REFUEL_PORT'\n" +
			"  starter dev connect scratch --local-port 8000",
		Args: noArgs("give a dev command: starter dev up, list, status, connect, stop, resume, touch or delete"),
		RunE: func(*cobra.Command, []string) error {
			return usagef("give a dev command: starter dev up, list, status, connect, stop, resume, touch or delete")
		},
	}
	dev.AddCommand(devUpCommand(), devListCommand(), devStatusCommand(), devConnectCommand(),
		devSignalCommand("stop", "save the workspace, give the instance back and wait, spending nothing", jobs.StopDev,
			"stopping %s: it saves its workspace and gives its instance back\n  resume: starter dev resume %s\n"),
		devSignalCommand("resume", "acquire again and restore the workspace", jobs.ResumeDev,
			"resuming %s: it acquires capacity and restores its workspace\n  watch: starter dev status %s --watch\n"),
		devSignalCommand("touch", "count as activity now: the idle clock starts again", jobs.TouchDev,
			"touched %s: its idle clock starts again\n  see: starter dev status %s\n"),
		devDeleteCommand())
	return dev
}

// devUpFlags are what `dev up` takes without a file.
type devUpFlags struct {
	id, tier, team string
	gpus, priority int
	idle           time.Duration
}

// devUpFlagOf names the flag that sets a DevSpec field.
var devUpFlagOf = map[string]string{
	"id": "id", "tier": "tier", "team": "team", "priority": "priority", "resources.gpus": "gpus", "idle_timeout": "idle",
}

func devUpCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "up FILE | --id ID --gpus N [--tier T] [--idle D] -- COMMAND…",
		Short: "start a development environment from a DevSpec file, or from flags and a command",
		Example: "  starter dev up examples/dev-notebook.yaml\n" +
			"  starter dev up --id scratch --gpus 1 --tier flexible --idle 30m -- \\\n" +
			"      sh -c 'exec python3 -m http.server \"$REFUEL_PORT\" --directory \"$REFUEL_WORKSPACE\"'",
	}
	conn := addClientFlags(cmd)
	f := addDevUpFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ds, err := devSpecOf(cmd, f, args)
		if err != nil {
			return err
		}
		ctx := context.Background()
		return conn.withClient(ctx, func(c client.Client) error { return devUp(ctx, c, ds, whoAmI(), cmd.OutOrStdout()) })
	}
	return cmd
}

// addDevUpFlags adds up's flags that describe an environment to fs.
func addDevUpFlags(fs *pflag.FlagSet) *devUpFlags {
	f := &devUpFlags{}
	fs.StringVar(&f.id, "id", "", "the environment's id (without FILE)")
	fs.IntVar(&f.gpus, "gpus", 0, "GPUs the instance must have (without FILE)")
	fs.StringVar(&f.tier, "tier", "", "critical (base or on-demand only; the default) or flexible (spot allowed)")
	fs.DurationVar(&f.idle, "idle", spec.DefaultIdleTimeout, "stop after this long without use; 0 never")
	fs.StringVar(&f.team, "team", "", "the team it is for")
	fs.IntVar(&f.priority, "priority", 0, "0 (lowest) to 100 (highest); the examples give development 70")
	return f
}

// devSpecOf is the DevSpec `dev up` was given: read from its one file,
// or made of its flags and the command after --; field errors of the
// latter name the flags.
func devSpecOf(cmd *cobra.Command, f *devUpFlags, args []string) (spec.DevSpec, error) {
	dash := cmd.ArgsLenAtDash()
	var set []string
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		if slices.Contains(slices.Collect(maps.Values(devUpFlagOf)), fl.Name) {
			set = append(set, "--"+fl.Name)
		}
	})
	if dash < 0 {
		if len(args) != 1 {
			return spec.DevSpec{}, usagef("give one DevSpec file, or --id ID --gpus N -- COMMAND: starter dev up FILE")
		}
		if len(set) > 0 {
			return spec.DevSpec{}, usagef("%s describe an environment without a file: give FILE, or the flags and -- COMMAND, not both", strings.Join(set, ", "))
		}
		return spec.ReadDevSpec(args[0])
	}
	if dash > 0 {
		return spec.DevSpec{}, usagef("%q before --: give the environment with flags (--id ID --gpus N), then -- and its command", args[0])
	}
	idle := spec.Duration(f.idle)
	ds := spec.DevSpec{ID: f.id, Team: f.team, Priority: f.priority, Tier: spec.Tier(f.tier),
		Resources: spec.Resources{GPUs: f.gpus}, Command: args, IdleTimeout: &idle}
	if !cmd.Flags().Changed("gpus") {
		return ds, &FlagError{"gpus", "is required with --id", "say how many GPUs the environment's instance needs, e.g. --gpus 1"}
	}
	ds.Normalize()
	var ve *spec.ValidationError
	if err := ds.Validate(); errors.As(err, &ve) {
		fe := ve.Fields[0]
		if name, ok := devUpFlagOf[fe.Field]; ok {
			return ds, &FlagError{name, fe.Problem, fe.Fix}
		}
		if strings.HasPrefix(fe.Field, "command") {
			return ds, usagef("the command after --: %s; %s", fe.Problem, fe.Fix)
		}
		return ds, err
	}
	return ds, nil
}

// whoAmI is who starts an environment: user@host, as far as known.
func whoAmI() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	switch {
	case name == "":
		return host
	case host == "":
		return name
	}
	return name + "@" + host
}

func devUp(ctx context.Context, c client.Client, ds spec.DevSpec, who string, stdout io.Writer) error {
	run, err := jobs.StartDev(ctx, c, ds, who)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "started environment %s (run %s)\n  watch:   starter dev status %s --watch\n  connect: starter dev connect %s\n",
		ds.ID, run.GetRunID(), ds.ID, ds.ID)
	return nil
}

func devListCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "list [--json] [--query Q] [--limit N]",
		Short:   "list development environments, newest first",
		Example: "  starter dev list\n  starter dev list --query 'RefuelTeam=\"research\"' --json",
		Args:    noArgs("starter dev list takes flags only: --json, --query Q, --limit N"),
	}
	conn := addClientFlags(cmd)
	asJSON := cmd.Flags().Bool("json", false, "print one JSON object a line")
	query := cmd.Flags().String("query", "", "a visibility filter such as RefuelTeam=\"research\"")
	limit := cmd.Flags().Int("limit", 100, "list at most this many")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *limit < 1 {
			return &FlagError{"limit", "must be at least 1", "give how many environments to list, e.g. --limit 20"}
		}
		ctx, stdout := context.Background(), cmd.OutOrStdout()
		return conn.withClient(ctx, func(c client.Client) error {
			rows, err := jobs.DevList(ctx, c, *query, *limit)
			if err != nil {
				return err
			}
			if *asJSON {
				return jsonLines(json.NewEncoder(stdout), rows)
			}
			printDevList(stdout, rows, time.Now())
			return nil
		})
	}
	return cmd
}

func devStatusCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status ID [--json] [--watch]",
		Short: "show an environment: state, endpoint, idleness, instance, cost, workspace",
		Example: "  starter dev status scratch\n" +
			"  starter dev status scratch --watch   # exit 1 if it fails",
		Args: exactArgs(1, "give one environment id: starter dev status ID"),
	}
	conn := addClientFlags(cmd)
	asJSON := cmd.Flags().Bool("json", false, "print the status query's answer as JSON")
	watch := cmd.Flags().Bool("watch", false, "refresh every 2s until the environment ends; exit 1 if it failed")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, id, stdout := context.Background(), args[0], cmd.OutOrStdout()
		return conn.withClient(ctx, func(c client.Client) error {
			if *watch {
				return watchDev(ctx, c, id, stdout, *asJSON, 2*time.Second)
			}
			st, err := jobs.DevStatus(ctx, c, id)
			if err != nil {
				return err
			}
			if *asJSON {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			printDevStatus(stdout, st, jobs.LiveDev(ctx, c, id), time.Now())
			return nil
		})
	}
	return cmd
}

// watchDev prints the environment's line every so often until it ends;
// one that failed is an error (exit 1).
func watchDev(ctx context.Context, c client.Client, id string, stdout io.Writer, asJSON bool, every time.Duration) error {
	for {
		st, err := jobs.DevStatus(ctx, c, id)
		if err != nil {
			return err
		}
		if asJSON {
			b, _ := json.Marshal(st)
			fmt.Fprintln(stdout, string(b))
		} else {
			fmt.Fprintln(stdout, devLine(st, jobs.LiveDev(ctx, c, id), time.Now()))
		}
		if w, err := jobs.Describe(ctx, c, id); err == nil && !w.Running {
			e, err := jobs.WaitEnding(ctx, c, id, 0)
			if err != nil {
				return err
			}
			if !e.Succeeded() {
				return &jobs.EndedError{Ending: e}
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// devSignalCommand is `starter dev NAME ID`: one signal, then what it
// does (said, with the id twice).
func devSignalCommand(name, short string, send func(context.Context, client.Client, string) error, said string) *cobra.Command {
	cmd := &cobra.Command{
		Use:     name + " ID",
		Short:   short,
		Example: "  starter dev " + name + " scratch",
		Args:    exactArgs(1, fmt.Sprintf("give one environment id: starter dev %s ID", name)),
	}
	conn := addClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, id := context.Background(), args[0]
		return conn.withClient(ctx, func(c client.Client) error {
			if err := send(ctx, c, id); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), said, id, id)
			return nil
		})
	}
	return cmd
}

func devDeleteCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delete ID [--keep-workspace]",
		Short: "give the instance back and end the environment, deleting its workspace unless kept",
		Example: "  starter dev delete scratch\n" +
			"  starter dev delete scratch --keep-workspace   # starter dev up with the same id restores it",
		Args: exactArgs(1, "give one environment id: starter dev delete ID"),
	}
	conn := addClientFlags(cmd)
	keep := cmd.Flags().Bool("keep-workspace", false, "keep the workspace in the store: an environment started again with the same id restores it")
	timeout := cmd.Flags().Duration("timeout", 10*time.Minute, "how long to wait for it to end; 0 without limit")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, id := context.Background(), args[0]
		return conn.withClient(ctx, func(c client.Client) error {
			return devDelete(ctx, c, id, *keep, *timeout, cmd.OutOrStdout(), cmd.ErrOrStderr())
		})
	}
	return cmd
}

func devDelete(ctx context.Context, c client.Client, id string, keep bool, timeout time.Duration, stdout, stderr io.Writer) error {
	fmt.Fprintf(stderr, "deleting %s; waiting for it to end\n", id)
	e, err := jobs.DeleteDev(ctx, c, id, keep, timeout)
	if err != nil {
		return err
	}
	if !e.Succeeded() {
		return &jobs.EndedError{Ending: e}
	}
	kept := "its workspace deleted"
	if keep {
		kept = "its workspace kept: starter dev up with id " + id + " restores it"
	}
	fmt.Fprintf(stdout, "deleted %s, %s\n", id, kept)
	return nil
}

// devStateHint says what to do about an environment that has no
// endpoint in its state.
func devStateHint(st devenv.Status) string {
	switch st.State {
	case devenv.StateSuspended:
		return fmt.Sprintf("%s is suspended (%s): resume it with starter dev resume %s, then connect again", st.ID, orDash(st.Reason), st.ID)
	case devenv.StatePending, devenv.StateMoving:
		return fmt.Sprintf("%s is %s, without an endpoint yet: wait for it with starter dev status %s --watch", st.ID, st.State, st.ID)
	case devenv.StateFailed:
		return fmt.Sprintf("%s failed (%s): see starter dev status %s, and starter logs %s", st.ID, orDash(st.Reason), st.ID, st.ID)
	case devenv.StateDeleted:
		return fmt.Sprintf("%s was deleted: start it again with starter dev up", st.ID)
	}
	return fmt.Sprintf("%s is %s, without an endpoint yet: wait for it with starter dev status %s --watch", st.ID, st.State, st.ID)
}
