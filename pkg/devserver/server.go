// Package devserver runs a complete Temporal service (frontend, history,
// matching, worker) and its Web UI inside the refuel process, persisted in
// SQLite, so a laptop needs no separate cluster; or on PostgreSQL, the shape
// of a production cluster (`worker temporal-server`). It is the one package
// under pkg/ that imports Temporal: it embeds the server rather than
// talking to it.
package devserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"refuel/internal/cluster"

	uiserver "github.com/temporalio/ui-server/v2/server"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/temporal"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Options configures Start. Zero values mean the defaults listed; the
// worker binary passes the contract's addresses (docs/contracts.md) explicitly.
type Options struct {
	// DataDir holds the SQLite file DataDir/temporal.db so runs survive a
	// restart of the process. "" keeps everything in memory, for tests: each
	// Start then gets a database of its own.
	DataDir string
	// Postgres, when set, keeps everything in PostgreSQL instead of SQLite:
	// a URL postgres://USER[:PASSWORD]@HOST:PORT/DATABASE[?PARAM=VALUE…]
	// (DATABASE default "temporal"; the parameters go to the driver, such as
	// sslmode=disable). Executions go to DATABASE and visibility records to
	// DATABASE_visibility; both are created, with their schema, when
	// missing. DataDir then holds no database.
	Postgres string
	// FrontendAddr is where SDK clients and the CLI connect. Default
	// "127.0.0.1:7233"; port 0 picks a free one (tests).
	FrontendAddr string
	// UIAddr is where the Web UI listens. "" runs no UI; port 0 picks a free
	// one (tests).
	UIAddr string
	// Namespace is created if missing. Default "default".
	Namespace string
	// SearchAttributes are registered in Namespace, on a new database and on
	// an old one that lacks some of them, so operators can filter by them.
	SearchAttributes map[string]enums.IndexedValueType
	// Logger receives the server's own logs. Default: discard.
	Logger *zap.Logger
	// LogLevel is the least severe server log that reaches Logger: "debug",
	// "info", "warn" or "error". Default "warn", because the server is chatty
	// at info and a user of the dev stack only needs its problems.
	LogLevel string
	// TLS serves the frontend and the Web UI over TLS, and with a client
	// CA requires client certificates. Zero serves plaintext.
	TLS TLS
	// APIKeys, when any, are the keys the frontend accepts: every request
	// must carry one as its bearer token, the standard client API key.
	APIKeys []string
	// Client are the TEMPORAL_TLS_* settings and API key of refuel's own
	// clients, which the Web UI connects with too. Start refuses settings
	// that the guarded frontend would refuse.
	Client Client
	// UICodec is the remote codec server the Web UI decodes payloads
	// with, so encrypted runs stay readable there.
	UICodec UICodec
	// OnRequest, when set, is told the gRPC method of every request the
	// public frontend serves, before it is handled: what clients cost the
	// server. It must be quick and safe for concurrent use.
	OnRequest func(method string)
}

// Defaults of Options, exported so flags can show them.
const (
	DefaultFrontendAddr = "127.0.0.1:7233"
	DefaultNamespace    = "default"
)

// ErrAddrInUse is wrapped by Start's error when the frontend or UI address is
// already taken, so a caller can name the flag that moves it.
var ErrAddrInUse = errors.New("address in use")

// Server is a running embedded Temporal service and, optionally, its Web UI.
type Server struct {
	temporal     temporal.Server
	ui           *uiserver.Server
	uiDone       chan struct{}
	frontendAddr string
	// adminAddr is where the server itself is reached unguarded: the
	// internal frontend when the public one is guarded, else the public.
	adminAddr string
	uiURL     string
	namespace string
	// settling is true while the server starts or stops; see newServerLogger.
	settling *atomic.Bool

	stopOnce sync.Once
	stopErr  error
}

// startMu serialises the part of Start between choosing free ports and
// binding them, so two servers started at once in one process (parallel
// tests) never pick the same port.
var startMu sync.Mutex

// Start runs the server and returns once the frontend answers for the
// namespace and the search attributes are registered. ctx bounds the wait,
// not the server's lifetime: call Stop for that.
func Start(ctx context.Context, o Options) (*Server, error) {
	o, level, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	s, err := launch(ctx, o, level, pickPorts)
	if err != nil {
		return nil, err
	}
	if err := s.awaitReady(ctx, o.SearchAttributes); err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	s.settling.Store(false)
	return s, nil
}

// bindAttempts is how many times launch picks ports and starts the server
// when a port picked free is taken before the server binds it.
const bindAttempts = 3

// launch prepares the database, binds every port and starts the services,
// on ports pick chooses, again on other ports when one was taken in
// between (a server built halfway leaves a few listeners open then). It
// holds startMu from choosing ports until they are bound, and checks the
// addresses first so that a taken port fails fast.
func launch(ctx context.Context, o Options, level zapcore.Level, pick func(frontend string) (ports, error)) (*Server, error) {
	startMu.Lock()
	defer startMu.Unlock()
	for attempt := 1; ; attempt++ {
		s, err := launchOn(ctx, o, level, pick)
		if attempt < bindAttempts && errors.Is(err, syscall.EADDRINUSE) {
			o.Logger.Warn("a port picked for the server was taken before it bound it; picking others", zap.Error(err))
			continue
		}
		return s, err
	}
}

