package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"refuel/jobs"
	"refuel/pkg/loadgen"
	"refuel/pkg/serving"
	"refuel/pkg/traffic"
	"refuel/workflows"
)

// loadFlags are `starter load`'s: the arrivals and where they go.
type loadFlags struct {
	qps       float64
	span      time.Duration
	path      string
	body      string
	trace     string
	speed     float64
	maxTokens int
	every     time.Duration
	slo       time.Duration
	timeout   time.Duration
	endpoint  string
	asJSON    bool
	seed      uint64
}

// loadSummary is load's --json: the whole run.
type loadSummary struct {
	Endpoint          string  `json:"endpoint"`
	Sent              int     `json:"sent"`
	OK                int     `json:"ok"`
	Failed            int     `json:"failed"`
	LatencyP50Seconds float64 `json:"latency_p50_seconds"`
	LatencyP99Seconds float64 `json:"latency_p99_seconds"`
	RPS               float64 `json:"rps"`
	SLOShare          float64 `json:"slo_share"`
	DurationSeconds   float64 `json:"duration_seconds"`
}

// loadCommand is `starter load`: real HTTP requests to a service's
// endpoint, open loop.
func loadCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "load ID (--qps N [--for D] | --trace FILE [--speed X])",
		Short: "send HTTP requests to a service's endpoint and measure them (Poisson at --qps, or a trace)",
		Long: `Send real HTTP requests to the service's endpoint (status.endpoint, its
balancer), open loop: each leaves at its arrival time whatever the answers
do. --qps sends Poisson arrivals at that mean rate for --for (default 1m);
--trace replays the arrivals of an Azure-format LLM trace (TIMESTAMP,
ContextTokens, GeneratedTokens) at --speed, each a completion request with
the trace's tokens. Every --every it prints the achieved rate, latency p50
and p99, errors and the share answered within the SLO (the service's
slo.latency, or --slo); at the end or on Ctrl-C, the summary.`,
		Example: "  starter load chat-13b --qps 40 --for 2m\n  starter load chat-13b --trace ../shared/traces/inference/AzureLLMInferenceTrace_conv.csv --speed 2 --json",
		Args:    exactArgs(1, "give one service id: starter load ID --qps N"),
	}
	conn := addClientFlags(cmd)
	f := addLoadFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := f.check(cmd.Flags()); err != nil {
			return err
		}
		var arrivals loadgen.Arrivals
		if f.trace != "" {
			tr, err := traffic.ReadAzureCSV(f.trace)
			if err != nil {
				return &FlagError{"trace", err.Error(), "give an Azure-format trace (columns TIMESTAMP, ContextTokens, GeneratedTokens)"}
			}
			span := time.Duration(0)
			if cmd.Flags().Changed("for") {
				span = f.span
			}
			arrivals = loadgen.Trace(tr, f.speed, span, f.maxTokens)
		} else {
			arrivals = loadgen.Poisson(f.qps, f.span, []byte(f.body), f.seed)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		endpoint, slo := f.endpoint, f.slo
		if endpoint == "" || !cmd.Flags().Changed("slo") {
			err := conn.withClient(ctx, func(c client.Client) error {
				ep, s, err := serviceEndpoint(ctx, c, args[0])
				if endpoint == "" {
					endpoint = ep
				}
				if !cmd.Flags().Changed("slo") {
					slo = s
				}
				return err
			})
			if err != nil && endpoint == "" {
				return err
			}
		}
		return runLoad(ctx, args[0], endpoint, slo, arrivals, *f, cmd.OutOrStdout())
	}
	return cmd
}

func addLoadFlags(fs *pflag.FlagSet) *loadFlags {
	f := &loadFlags{}
	fs.Float64Var(&f.qps, "qps", 0, "mean requests per second, Poisson arrivals (or --trace)")
	fs.DurationVar(&f.span, "for", time.Minute, "how long to send (with --trace: at most this long)")
	fs.StringVar(&f.path, "path", "/v1/completions", "path the requests are POSTed to")
	fs.StringVar(&f.body, "body", string(loadgen.SmallBody), "JSON body of each request with --qps")
	fs.StringVar(&f.trace, "trace", "", "replay this Azure-format LLM trace's arrivals instead of --qps")
	fs.Float64Var(&f.speed, "speed", 1, "with --trace, replay this many times faster")
	fs.IntVar(&f.maxTokens, "max-tokens", 256, "with --trace, cap each request's prompt words and max_tokens; 0 for none")
	fs.DurationVar(&f.every, "every", 5*time.Second, "print the latest interval this often; 0 for the summary only")
	fs.DurationVar(&f.slo, "slo", 0, "latency a request must be answered within to count as met (default the service's slo.latency)")
	fs.DurationVar(&f.timeout, "timeout", time.Minute, "give up on a request after this long (it counts as failed)")
	fs.StringVar(&f.endpoint, "endpoint", "", "send to this host:port instead of the service's status.endpoint")
	fs.BoolVar(&f.asJSON, "json", false, "print the summary as one JSON object: sent, ok, failed, latency_p50_seconds, latency_p99_seconds, rps, slo_share")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the Poisson arrivals")
	return f
}

