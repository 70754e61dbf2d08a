package modelserver

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// PortEnv names the variable a replica's server finds its port in.
const PortEnv = "REFUEL_PORT"

// Main is `worker model-server`: it serves on $REFUEL_PORT (or --port)
// until SIGTERM or SIGINT, then lets requests in flight finish. It
// returns the exit code: 0, 1 when it cannot load or serve, 2 for bad
// flags.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("model-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	port := fs.String("port", os.Getenv(PortEnv), "port to serve on, all interfaces (env "+PortEnv+")")
	host := fs.String("host", "", "address to serve on (default all interfaces)")
	fs.StringVar(&cfg.Weights, "weights", "", "weights file, read whole at start: load time grows with its size")
	fs.DurationVar(&cfg.LoadDelay, "load-delay", 0, "time added to the weights' load, as a bigger model would take")
	fs.Float64Var(&cfg.TokensPerSecond, "tokens-per-second", 50, "pace of each request's tokens; 0 as fast as it can")
	fs.IntVar(&cfg.Batch, "batch", 8, "requests generated at once; more wait their turn")
	fs.IntVar(&cfg.MaxTokens, "max-tokens", 16, "tokens of a request that gives no max_tokens")
	fs.StringVar(&cfg.Model, "model", "refuel-demo", "model name the answers carry")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	switch {
	case *port == "":
		fmt.Fprintf(stderr, "model-server: no port: set %s or give --port\n", PortEnv)
		return 2
	case cfg.Batch <= 0:
		fmt.Fprintln(stderr, "model-server: --batch must be 1 or more")
		return 2
	case cfg.TokensPerSecond < 0 || cfg.LoadDelay < 0 || cfg.MaxTokens < 0:
		fmt.Fprintln(stderr, "model-server: --tokens-per-second, --load-delay and --max-tokens are 0 or more")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	l, err := net.Listen("tcp", net.JoinHostPort(*host, *port))
	if err != nil {
		fmt.Fprintln(stderr, "model-server:", err)
		return 1
	}
	s := New(cfg)
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	fmt.Fprintf(stdout, "model-server: serving on %s, loading weights %q\n", l.Addr(), cfg.Weights)
	loaded, err := s.Load(ctx)
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(stderr, "model-server: cannot load:", err)
		_ = srv.Close()
		return 1
	}
	if err == nil {
		fmt.Fprintf(stdout, "model-server: ready: %d bytes of weights (sha256 %.12s) loaded in %s\n", loaded.Bytes, loaded.SHA256, loaded.Took.Round(time.Millisecond))
	}
	select {
	case err := <-served:
		fmt.Fprintln(stderr, "model-server:", err)
		return 1
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = srv.Shutdown(shut)
	fmt.Fprintln(stdout, "model-server: stopped")
	return 0
}
