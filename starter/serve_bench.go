package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"refuel/pkg/balancer"
	"refuel/pkg/loadgen"
	"refuel/pkg/modelserver"
	"refuel/pkg/serving"
)

// serveBenchRow is one load run of the bench.
type serveBenchRow struct {
	Phase             string  `json:"phase"` // direct, balanced, or ramp
	Target            float64 `json:"target_rps"`
	Achieved          float64 `json:"achieved_rps"`
	Sent              int     `json:"sent"`
	Failed            int     `json:"failed"`
	LatencyP50Seconds float64 `json:"latency_p50_seconds"`
	LatencyP99Seconds float64 `json:"latency_p99_seconds"`
	// CPUMicros is the process' CPU time (load generator, balancer and
	// servers together) per request: unlike latency, it holds when other
	// work shares the cores.
	CPUMicros float64 `json:"cpu_us_per_request"`
}

// serveBenchResult is the bench's answer.
type serveBenchResult struct {
	Replicas        int             `json:"replicas"`
	Rows            []serveBenchRow `json:"rows"`
	AddedP50Seconds float64         `json:"added_p50_seconds"`
	AddedP99Seconds float64         `json:"added_p99_seconds"`
	SustainedRPS    float64         `json:"sustained_rps"` // highest ramp step with 0 errors
	// AddedCPUMicros is the CPU a request through the balancer costs
	// beyond one sent directly: the balancer's own work.
	AddedCPUMicros float64 `json:"added_cpu_us_per_request"`
}

// serveBenchCommand is `starter serve-bench` (make bench-serve): the
// balancer in front of demo model servers on loopback, against the same
// load sent straight to one of them.
func serveBenchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve-bench [--replicas N] [--qps N] [--for D] [--ramp R1,R2,...] [--json]",
		Short: "the balancer's added latency and the highest rate it sustains with 0 errors (make bench-serve)",
		Long: `The balancer in front of --replicas demo model servers (worker model-server's,
in this process, on loopback), against the same load sent straight to one
replica, side by side in one run: open-loop Poisson at --qps for --for each
way, then the latency the balancer adds (p50, p99). Then it ramps the rate
through the balancer, --for each step, and reports the highest step it
sustains with 0 errors and at least 95% of the rate achieved. Small
requests (max_tokens 1, tokens as fast as the server can).`,
		Example: "  starter serve-bench --replicas 3 --qps 1000 --for 5s\n  starter serve-bench --ramp 2000,5000,8000 --json",
		Args:    noArgs("serve-bench takes flags only"),
	}
	replicas := cmd.Flags().Int("replicas", 3, "demo model servers behind the balancer")
	qps := cmd.Flags().Float64("qps", 1000, "rate of the side-by-side runs")
	span := cmd.Flags().Duration("for", 5*time.Second, "length of each run and each ramp step")
	ramp := cmd.Flags().String("ramp", "1000,2000,3000,5000,6000,8000,10000", "rates of the ramp, requests a second, rising")
	asJSON := cmd.Flags().Bool("json", false, "print the result as JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		var steps []float64
		for _, s := range strings.Split(*ramp, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil || v <= 0 {
				return &FlagError{"ramp", fmt.Sprintf("%q is not a rate", s), "give rising requests per second, e.g. --ramp 1000,5000"}
			}
			steps = append(steps, v)
		}
		switch {
		case *replicas < 1:
			return &FlagError{"replicas", "must be 1 or more", "e.g. --replicas 3"}
		case *qps <= 0:
			return &FlagError{"qps", "must be positive", "e.g. --qps 1000"}
		case *span <= 0:
			return &FlagError{"for", "must be positive", "e.g. --for 5s"}
		}
		res, err := runServeBench(cmd.Context(), *replicas, *qps, *span, steps, cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		if *asJSON {
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(res)
		}
		printServeBench(cmd.OutOrStdout(), res)
		return nil
	}
	return cmd
}

// serveLoopback serves h on a loopback port until ctx ends.
func serveLoopback(ctx context.Context, h http.Handler) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	return l.Addr().String(), nil
}

