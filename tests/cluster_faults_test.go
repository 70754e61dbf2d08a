package tests

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// The fault injectors of a production-shaped cluster: a PostgreSQL server
// of the test's own that can be stopped and started again, and the
// Temporal server as a process of its own on it (`worker
// temporal-server`), which can be SIGKILLed and started again.

// postgresServer is a PostgreSQL cluster in a directory of the test's,
// served on a loopback port. PostgreSQL refuses to run as root, so a test
// run by root runs it as the postgres (or nobody) user.
type postgresServer struct {
	t    *testing.T
	bin  string // the directory of initdb, postgres and pg_isready
	dir  string
	port int
	cred *syscall.Credential // nil: as the test's own user
	proc *process
}

// postgresBinDir finds PostgreSQL's server programs: Debian keeps them
// out of PATH, under /usr/lib/postgresql/VERSION/bin.
func postgresBinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(b) - versionOf(a) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	initdb, err := exec.LookPath("initdb")
	if err != nil {
		return "", fmt.Errorf("no initdb in /usr/lib/postgresql/*/bin or on PATH: install Debian's postgresql (make postgresql)")
	}
	return filepath.Dir(initdb), nil
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// postgresCredential is who runs PostgreSQL: the test's user, or when
// that is root the postgres user (or nobody).
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, fmt.Errorf("running as root, and neither a postgres nor a nobody user to run PostgreSQL as")
}

// startPostgres initialises a cluster and starts it; the test is skipped,
// saying why, where PostgreSQL is not installed or cannot run. Stopped
// when the test ends.
func startPostgres(t *testing.T) *postgresServer {
	t.Helper()
	bin, err := postgresBinDir()
	if err != nil {
		t.Skipf("PostgreSQL is not available: %v", err)
	}
	cred, err := postgresCredential()
	if err != nil {
		t.Skipf("PostgreSQL cannot run here: %v", err)
	}
	// Not t.TempDir(): the cluster's user must reach it, and a root test's
	// temporary directories are root's alone.
	dir, err := os.MkdirTemp("", "refuel-postgres-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Skipf("PostgreSQL cannot run here: give its data directory to uid %d: %v", cred.Uid, err)
		}
	}
	pg := &postgresServer{t: t, bin: bin, dir: dir, cred: cred}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "refuel", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Skipf("PostgreSQL cannot run here: initdb: %v\n%s", err, tail(string(out), 20))
	}
	_, port, _ := net.SplitHostPort(freeAddr(t))
	pg.port, _ = strconv.Atoi(port)
	pg.start()
	return pg
}

// URL is where the Temporal server finds the cluster's database.
func (pg *postgresServer) URL() string {
	return fmt.Sprintf("postgres://refuel@127.0.0.1:%d/temporal?sslmode=disable", pg.port)
}

// start runs the server and returns once it accepts connections.
// Durability is traded for speed: the cluster lives as long as the test.
func (pg *postgresServer) start() {
	t := pg.t
	t.Helper()
	pg.proc = startProcessAs(t, "postgres", pg.cred, cleanEnv(), filepath.Join(pg.bin, "postgres"),
		"-D", filepath.Join(pg.dir, "data"), "-p", strconv.Itoa(pg.port), "-h", "127.0.0.1", "-k", pg.dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=300")
	deadline := time.Now().Add(time.Minute)
	for {
		ready := exec.Command(filepath.Join(pg.bin, "pg_isready"), "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(pg.port), "-U", "refuel")
		if ready.Run() == nil {
			return
		}
		if !pg.proc.running() {
			t.Fatalf("postgres exited before it was ready: %v", pg.proc.err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("postgres not ready after a minute")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop shuts the server down at once (SIGINT: PostgreSQL's fast shutdown,
// which disconnects every client) and waits for its exit.
func (pg *postgresServer) stop() {
	pg.t.Helper()
	_ = pg.proc.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-pg.proc.exited:
	case <-time.After(30 * time.Second):
		pg.proc.kill()
		pg.t.Errorf("postgres did not stop within 30s of SIGINT")
	}
}

// startProcessAs is startProcess run as cred's user (nil: the test's).
func startProcessAs(t *testing.T, name string, cred *syscall.Credential, env []string, argv ...string) *process {
	t.Helper()
	return startProcessWith(t, name, env, &syscall.SysProcAttr{Credential: cred}, argv...)
}

// temporalServerProcess is `worker temporal-server` on a PostgreSQL URL,
// serving its frontend on a fixed address so that it can be killed and
// started again where its clients expect it.
type temporalServerProcess struct {
	t        *testing.T
	worker   string
	postgres string
	frontend string
	starts   int
	proc     *process
	// held keeps the frontend's address while the server is away (hold).
	held net.Listener
}

// startTemporalServer starts the server and returns once its frontend
// serves the default namespace.
func startTemporalServer(t *testing.T, worker, postgresURL string) *temporalServerProcess {
	t.Helper()
	s := &temporalServerProcess{t: t, worker: worker, postgres: postgresURL, frontend: freeAddr(t)}
	t.Cleanup(func() {
		if s.held != nil {
			_ = s.held.Close()
		}
	})
	s.start()
	return s
}

// start runs the server (again) and waits until it serves.
func (s *temporalServerProcess) start() {
	t := s.t
	t.Helper()
	s.starts++
	if s.held != nil {
		_ = s.held.Close()
		s.held = nil
	}
	s.proc = startProcess(t, fmt.Sprintf("temporal-server-%d", s.starts), cleanEnv(), s.worker, "temporal-server",
		"--postgres", s.postgres, "--frontend", s.frontend, "--log-level", "warn")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := waitForFrontend(ctx, s.frontend, s.proc); err != nil {
		t.Fatalf("temporal server on %s: %v", s.frontend, err)
	}
}

// kill SIGKILLs the server: no handler sees it, nothing is flushed.
// Until it starts again the test keeps its address (hold).
func (s *temporalServerProcess) kill() {
	s.proc.kill()
	s.hold()
}

// hold keeps the frontend's address while the server is away: the suite
// runs other tests beside this one, and a stack of theirs picking a free
// port could take it, so that the server could not start again where its
// workers and agents look for it. Every connection is reset at once, as
// a server that is not there refuses it.
func (s *temporalServerProcess) hold() {
	l, err := net.Listen("tcp", s.frontend)
	if err != nil {
		s.t.Logf("the frontend's address cannot be held while the server is away: %v", err)
		return
	}
	s.held = l
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // a reset, not a goodbye
			}
			_ = c.Close()
		}
	}()
}

// waitForFrontend polls the frontend until it answers for the default
// namespace, failing early if proc exits.
func waitForFrontend(ctx context.Context, frontend string, proc *process) error {
	c, err := client.NewLazyClient(client.Options{HostPort: frontend, Logger: quietSDKLogger()})
	if err != nil {
		return err
	}
	defer c.Close()
	var lastErr error
	for {
		callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, lastErr = c.WorkflowService().DescribeNamespace(callCtx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
		cancel()
		if lastErr == nil {
			return nil
		}
		if !proc.running() {
			return fmt.Errorf("%s exited before its frontend served: %v", proc.name, proc.err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not serving: %w (last error: %v)", ctx.Err(), lastErr)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
