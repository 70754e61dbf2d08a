package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"refuel/jobs"
	"refuel/pkg/devenv"
)

func devConnectCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "connect ID [--local-port P]",
		Short: "print an environment's endpoint, or forward a local port to it",
		Long: `Print where an environment's command listens (host:port), or with
--local-port forward 127.0.0.1:P to it until Ctrl-C. The forward asks for
the endpoint again for every new connection, so it follows the environment
when it moves to other capacity.`,
		Example: "  starter dev connect scratch\n" +
			"  starter dev connect ana-notebook --local-port 8888   # then open http://127.0.0.1:8888\n" +
			"  starter dev connect ana-shell --local-port 2222 &    # then ssh -p 2222 localhost",
		Args: exactArgs(1, "give one environment id: starter dev connect ID [--local-port P]"),
	}
	conn := addClientFlags(cmd)
	port := cmd.Flags().Int("local-port", 0, "forward this port on 127.0.0.1 to the environment's endpoint")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if *port < 0 || *port > 65535 {
			return &FlagError{"local-port", fmt.Sprintf("%d is not a port", *port), "give a port from 1 to 65535, such as 8888"}
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		return conn.withClient(ctx, func(c client.Client) error {
			return devConnect(ctx, c, args[0], *port, cmd.OutOrStdout(), cmd.ErrOrStderr())
		})
	}
	return cmd
}

// devConnect prints the environment's endpoint, or forwards localPort to
// it until ctx ends.
func devConnect(ctx context.Context, c client.Client, id string, localPort int, stdout, stderr io.Writer) error {
	resolve := func(ctx context.Context) (string, error) {
		st, err := jobs.DevStatus(ctx, c, id)
		if err != nil {
			return "", err
		}
		return endpointOf(st)
	}
	endpoint, err := resolve(ctx)
	if err != nil {
		return err
	}
	if localPort == 0 {
		fmt.Fprintln(stdout, endpoint)
		return nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(localPort)))
	if err != nil {
		return &FlagError{"local-port", err.Error(), "choose a port nothing else on this machine listens on"}
	}
	fmt.Fprintf(stderr, "forwarding %s to %s's endpoint %s; Ctrl-C stops\n", l.Addr(), id, endpoint)
	return forward(ctx, l, resolve, stderr)
}

// endpointOf is where a running environment listens, or an error that
// says what to do about one that does not.
func endpointOf(st devenv.Status) (string, error) {
	if st.State == devenv.StateRunning && st.Endpoint != "" {
		return st.Endpoint, nil
	}
	return "", errors.New(devStateHint(st))
}

// dialTimeout bounds reaching the endpoint for one forwarded connection.
const dialTimeout = 10 * time.Second

// forward accepts connections on l until ctx ends, and joins each to the
// endpoint resolve names at that moment; a connection resolve has no
// endpoint for is closed, saying why on log.
func forward(ctx context.Context, l net.Listener, resolve func(context.Context) (string, error), log io.Writer) error {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	var logMu sync.Mutex
	say := func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		fmt.Fprintf(log, format+"\n", args...)
	}
	for {
		in, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer in.Close()
			endpoint, err := resolve(ctx)
			if err != nil {
				say("connection from %s closed: %v", in.RemoteAddr(), err)
				return
			}
			d := net.Dialer{Timeout: dialTimeout}
			out, err := d.DialContext(ctx, "tcp", endpoint)
			if err != nil {
				say("connection from %s closed: %v", in.RemoteAddr(), err)
				return
			}
			defer out.Close()
			stopJoin := context.AfterFunc(ctx, func() { in.Close(); out.Close() })
			defer stopJoin()
			join(in, out)
		}()
	}
}

// join copies both ways until both sides are done, passing each side's
// end of writing on to the other.
func join(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	go pipe(a, b)
	go pipe(b, a)
	wg.Wait()
}