func runServeBench(ctx context.Context, n int, qps float64, span time.Duration, steps []float64, progress io.Writer) (serveBenchResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := serveBenchResult{Replicas: n}
	var set []serving.Replica
	for i := range n {
		s := modelserver.New(modelserver.Config{Batch: 256, TokensPerSecond: 0})
		if _, err := s.Load(ctx); err != nil {
			return res, err
		}
		addr, err := serveLoopback(ctx, s.Handler())
		if err != nil {
			return res, err
		}
		set = append(set, serving.Replica{ID: fmt.Sprintf("r%d", i), State: serving.ReplicaReady, Endpoint: addr})
	}
	b := balancer.New("bench", nil, nil)
	b.Update(set, serving.Settings{MaxConcurrency: 256, QueueTimeoutSeconds: 5})
	front, err := serveLoopback(ctx, b)
	if err != nil {
		return res, err
	}
	body := []byte(`{"prompt":"hi","max_tokens":1}`)
	client := loadgen.NewClient(5 * time.Second)
	run := func(phase, addr string, rate float64, seed uint64) serveBenchRow {
		fmt.Fprintf(progress, "serve-bench: %s at %g req/s for %s\n", phase, rate, span)
		cpu := cpuTime()
		s := loadgen.Run(ctx, loadgen.Config{URL: "http://" + addr + "/v1/completions", Arrivals: loadgen.Poisson(rate, span, body, seed), Client: client})
		row := serveBenchRow{Phase: phase, Target: rate, Achieved: s.Rate(), Sent: s.Sent, Failed: s.Failed,
			LatencyP50Seconds: s.P50.Seconds(), LatencyP99Seconds: s.P99.Seconds()}
		if s.Sent > 0 {
			row.CPUMicros = float64(cpuTime()-cpu) / float64(time.Microsecond) / float64(s.Sent)
		}
		return row
	}
	// Warm both paths' connections first, then side by side.
	run("warm-up", set[0].Endpoint, qps/2, 9)
	run("warm-up", front, qps/2, 9)
	direct := run("direct", set[0].Endpoint, qps, 1)
	balanced := run("balanced", front, qps, 1)
	res.Rows = append(res.Rows, direct, balanced)
	res.AddedP50Seconds = balanced.LatencyP50Seconds - direct.LatencyP50Seconds
	res.AddedP99Seconds = balanced.LatencyP99Seconds - direct.LatencyP99Seconds
	res.AddedCPUMicros = balanced.CPUMicros - direct.CPUMicros
	for i, rate := range steps {
		row := run("ramp", front, rate, uint64(10+i))
		res.Rows = append(res.Rows, row)
		if row.Failed > 0 || row.Achieved < 0.95*rate || ctx.Err() != nil {
			break
		}
		res.SustainedRPS = rate
	}
	return res, nil
}

func printServeBench(w io.Writer, r serveBenchResult) {
	fmt.Fprintf(w, "balancer in front of %d demo model servers (loopback), against one replica directly\n\n", r.Replicas)
	fmt.Fprintf(w, "%-9s %10s %10s %8s %7s %10s %10s %9s\n", "phase", "target/s", "achieved/s", "sent", "failed", "p50", "p99", "cpu/req")
	for _, row := range r.Rows {
		fmt.Fprintf(w, "%-9s %10.0f %10.0f %8d %7d %10s %10s %7.0fµs\n", row.Phase, row.Target, row.Achieved, row.Sent, row.Failed,
			seconds(row.LatencyP50Seconds), seconds(row.LatencyP99Seconds), row.CPUMicros)
	}
	fmt.Fprintf(w, "\nadded by the balancer: p50 %s, p99 %s (target at most 1ms and 5ms)\n", seconds(r.AddedP50Seconds), seconds(r.AddedP99Seconds))
	fmt.Fprintf(w, "sustained with 0 errors: %.0f requests/s (target at least 5000)\n", r.SustainedRPS)
	fmt.Fprintf(w, "CPU the balancer adds per request: %.0fµs (a core's worth is %.0f requests/s of balancing alone)\n", r.AddedCPUMicros, 1e6/max(r.AddedCPUMicros, 1))
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Microsecond).String()
}
