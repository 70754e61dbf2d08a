package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"

	"refuel/workflows/inference"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"refuel/jobs"
	"refuel/pkg/autoscale"
	"refuel/pkg/spec"
	"refuel/workflows"
)

func serveCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "serve FILE",
		Short:   "start an InferenceService from a YAML or JSON ServiceSpec",
		Example: "  starter serve examples/service.yaml",
		Args:    exactArgs(1, "give one ServiceSpec file: starter serve service.yaml"),
	}
	conn := addClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ss, err := readServiceSpec(args[0])
		if err != nil {
			return err // field-level errors with their fixes, before anything starts
		}
		ctx := context.Background()
		return conn.withClient(ctx, func(c client.Client) error { return serve(ctx, c, ss, cmd.OutOrStdout()) })
	}
	return cmd
}

func serve(ctx context.Context, c client.Client, ss spec.ServiceSpec, stdout io.Writer) error {
	run, err := jobs.StartService(ctx, c, ss)
	var dup *jobs.DuplicateError
	if errors.As(err, &dup) {
		return idTaken(ctx, c, ss.ID)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "started service %s (run %s)\n", ss.ID, run.GetRunID())
	if !ss.Serves() {
		fmt.Fprintln(stdout, "  endpoint: none, capacity-only (no command)")
	} else if ep := awaitEndpoint(ctx, c, ss.ID, endpointWait); ep != "" {
		fmt.Fprintf(stdout, "  endpoint: http://%s\n", ep)
	} else {
		fmt.Fprintf(stdout, "  endpoint: not yet (a balancer reports it once the service runs): starter service-status %s\n", ss.ID)
	}
	fmt.Fprintf(stdout, "  watch: starter service-status %s --watch\n  load:  %s\n  stop:  starter stop-service %s\n",
		ss.ID, loadHint(ss.ID, ss.Serves()), ss.ID)
	return nil
}

// loadHint is the command that gives a service load: real requests where
// it serves, a reported number where it only holds capacity.
func loadHint(id string, serves bool) string {
	if serves {
		return "starter load " + id + " --qps N"
	}
	return "starter metrics " + id + " --qps N (capacity-only: no endpoint to send requests to)"
}

// endpointWait is how long `starter serve` waits for a balancer to
// report the service's endpoint before it says where to look.
const endpointWait = 10 * time.Second

// awaitEndpoint polls the service's status until its endpoint is known,
// for at most wait; "" when it is not by then.
func awaitEndpoint(ctx context.Context, c client.Client, id string, wait time.Duration) string {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		if st, err := jobs.ServiceStatus(ctx, c, id); err == nil && st.Endpoint != "" {
			return st.Endpoint
		}
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// idTaken explains a refused start. Unlike a job id, a service id can be
// used again once the service has ended, so the message says what holds it.
func idTaken(ctx context.Context, c client.Client, id string) error {
	w, err := jobs.Describe(ctx, c, id)
	switch {
	case err == nil && w.Type == workflows.InferenceServiceName:
		return fmt.Errorf("service %s is already running: stop it first (starter stop-service %s) or choose another id", id, id)
	case err == nil:
		return fmt.Errorf("id %s is taken by %s that is still running: choose another id", id, jobs.KindOf(w.Type))
	}
	return fmt.Errorf("id %s is taken by a workflow that is still running: choose another id", id)
}

// metricsFlags are what `starter metrics` reports, and how often.
type metricsFlags struct {
	metrics autoscale.Metrics // At is set as each report is sent
	every   time.Duration     // 0 sends one report
	span    time.Duration
}

// reports is how many reports cover span, one every interval.
func (f metricsFlags) reports() int {
	if f.every == 0 {
		return 1
	}
	return int((f.span + f.every - 1) / f.every)
}

// metricsCommand is `starter metrics`: the metrics signal, for load an
// external source observes (a balancer reports its own as traffic).
func metricsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "metrics ID --qps N [--every D --for D]",
		Short:   "report a service's load as the metrics signal (also --queue, --gpu-util, --replicas)",
		Example: "  starter metrics chat-13b --qps 40 --every 5s --for 2m",
		Args:    exactArgs(1, "give one service id: starter metrics ID --qps N"),
	}
	conn := addClientFlags(cmd)
	f := addMetricsFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := f.check(cmd.Flags()); err != nil {
			return err
		}
		// Ctrl-C ends a long run of reports cleanly.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		return conn.withClient(ctx, func(c client.Client) error { return sendMetrics(ctx, c, args[0], *f, cmd.OutOrStdout()) })
	}
	return cmd
}

