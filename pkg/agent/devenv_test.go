package agent

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"refuel/pkg/checkpoint"
	"refuel/pkg/devenv"
)

// httpServer is an environment's command anyone can run: a web server
// over its workspace, on the port the agent gives it.
var httpServer = []string{"sh", "-c", `exec python3 -m http.server "$REFUEL_PORT" --bind 127.0.0.1 --directory "$REFUEL_WORKSPACE"`}

// devQuiet is how soon after the last use the tests' environments go
// quiet.
const devQuiet = 100 * time.Millisecond

func needPython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the environment's command is python3 -m http.server")
	}
}

// devLog keeps a development environment's events and lets a test wait
// for one that satisfies it. Unlike recorder it never blocks the agent:
// usage samples come all the time.
type devLog struct {
	mu     sync.Mutex
	events []Event
	added  chan struct{}
}

func newDevLog() *devLog { return &devLog{added: make(chan struct{})} }

func (l *devLog) record(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
	close(l.added)
	l.added = make(chan struct{})
}

// waitFor returns the first event, from index from on, that ok accepts,
// and the index after it.
func (l *devLog) waitFor(t *testing.T, from int, what string, ok func(Event) bool) (Event, int) {
	t.Helper()
	timeout := time.After(hangGuard)
	for {
		l.mu.Lock()
		for i := from; i < len(l.events); i++ {
			if ok(l.events[i]) {
				e := l.events[i]
				l.mu.Unlock()
				return e, i + 1
			}
		}
		from = len(l.events)
		added := l.added
		l.mu.Unlock()
		select {
		case <-added:
		case <-timeout:
			t.Fatalf("no event: %s", what)
		}
	}
}

func (l *devLog) count(kind EventKind) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

func kindIs(kind EventKind) func(Event) bool { return func(e Event) bool { return e.Kind == kind } }

// devConfig runs command as environment dev-1's, its workspace ws, on a
// shared host (so on a free port), sampling often and saving rarely.
func (h *harness) devConfig(log *devLog, ws string, command ...string) Config {
	return Config{
		Command: command, Dir: h.t.TempDir(), Store: h.store, Keep: 2, InstanceID: "i-dev", JobID: "job-1",
		NoticePoll: 20 * time.Millisecond, StopGrace: 10 * time.Second, OnEvent: log.record,
		Stdout: &h.stdout, Stderr: &h.stderr,
		Dev: &Dev{Workspace: ws, Host: "127.0.0.1", SaveEvery: time.Hour, SampleEvery: 20 * time.Millisecond,
			QuietAfter: devQuiet, NvidiaSMI: filepath.Join(h.t.TempDir(), "no-nvidia-smi")},
	}
}

func get(t *testing.T, endpoint, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + endpoint + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	return string(body)
}