// launchOn is one start of launch's, on the ports pick chooses now.
func launchOn(ctx context.Context, o Options, level zapcore.Level, pick func(frontend string) (ports, error)) (*Server, error) {
	p, err := pick(o.FrontendAddr)
	if err != nil {
		return nil, err
	}
	// The Web UI's port is held while the server starts (seconds), and
	// let go just before the UI binds it: the UI server exits the process
	// when it cannot listen, so no other server, in this process or
	// another, may take the port in between.
	var ui string
	var uiHeld net.Listener
	if o.UIAddr != "" {
		if ui, uiHeld, err = holdAddr("Web UI", o.UIAddr); err != nil {
			return nil, err
		}
		defer uiHeld.Close()
	}
	db, err := openDatabase(o)
	if err != nil {
		return nil, err
	}

	settling := new(atomic.Bool)
	settling.Store(true)
	logger := newServerLogger(o.Logger, level, settling)
	sec := security{tls: o.TLS, apiKeys: o.APIKeys}
	ts, err := newTemporal(append(serverOptions(p, db, logger, sec), counting(o.OnRequest)...))
	if err != nil {
		return nil, fmt.Errorf("devserver: configure temporal: %w", err)
	}
	if err := ts.Start(); err != nil {
		// Stopped, so that a start tried again does not leave it running.
		return nil, errors.Join(fmt.Errorf("devserver: start temporal: %w", err), ts.Stop())
	}
	s := &Server{temporal: ts, frontendAddr: p.frontend, namespace: o.Namespace, settling: settling, adminAddr: dialable(p.frontend)}
	if sec.enabled() {
		s.adminAddr = hostPort(p.internalFrontend)
	}

	if ui != "" {
		if err := uiHeld.Close(); err != nil {
			return nil, errors.Join(fmt.Errorf("devserver: let go of the Web UI's port: %w", err), s.Stop())
		}
		if err := s.startUI(ctx, ui, o); err != nil {
			return nil, errors.Join(err, s.Stop())
		}
	}
	return s, nil
}

// newTemporal builds the server, which binds its ports as it is built. A
// gRPC port it cannot bind it reports through the logger's Fatal, which
// panics (serverLogger); that panic becomes the error here, so launch can
// try other ports.
func newTemporal(opts []temporal.ServerOption) (ts temporal.Server, err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if f, ok := r.(fatal); ok && errors.Is(f, syscall.EADDRINUSE) {
			err = f
			return
		}
		panic(r)
	}()
	return temporal.NewServer(opts...)
}

// awaitReady waits for the frontend to serve the namespace, then makes sure
// the search attributes exist (an older database may lack new ones). A
// guarded frontend is waited for through the internal one, which starts
// with it, reads the same database and needs no credentials on loopback.
func (s *Server) awaitReady(ctx context.Context, attrs map[string]enums.IndexedValueType) error {
	conn, err := grpc.NewClient(s.adminAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("devserver: connect to frontend: %w", err)
	}
	defer conn.Close()

	if err := waitForNamespace(ctx, conn, s.namespace); err != nil {
		return err
	}
	if len(attrs) == 0 {
		return nil
	}
	if err := cluster.EnsureSearchAttributes(ctx, operatorservice.NewOperatorServiceClient(conn), s.namespace, attrs); err != nil {
		return fmt.Errorf("devserver: %w", err)
	}
	return nil
}

// FrontendAddr is the host:port actually bound, which differs from
// Options.FrontendAddr when that asked for port 0.
func (s *Server) FrontendAddr() string { return s.frontendAddr }

// UIURL is the Web UI's address for a browser, or "" when it is not running.
func (s *Server) UIURL() string { return s.uiURL }

// Namespace is the namespace the server was started for.
func (s *Server) Namespace() string { return s.namespace }

// Stop shuts down the UI and the server and releases their ports. It is safe
// to call more than once; later calls return the first call's result.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.settling.Store(true)
		if s.ui != nil {
			s.ui.Stop()
			<-s.uiDone
		}
		if err := s.temporal.Stop(); err != nil {
			s.stopErr = fmt.Errorf("devserver: stop temporal: %w", err)
		}
	})
	return s.stopErr
}

func (o Options) withDefaults() (Options, zapcore.Level, error) {
	if o.FrontendAddr == "" {
		o.FrontendAddr = DefaultFrontendAddr
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if err := o.TLS.Validate(); err != nil {
		return o, 0, err
	}
	if err := o.checkClient(o.Client); err != nil {
		return o, 0, err
	}
	level := zapcore.WarnLevel
	if o.LogLevel != "" {
		var err error
		if level, err = zapcore.ParseLevel(o.LogLevel); err != nil {
			return o, level, fmt.Errorf("devserver: log level: %w", err)
		}
	}
	return o, level, nil
}

// waitForNamespace polls DescribeNamespace until the frontend answers it. The
// gRPC port accepts connections before the namespace registry is loaded, so
// a successful answer, not an open port, is what "ready" means.
func waitForNamespace(ctx context.Context, conn *grpc.ClientConn, namespace string) error {
	client := workflowservice.NewWorkflowServiceClient(conn)
	var lastErr error
	for {
		callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := client.DescribeNamespace(callCtx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
		cancel()
		if err == nil {
			return nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("devserver: frontend %s did not become ready: %w (last error: %v)", conn.Target(), ctx.Err(), lastErr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// dialable turns a bind address into one a client can connect to: a server
// bound to all interfaces is reached through loopback.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = loopback
	}
	return net.JoinHostPort(host, port)
}