// addMetricsFlags adds metrics' flags to fs.
func addMetricsFlags(fs *pflag.FlagSet) *metricsFlags {
	f := &metricsFlags{}
	fs.Float64Var(&f.metrics.QPS, "qps", 0, "requests per second arriving (required)")
	fs.Float64Var(&f.metrics.QueueLength, "queue", 0, "requests waiting for a replica")
	fs.Float64Var(&f.metrics.GPUUtilization, "gpu-util", 0, "ready replicas' mean GPU busy share, 0 to 1")
	fs.IntVar(&f.metrics.Replicas, "replicas", 0, "ready replicas the report covers (default: the service counts its ready ones)")
	fs.DurationVar(&f.every, "every", 0, "send a report this often, with --for (default: once)")
	fs.DurationVar(&f.span, "for", 0, "keep reporting this long, with --every")
	return f
}

// check rejects values and combinations metrics cannot send, naming the flag.
func (f metricsFlags) check(fs *pflag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(fl *pflag.Flag) { set[fl.Name] = true })
	m := f.metrics
	switch {
	case !set["qps"]:
		return &FlagError{"qps", "is required", "give the requests per second the service sees, e.g. --qps 12"}
	case m.QPS < 0:
		return &FlagError{"qps", "is negative", "give 0 or more requests per second"}
	case m.QueueLength < 0:
		return &FlagError{"queue", "is negative", "give 0 or more waiting requests"}
	case m.GPUUtilization < 0 || m.GPUUtilization > 1:
		return &FlagError{"gpu-util", fmt.Sprintf("%g is out of range", m.GPUUtilization), "give a share from 0 to 1, e.g. 0.8 for 80%"}
	case m.Replicas < 0:
		return &FlagError{"replicas", "is negative", "give 0 or more, or leave it out to let the service count its ready replicas"}
	case set["every"] != set["for"]:
		return &FlagError{"every", "and --for go together", "give both, e.g. --every 5s --for 2m, or neither to send one report"}
	case set["every"] && f.every <= 0:
		return &FlagError{"every", "must be positive", "give an interval such as 5s"}
	case set["for"] && f.span < f.every:
		return &FlagError{"for", fmt.Sprintf("%s is shorter than --every %s", f.span, f.every), "report for at least one interval, e.g. --for 2m"}
	}
	return nil
}

func sendMetrics(ctx context.Context, c client.Client, id string, f metricsFlags, stdout io.Writer) error {
	w, err := jobs.RequireType(ctx, c, id, workflows.InferenceServiceName, "only services take load reports")
	if err != nil {
		return err
	}
	if !w.Running {
		return fmt.Errorf("service %s has ended: start it again with starter serve FILE", id)
	}
	n := f.reports()
	var tick <-chan time.Time
	if n > 1 {
		t := time.NewTicker(f.every)
		defer t.Stop()
		tick = t.C
	}
	for i := 1; i <= n; i++ {
		m := f.metrics
		m.At = time.Now()
		err := jobs.ReportLoad(ctx, c, id, m)
		var ended *jobs.EndedError
		if errors.As(err, &ended) && ended.Ending.Succeeded() {
			fmt.Fprintf(stdout, "service %s stopped after %d of %d reports: there is no more load to report\n", id, i-1, n)
			return nil
		}
		if err != nil {
			return fmt.Errorf("report %d of %d to %s: %w", i, n, id, err)
		}
		fmt.Fprintln(stdout, metricsLine(id, m, i, n))
		if i == n {
			break
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(stdout, "stopped after %d of %d reports\n", i, n)
			return nil
		case <-tick:
		}
	}
	return nil
}

// metricsLine is one report as metrics prints it.
func metricsLine(id string, m autoscale.Metrics, i, n int) string {
	replicas := "the ready replicas"
	if m.Replicas > 0 {
		replicas = fmt.Sprintf("%d replicas", m.Replicas)
	}
	return fmt.Sprintf("%s %s <- %g qps, queue %g, gpu %.0f%% over %s (report %d of %d)",
		m.At.Format(time.TimeOnly), id, m.QPS, m.QueueLength, 100*m.GPUUtilization, replicas, i, n)
}

func serviceStatusCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "service-status ID [--json] [--watch]",
		Short:   "show a service's replicas, decisions and cost",
		Example: "  starter service-status chat-13b --watch",
		Args:    exactArgs(1, "give one service id: starter service-status ID"),
	}
	conn := addClientFlags(cmd)
	asJSON := cmd.Flags().Bool("json", false, "print the status query's answer as JSON")
	watch := cmd.Flags().Bool("watch", false, "refresh every 2s until the service ends")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := context.Background()
		return conn.withClient(ctx, func(c client.Client) error {
			return serviceStatus(ctx, c, args[0], *watch, *asJSON, cmd.OutOrStdout())
		})
	}
	return cmd
}

func serviceStatus(ctx context.Context, c client.Client, id string, watch, asJSON bool, stdout io.Writer) error {
	// The status query answers on both types with different shapes, so a
	// run would decode into an empty-looking service.
	if _, err := jobs.RequireType(ctx, c, id, workflows.InferenceServiceName, "for a training run use starter status "+id); err != nil {
		return err
	}
	if watch {
		return watchService(ctx, c, id, stdout, asJSON)
	}
	st, err := jobs.ServiceStatus(ctx, c, id)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	printServiceStatus(stdout, st)
	return nil
}

func watchService(ctx context.Context, c client.Client, id string, stdout io.Writer, asJSON bool) error {
	for {
		st, err := jobs.ServiceStatus(ctx, c, id)
		if err != nil {
			return err
		}
		if asJSON {
			b, _ := json.Marshal(st)
			fmt.Fprintln(stdout, string(b))
		} else {
			fmt.Fprintln(stdout, serviceLine(st, time.Now()))
		}
		if w, err := jobs.Describe(ctx, c, id); err == nil && !w.Running {
			return nil
		}
		time.Sleep(2 * time.Second)
	}
}

// serviceLine is one line of a watched service.
func serviceLine(st inference.Status, at time.Time) string {
	load := "no load yet"
	if m := st.LastMetrics; m != nil {
		load = fmt.Sprintf("%g qps", m.QPS)
	}
	return fmt.Sprintf("%s %-9s want %d+%d warm (%s)  ready %d starting %d warm %d  %s  $%.4f",
		at.Format(time.TimeOnly), st.State, st.Desired.Replicas, st.Desired.Warm, st.Desired.Reason,
		st.Ready, st.Starting, st.Warm, load, st.CostUSD)
}

// shownDecisions is how many of the newest decisions the summary lists.
const shownDecisions = 5