func (f loadFlags) check(fs *pflag.FlagSet) error {
	set := func(name string) bool { return fs.Changed(name) }
	switch {
	case !set("qps") && f.trace == "":
		return &FlagError{"qps", "is required (or --trace FILE)", "give the mean requests per second, e.g. --qps 20, or a trace to replay"}
	case set("qps") && f.trace != "":
		return &FlagError{"qps", "and --trace are exclusive", "give one: Poisson arrivals at --qps, or a trace's arrivals"}
	case f.qps < 0:
		return &FlagError{"qps", "is negative", "give requests per second above 0"}
	case set("qps") && f.qps == 0:
		return &FlagError{"qps", "is 0", "give requests per second above 0"}
	case f.span <= 0:
		return &FlagError{"for", "must be positive", "give a duration such as 2m"}
	case f.speed <= 0:
		return &FlagError{"speed", "must be positive", "give a factor such as 1 (real time) or 10"}
	case f.every < 0 || f.slo < 0 || f.timeout <= 0 || f.maxTokens < 0:
		return &FlagError{"every", "--slo, --timeout and --max-tokens cannot be negative (and --timeout not 0)", "e.g. --every 5s --slo 2s --timeout 1m"}
	case !strings.HasPrefix(f.path, "/"):
		return &FlagError{"path", fmt.Sprintf("%q does not start with /", f.path), "give a path such as /v1/completions"}
	case !json.Valid([]byte(f.body)):
		return &FlagError{"body", "is not JSON", `give a JSON body, e.g. '{"prompt":"hi","max_tokens":4}'`}
	}
	return nil
}

// serviceEndpoint reads a service's status.endpoint and its SLO.
func serviceEndpoint(ctx context.Context, c client.Client, id string) (string, time.Duration, error) {
	w, err := jobs.RequireType(ctx, c, id, workflows.InferenceServiceName, "only services take requests")
	if err != nil {
		return "", 0, err
	}
	if !w.Running {
		return "", 0, fmt.Errorf("service %s has ended: start it again with starter serve FILE", id)
	}
	v, err := c.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
	if err != nil {
		return "", 0, fmt.Errorf("status of %s: %w", id, err)
	}
	var st struct {
		Endpoint string            `json:"endpoint"`
		Serving  *serving.Settings `json:"serving"`
	}
	if err := v.Get(&st); err != nil {
		return "", 0, fmt.Errorf("status of %s: %w", id, err)
	}
	var slo time.Duration
	if st.Serving != nil {
		slo = time.Duration(st.Serving.SLOLatencySeconds * float64(time.Second))
	}
	if st.Endpoint == "" {
		if st.Serving == nil {
			return "", slo, fmt.Errorf("service %s has no endpoint: its spec has no command, so no replica serves requests (capacity only); use starter metrics %s --qps N to report load", id, id)
		}
		return "", slo, fmt.Errorf("service %s has no endpoint yet: no balancer has reported it (is a worker running, or worker balancer?); try again in a few seconds", id)
	}
	return st.Endpoint, slo, nil
}

// runLoad sends the load and prints each interval and the summary.
func runLoad(ctx context.Context, id, endpoint string, slo time.Duration, arrivals loadgen.Arrivals, f loadFlags, stdout io.Writer) error {
	url := "http://" + endpoint + f.path
	if !f.asJSON {
		sloText := "every answer"
		if slo > 0 {
			sloText = "answers within " + slo.String()
		}
		fmt.Fprintf(stdout, "load on %s at %s (SLO: %s); Ctrl-C for the summary\n", id, url, sloText)
	}
	cfg := loadgen.Config{URL: url, Arrivals: arrivals, SLO: slo, Timeout: f.timeout}
	if !f.asJSON && f.every > 0 {
		cfg.Every = f.every
		cfg.OnInterval = func(s loadgen.Stats) {
			fmt.Fprintf(stdout, "%s %s\n", time.Now().Format(time.TimeOnly), statsLine(s))
		}
	}
	s := loadgen.Run(ctx, cfg)
	sum := loadSummary{Endpoint: endpoint, Sent: s.Sent, OK: s.OK, Failed: s.Failed,
		LatencyP50Seconds: s.P50.Seconds(), LatencyP99Seconds: s.P99.Seconds(),
		RPS: s.Rate(), SLOShare: s.SLOShare(), DurationSeconds: s.Span.Seconds()}
	if f.asJSON {
		return json.NewEncoder(stdout).Encode(sum)
	}
	fmt.Fprintf(stdout, "summary: %d sent in %s; %s\n", s.Sent, s.Span.Round(time.Millisecond), statsLine(s))
	return nil
}

// statsLine is one interval's, or the run's, figures.
func statsLine(s loadgen.Stats) string {
	return fmt.Sprintf("%.1f req/s, p50 %s, p99 %s, ok %d, errors %d, within SLO %.1f%%",
		s.Rate(), s.P50.Round(10*time.Microsecond), s.P99.Round(10*time.Microsecond), s.OK, s.Failed, 100*s.SLOShare())
}