// The whole life of an environment's attempt on real processes: the
// endpoint answers, an open connection is activity, a stop saves the
// workspace, and a fresh directory on another attempt gets it back.
func TestDevEnvironmentKeepsItsWorkspace(t *testing.T) {
	needPython(t)
	h := newHarness(t)
	log := newDevLog()
	ws := filepath.Join(t.TempDir(), "work")
	ctx, stop := context.WithCancel(context.Background())
	wait := h.run(ctx, h.devConfig(log, ws, httpServer...))

	started, i := log.waitFor(t, 0, "the endpoint", kindIs(EventEndpoint))
	if started.Dev == nil || started.Dev.Workspace != ws || !strings.HasPrefix(started.Dev.Endpoint, "127.0.0.1:") {
		t.Fatalf("endpoint event %+v; want the workspace and a port on 127.0.0.1", started.Dev)
	}
	endpoint := started.Dev.Endpoint
	if _, i = log.waitFor(t, i, "the endpoint answers", kindIs(EventServing)); !strings.Contains(get(t, endpoint, "/"), "Directory listing") {
		t.Fatal("the server does not list the workspace")
	}
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("written before the move\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if got := get(t, endpoint, "/notes.txt"); got != "written before the move\n" {
		t.Fatalf("GET /notes.txt = %q", got)
	}
	must(os.MkdirAll(filepath.Join(ws, "src", "empty"), 0o755))
	must(os.WriteFile(filepath.Join(ws, "src", "run.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755))
	must(os.Symlink("src/run.sh", filepath.Join(ws, "run")))

	// An open connection is activity: a sample sees it, and the last
	// activity moves past the command's start.
	conn, err := net.Dial("tcp", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	used, i := log.waitFor(t, i, "a sample with the connection", func(e Event) bool {
		return e.Kind == EventUsage && e.Dev.Sample.Connections > 0 && e.Dev.Sample.Active()
	})
	if !used.Dev.LastActive.After(started.Dev.LastActive) || !used.Dev.InUse {
		t.Errorf("last activity %s, in use %v; want in use, later than the start %s", used.Dev.LastActive, used.Dev.InUse, started.Dev.LastActive)
	}
	conn.Close()
	// Quiet once QuietAfter has passed without a connection.
	quiet, i := log.waitFor(t, i, "a sample of an environment gone quiet", func(e Event) bool {
		return e.Kind == EventUsage && e.Dev.Sample.Connections == 0 && !e.Dev.InUse
	})
	if quiet.Time.Sub(quiet.Dev.LastActive) < devQuiet {
		t.Errorf("quiet %s after the last use; want at least %s", quiet.Time.Sub(quiet.Dev.LastActive), devQuiet)
	}

	stop()
	res, err := wait()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Outcome != Stopped || res.Dev == nil || !res.Dev.Saved || !res.Dev.Served || res.Dev.Endpoint != endpoint {
		t.Fatalf("result %+v, dev %+v; want stopped with the workspace saved", res, res.Dev)
	}
	if res.LastCheckpoint == nil || res.LastCheckpoint.Step != 1 {
		t.Fatalf("last checkpoint %+v; want the final save as step 1", res.LastCheckpoint)
	}

	// Another attempt, elsewhere: a fresh directory gets the workspace.
	log2 := newDevLog()
	ws2 := filepath.Join(t.TempDir(), "elsewhere")
	ctx2, stop2 := context.WithCancel(context.Background())
	defer stop2()
	wait2 := h.run(ctx2, h.devConfig(log2, ws2, httpServer...))
	restored, j := log2.waitFor(t, 0, "the restore", kindIs(EventRestored))
	if restored.Step != 1 {
		t.Errorf("restored save %d; want 1", restored.Step)
	}
	again, j := log2.waitFor(t, j, "the endpoint", kindIs(EventEndpoint))
	log2.waitFor(t, j, "the endpoint answers", kindIs(EventServing))
	if got := get(t, again.Dev.Endpoint, "/notes.txt"); got != "written before the move\n" {
		t.Errorf("after the move GET /notes.txt = %q", got)
	}
	checkTree(t, ws2)
	stop2()
	res2, err := wait2()
	if err != nil {
		t.Fatal(err)
	}
	// Nothing changed: the store's save is the workspace, and no other.
	if !res2.Dev.Saved || res2.LastCheckpoint.Step != 1 {
		t.Errorf("second attempt: dev %+v, last checkpoint %+v; want saved, as save 1", res2.Dev, res2.LastCheckpoint)
	}
}

// checkTree checks the workspace the first attempt left, modes and link
// included.
func checkTree(t *testing.T, ws string) {
	t.Helper()
	for path, mode := range map[string]os.FileMode{"notes.txt": 0o640, "src/run.sh": 0o755, "src/empty": os.ModeDir | 0o755} {
		fi, err := os.Lstat(filepath.Join(ws, path))
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if fi.Mode() != mode {
			t.Errorf("%s has mode %v; want %v", path, fi.Mode(), mode)
		}
	}
	if target, err := os.Readlink(filepath.Join(ws, "run")); err != nil || target != "src/run.sh" {
		t.Errorf("link run -> %q (%v); want src/run.sh", target, err)
	}
}

// An interruption notice saves the workspace: the command runs on for
// the grace, gets SIGTERM, and the save reaches the store before the
// instance goes.
func TestDevNoticeSavesTheWorkspace(t *testing.T) {
	needPython(t)
	h := newHarness(t)
	log := newDevLog()
	ws := filepath.Join(t.TempDir(), "work")
	src := newFakeSource()
	cfg := h.devConfig(log, ws, httpServer...)
	cfg.Notices = src
	cfg.Dev.NoticeGrace = 200 * time.Millisecond
	wait := h.run(context.Background(), cfg)
	_, i := log.waitFor(t, 0, "the endpoint answers", kindIs(EventServing))
	must(os.WriteFile(filepath.Join(ws, "draft.md"), []byte("unsaved until the notice"), 0o600))

	notice := &Notice{Action: "terminate", Time: time.Now().Add(time.Minute)}
	src.publish(notice, nil)
	log.waitFor(t, i, "the notice", kindIs(EventNotice))
	res, err := wait()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Outcome != Preempted || res.Killed || !res.Dev.Saved || res.Dev.Unsaved != 0 {
		t.Fatalf("result %+v, dev %+v; want preempted with the workspace saved", res, res.Dev)
	}
	if got := restoredFile(t, h.store, "draft.md"); got != "unsaved until the notice" {
		t.Errorf("the store's newest save has draft.md %q", got)
	}
	if !strings.Contains(h.storedOutput(0), "the command runs on for 200ms") {
		t.Errorf("the output does not say the command ran on after the notice:\n%s", h.storedOutput(0))
	}
}

// A save that cannot reach the store before the instance goes is lost
// work, reported as such and not as the agent's failure.
func TestDevSaveThatMissesTheNoticeIsLostWork(t *testing.T) {
	needPython(t)
	h := newHarness(t)
	log := newDevLog()
	ws := filepath.Join(t.TempDir(), "work")
	src := newFakeSource()
	cfg := h.devConfig(log, ws, httpServer...)
	cfg.Notices = src
	wait := h.run(context.Background(), cfg)
	log.waitFor(t, 0, "the endpoint answers", kindIs(EventServing))
	must(os.WriteFile(filepath.Join(ws, "draft.md"), []byte("lost"), 0o600))
	// The store is gone: no upload can succeed.
	must(os.RemoveAll(h.bucketDir))
	must(os.WriteFile(h.bucketDir, nil, 0o400))
	src.publish(&Notice{Action: "terminate", Time: time.Now().Add(2 * time.Second)}, nil)
	res, err := wait()
	if err != nil {
		t.Fatalf("Run: %v; want the loss reported in the result", err)
	}
	if res.Outcome != Preempted || res.Dev.Saved || res.Dev.SaveError == "" || res.Dev.Unsaved <= 0 {
		t.Fatalf("result %+v, dev %+v; want preempted, the save lost and the unsaved time counted", res, res.Dev)
	}
}

func restoredFile(t *testing.T, store *checkpoint.Store, name string) string {
	t.Helper()
	m, err := store.Latest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	must(store.Restore(context.Background(), m, dir))
	ws := t.TempDir()
	if _, err := extractArchive(filepath.Join(dir, WorkspaceArchive), ws); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(ws, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A command that exits at once fails the attempt with its last lines;
// its verdict fails the environment.
func TestDevCommandThatExitsAtOnce(t *testing.T) {
	h := newHarness(t)
	log := newDevLog()
	res, err := h.run(context.Background(), h.devConfig(log, filepath.Join(t.TempDir(), "w"),
		"sh", "-c", `echo "starting on $REFUEL_PORT"; echo "error: no module named jupyterlab" >&2; exit 3`))()
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != Failed || res.ExitCode != 3 || !strings.Contains(res.Stderr, "no module named jupyterlab") || res.Dev == nil {
		t.Fatalf("result %+v; want failed with code 3 and the last lines", res)
	}
	state, why := devenv.CommandExit{Code: res.ExitCode, Ran: res.Dev.Ran, Served: res.Dev.Served, Output: res.Stderr}.Verdict()
	if state != devenv.StateFailed || !strings.Contains(why, "no module named jupyterlab") {
		t.Errorf("verdict %s: %s; want failed, with the last lines", state, why)
	}
}

// The command's environment: its port and workspace, not the agent's
// checkpoint directory, and the workspace as its working directory.
func TestDevCommandEnvironment(t *testing.T) {
	h := newHarness(t)
	log := newDevLog()
	ws := filepath.Join(t.TempDir(), "w")
	cfg := h.devConfig(log, ws, "sh", "-c", `env > env.txt; pwd > pwd.txt`)
	cfg.Dev.Host, cfg.Dev.SharedHost = "10.0.0.7", false
	res, err := h.run(context.Background(), cfg)()
	if err != nil {
		t.Fatal(err)
	}
	if res.Dev.Endpoint != fmt.Sprintf("10.0.0.7:%d", DefaultDevPort) {
		t.Errorf("endpoint %s; want the instance's own host at the default port", res.Dev.Endpoint)
	}
	env, _ := os.ReadFile(filepath.Join(ws, "env.txt"))
	pwd, _ := os.ReadFile(filepath.Join(ws, "pwd.txt"))
	for _, want := range []string{fmt.Sprintf("REFUEL_PORT=%d\n", DefaultDevPort), "REFUEL_WORKSPACE=" + ws + "\n", "REFUEL_JOB_ID=job-1\n"} {
		if !strings.Contains(string(env), want) {
			t.Errorf("environment lacks %q:\n%s", want, env)
		}
	}
	if strings.Contains(string(env), "REFUEL_CHECKPOINT_DIR") {
		t.Errorf("the environment has the agent's checkpoint directory:\n%s", env)
	}
	if strings.TrimSpace(string(pwd)) != ws {
		t.Errorf("ran in %s; want the workspace %s", pwd, ws)
	}
}

// A store that holds a training run's checkpoints under the id is not
// taken for the environment's saves.
func TestDevRefusesCheckpointsThatAreNoSaves(t *testing.T) {
	h := newHarness(t)
	h.seed(7)
	_, err := h.run(context.Background(), h.devConfig(newDevLog(), filepath.Join(t.TempDir(), "w"), "sleep", "60"))()
	if err == nil || !strings.Contains(err.Error(), "no workspace save") {
		t.Fatalf("error %v; want one saying the checkpoint is no workspace save", err)
	}
}

// Periodic saves: a change is saved at the next interval, and an
// unchanged workspace is not saved again.
func TestDevSavesPeriodicallyOnlyWhatChanged(t *testing.T) {
	h := newHarness(t)
	log := newDevLog()
	ws := filepath.Join(t.TempDir(), "w")
	cfg := h.devConfig(log, ws, "sleep", "60")
	cfg.Dev.SaveEvery = 20 * time.Millisecond
	ctx, stop := context.WithCancel(context.Background())
	wait := h.run(ctx, cfg)
	_, i := log.waitFor(t, 0, "the first save", func(e Event) bool { return e.Kind == EventCheckpoint && e.Step == 1 })
	must(os.WriteFile(filepath.Join(ws, "a"), []byte("a"), 0o600))
	_, i = log.waitFor(t, i, "the save of the change", func(e Event) bool { return e.Kind == EventCheckpoint && e.Step >= 2 })
	// Samples come no faster than every 20ms: after 25 of them, a save
	// of the change caught half-written is uploaded too (the agent looks
	// for saves to upload every 200ms), and the workspace is quiet.
	samples := func(n int) {
		for range n {
			_, i = log.waitFor(t, i, "a sample", kindIs(EventUsage))
		}
	}
	samples(25)
	quiet := log.count(EventCheckpoint)
	samples(25)
	if n := log.count(EventCheckpoint); n != quiet {
		t.Errorf("%d saves while nothing changed; want none", n-quiet)
	}
	stop()
	res, err := wait()
	if err != nil {
		t.Fatal(err)
	}
	if log.count(EventCheckpoint) != quiet || !res.Dev.Saved {
		t.Errorf("the stop saved again, or did not keep the workspace: dev %+v", res.Dev)
	}
	if got := restoredFile(t, h.store, "a"); got != "a" {
		t.Errorf("the newest save has a = %q", got)
	}
}