func printServiceStatus(w io.Writer, st inference.Status) {
	placement := "placement " + st.Placement
	if st.Placement == "" {
		placement = "tier " + st.Tier // a status from before services said
	}
	fmt.Fprintf(w, "service    %s (team %s, %s, priority %d)\n", st.ID, st.Team, placement, st.Priority)
	since := st.StartedAt
	if st.StoppedAt != nil {
		since = *st.StoppedAt // a stopped service has been stopped since then
	}
	fmt.Fprintf(w, "state      %s since %s\n", st.State, since.Format(time.RFC3339))
	fmt.Fprintf(w, "desired    %d replicas, %d warm (%s); bounds %d..%d\n",
		st.Desired.Replicas, st.Desired.Warm, st.Desired.Reason, st.MinReplicas, st.MaxReplicas)
	if m := st.Market; m != nil {
		fmt.Fprintf(w, "why        %s\n", m.Why)
	}
	switch {
	case st.Mode == inference.ModeCapacityOnly:
		fmt.Fprintln(w, "endpoint   none: capacity-only (no command), its replicas hold instances and serve nothing")
	case st.Endpoint != "":
		fmt.Fprintf(w, "endpoint   http://%s\n", st.Endpoint)
	case st.Mode == inference.ModeServing:
		fmt.Fprintln(w, "endpoint   not yet: no balancer has reported (every worker runs one, or `worker balancer`)")
	}
	if t := st.Traffic; t != nil {
		fmt.Fprintf(w, "traffic    %.1f req/s, %d in flight, %d queued, p50 %s p99 %s, %d errors, %.1f%% within the SLO\n",
			t.RPS, t.InFlight, t.Queued, latency(t.LatencyP50Seconds), latency(t.LatencyP99Seconds), t.Errors, 100*t.SLOShare)
	}
	fmt.Fprintf(w, "fleet      %d ready, %d starting, %d warm\n", st.Ready, st.Starting, st.Warm)
	if st.ReplicasLost > 0 {
		fmt.Fprintf(w, "lost       %d replicas whose instance the cloud took back, each replaced\n", st.ReplicasLost)
	}
	if m := st.LastMetrics; m != nil {
		stale := ""
		if strings.HasPrefix(st.Desired.Reason, "metrics stale") {
			stale = " (stale: the schedules and min_replicas decide until metrics come again)"
		}
		fmt.Fprintf(w, "load       %g qps, queue %g, gpu %.0f%% over %d replicas at %s%s\n",
			m.QPS, m.QueueLength, 100*m.GPUUtilization, m.Replicas, m.At.Format(time.TimeOnly), stale)
	} else {
		fmt.Fprintf(w, "load       none reported yet (%s)\n", loadHint(st.ID, st.Mode != inference.ModeCapacityOnly))
	}
	if f := st.Desired.Forecast; f != nil {
		fmt.Fprintf(w, "forecast   %s expects %.1f replicas' load at %s (margin %.1f)\n", f.Forecaster, f.Load, f.At.Format(time.TimeOnly), f.Margin)
		if f.Expected != nil {
			fmt.Fprintf(w, "           for %s it expected %.1f, and %.1f came\n", f.NowAt.Format(time.TimeOnly), *f.Expected, f.Now)
		}
	}
	fmt.Fprintf(w, "lead time  %s\n", time.Duration(st.LeadTimeSeconds*float64(time.Second)).Round(time.Second))
	fmt.Fprintf(w, "cost       $%.4f\n", st.CostUSD)
	if until := st.AcquiringHeldUntil; until != nil {
		fmt.Fprintf(w, "acquiring  held until %s after failures that retrying at once cannot cure\n", until.Format(time.TimeOnly))
	}
	if len(st.Replicas) == 0 {
		fmt.Fprintln(w, "replicas   none")
	} else {
		rows := [][]string{{"ID", "STATE", "LAYER", "MARKET", "ZONE", "INSTANCE", "$/H", "ENDPOINT"}}
		for _, r := range st.Replicas {
			row := []string{r.ID, string(r.State), orDash(string(r.Layer)), "-", "-", "-", "-", orDash(r.Endpoint)}
			if in := r.Instance; in != nil {
				row[3], row[4], row[5], row[6] = in.Market, in.Zone, in.ID, fmt.Sprintf("%.4f", in.PricePerHour)
			}
			rows = append(rows, row)
		}
		fmt.Fprintln(w, "replicas")
		writeTable(w, "  ", rows)
	}
	decisions := st.Decisions[max(0, len(st.Decisions)-shownDecisions):]
	for i, d := range decisions {
		label := map[bool]string{true: "decisions"}[i == 0]
		fmt.Fprintf(w, "%-10s %s %d replicas, %d warm: %s\n", label, d.Time.Format(time.TimeOnly), d.Replicas, d.Warm, d.Reason)
	}
	printFailures(w, st.Failures, st.StockOuts)
}

func stopServiceCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "stop-service ID",
		Short:   "stop a service, giving back every replica",
		Example: "  starter stop-service chat-13b",
		Args:    exactArgs(1, "give one service id: starter stop-service ID"),
	}
	conn := addClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, id := context.Background(), args[0]
		return conn.withClient(ctx, func(c client.Client) error {
			if err := jobs.StopService(ctx, c, id); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "stopping %s: it gives back every replica, then ends\n  watch: starter service-status %s --watch\n", id, id)
			return nil
		})
	}
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeTable aligns rows in columns, each line indented.
func writeTable(w io.Writer, indent string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, indent+strings.Join(r, "\t"))
	}
	tw.Flush()
}

// latency is a latency in seconds, to the millisecond.
func latency(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond)
}
