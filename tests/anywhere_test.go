package tests

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"refuel/jobs"
)

// TestWorkerBinaryRunsFromAnEmptyDirectory copies bin/worker into an empty
// directory with nothing beside it (no traces, no repository) and starts
// it with its defaults: the embedded Temporal server and Web UI, and the
// simulated cloud replaying its built-in market. bin/starter's drill must
// pass against it, the health endpoints must answer, and a stop must
// leave no node agent behind.
func TestWorkerBinaryRunsFromAnEmptyDirectory(t *testing.T) {
	parallel(t) // a worker process of its own; the drill mostly waits
	built, starter := refuelBinaries(t)
	root := t.TempDir()
	dir := filepath.Join(root, "anywhere")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	worker := filepath.Join(dir, "worker")
	b, err := os.ReadFile(built)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(worker, b, 0o755); err != nil {
		t.Fatal(err)
	}

	// The ports are picked free here and bound by the worker a moment
	// later; another test may take one between the two, and the worker
	// then says so and exits. Only that is tried again, on other ports.
	var frontend, ui, metrics string
	var w *workerProcess
	logPath := filepath.Join(root, "worker.log")
	for try := 1; ; try++ {
		frontend, ui, metrics = freeAddr(t), freeAddr(t), freeAddr(t)
		p := startWorkerProcess(t, worker, dir, logPath, "--frontend", frontend, "--ui", ui, "--metrics", metrics, "--demo-step-time", "20ms", "--sim-notice", "10s")
		t.Cleanup(func() {
			_ = p.stop()
			if t.Failed() && p == w {
				log, _ := os.ReadFile(logPath)
				t.Logf("worker log:\n%s", tail(string(log), 60))
			}
		})
		w = p
		err := w.waitReady("http://"+metrics+"/readyz", 3*time.Minute)
		if err == nil {
			break
		}
		if log, _ := os.ReadFile(logPath); !w.hasExited() || !strings.Contains(string(log), "address in use") || try == 3 {
			t.Fatalf("%v (try %d)", err, try)
		}
		t.Logf("try %d: a port picked for the worker was taken before it bound it; trying others", try)
	}

	if code, body := get("http://" + metrics + "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d %s", code, body)
	}
	if code, _ := get("http://" + ui); code != http.StatusOK {
		t.Errorf("Web UI at %s: %d", ui, code)
	}

	res := runCLI(t, root, starter, "drill", "--json", "--temporal-address", frontend,
		"--work", "6s", "--checkpoint-interval", "1s", "--notice", "10s", "--timeout", "4m")
	var rep jobs.DrillReport
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("starter drill --json printed %q (exit %d): %v\nstderr:\n%s", res.stdout, res.code, err, res.stderr)
	}
	if res.code != 0 || !rep.Passed || !rep.FinalIdentical || rep.ResumedFromStep < rep.CheckpointStep {
		t.Errorf("drill: exit %d, report %+v\nstderr:\n%s", res.code, rep, res.stderr)
	}
	if shards, err := os.ReadDir(filepath.Join(dir, ".refuel", "market-memory", "default")); err != nil || len(shards) == 0 {
		t.Errorf("the drill's lessons are not in the data dir's market memory: %v", err)
	}

	if err := w.stop(); err != nil {
		t.Errorf("the worker did not stop cleanly on SIGINT: %v", err)
	}
	if left := agentProcesses(worker, ""); len(left) != 0 {
		t.Errorf("node agents left after the worker stopped: %v", left)
	}
}

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func tail(s string, lines int) string {
	n := 0
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			if n++; n > lines {
				return s[i+1:]
			}
		}
	}
	return s
}

// workerProcess is a worker binary started by a test, its output in a
// log file.
type workerProcess struct {
	cmd     *exec.Cmd
	done    chan struct{} // closed once it has exited
	err     error         // how it exited, once done
	stopped bool
}

func startWorkerProcess(t *testing.T, worker, dir, logPath string, args ...string) *workerProcess {
	t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	w := &workerProcess{cmd: exec.Command(worker, args...), done: make(chan struct{})}
	w.cmd.Dir, w.cmd.Env, w.cmd.Stdout, w.cmd.Stderr = dir, cleanEnv(), logFile, logFile
	if err := w.cmd.Start(); err != nil {
		logFile.Close()
		t.Fatal(err)
	}
	go func() {
		w.err = w.cmd.Wait()
		logFile.Close()
		close(w.done)
	}()
	return w
}

func (w *workerProcess) hasExited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// waitReady waits until url answers 200, the worker exits, or within
// passes.
func (w *workerProcess) waitReady(url string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		code, body := get(url)
		if code == http.StatusOK {
			return nil
		}
		if w.hasExited() {
			return fmt.Errorf("the worker exited before it was ready: %v", w.err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still %d after %s: %s", url, code, within, body)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// stop sends SIGINT and waits a minute for the worker to exit, then
// kills it; an error if it had to. Stopping one already stopped or
// exited is a no-op.
func (w *workerProcess) stop() error {
	if w.stopped || w.hasExited() {
		w.stopped = true
		return nil
	}
	w.stopped = true
	_ = w.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-w.done:
		return w.err
	case <-time.After(time.Minute):
		_ = w.cmd.Process.Kill()
		<-w.done
		return errors.New("no exit a minute after SIGINT")
	}
}
