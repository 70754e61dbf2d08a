package tests

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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

	frontend, ui, metrics := freeAddr(t), freeAddr(t), freeAddr(t)
	logPath := filepath.Join(root, "worker.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(worker, "--frontend", frontend, "--ui", ui, "--metrics", metrics, "--demo-step-time", "20ms", "--sim-notice", "10s")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, cleanEnv(), logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case err := <-exited:
			return err
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-exited
			return errors.New("no exit a minute after SIGINT")
		}
	}
	t.Cleanup(func() {
		_ = stop()
		if t.Failed() {
			log, _ := os.ReadFile(logPath)
			t.Logf("worker log:\n%s", tail(string(log), 60))
		}
	})

	readyz := "http://" + metrics + "/readyz"
	deadline := time.Now().Add(3 * time.Minute)
	for {
		code, body := get(readyz)
		if code == http.StatusOK {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("the worker exited before it was ready: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d after 3 minutes: %s", code, body)
		}
		time.Sleep(500 * time.Millisecond)
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

	if err := stop(); err != nil {
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
