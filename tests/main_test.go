// Package tests holds refuel's end-to-end tests: the real embedded
// Temporal server in-process, the real control plane, and real node-agent
// processes (this test binary re-executed in agent mode), plus replay of
// recorded workflow histories. They live in one package so CI links the
// Temporal server once.
package tests

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"refuel/controlplane"
	"refuel/nodeagent"
	"refuel/pkg/trainer"
)

// TestMain lets the test binary play the worker binary's other roles: the
// local cloud starts it as `agent`, agents start it as `trainer`, and the
// join tests as `join`.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "agent":
			os.Exit(nodeagent.Main(os.Args[2:], os.Stderr))
		case "join":
			os.Exit(nodeagent.JoinMain(os.Args[2:], os.Stderr))
		case "trainer":
			os.Exit(trainer.Main(os.Args[2:], os.Stdout, os.Stderr))
		}
	}
	// What a GPU image sets for its fabric, and a secret of the worker's
	// own: the first reaches every trainer of the suite's local machines,
	// the second none (TestTrainerLogsAcrossAttempts).
	os.Setenv(machineVar, machineValue)
	os.Setenv(workerSecretVar, workerSecretValue)
	os.Exit(m.Run())
}

const (
	machineVar, machineValue           = "NCCL_SOCKET_IFNAME", "lo"
	workerSecretVar, workerSecretValue = "REFUEL_E2E_WORKER_SECRET", "the-workers-own"
)

// demoStepTime makes demo-trainer jobs short: work 6s is 300 steps.
const demoStepTime = 20 * time.Millisecond

// startStack runs a whole control plane on an in-memory embedded server
// with free ports, stopped when the test ends.
func startStack(t *testing.T, edit func(*controlplane.Config)) *controlplane.Stack {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := controlplane.Config{
		InMemory: true, DataDir: t.TempDir(),
		FrontendAddr: "127.0.0.1:0", UIAddr: "-", MetricsAddr: "127.0.0.1:0",
		SelfCommand: []string{self}, DemoStepTime: demoStepTime, JanitorEvery: -1,
		Logger: stackLogger(t),
	}
	if edit != nil {
		edit(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := controlplane.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		assertNoAgents(t, cfg.DataDir)
	})
	return s
}

// stackLogger logs a stack's warnings into the test's output, but only
// the embedded server's errors: its warnings (a task retried, a poll cut
// short by a busy machine) would bury what a failing test has to say.
func stackLogger(t testing.TB) *zap.Logger {
	return zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel), zaptest.WrapOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return serverQuieter{c}
	})))
}

type serverQuieter struct{ zapcore.Core }

func (q serverQuieter) With(fields []zapcore.Field) zapcore.Core {
	return serverQuieter{q.Core.With(fields)}
}

func (q serverQuieter) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if strings.HasPrefix(e.LoggerName, "temporal") && e.Level < zapcore.ErrorLevel {
		return ce
	}
	if !q.Enabled(e.Level) {
		return ce
	}
	return ce.AddCore(e, q)
}

// assertNoAgents checks that no node-agent or trainer process of this
// test binary working under dataDir (a stack's; "" for any) is left
// running. Stacks of tests running in parallel have data dirs of their own.
func assertNoAgents(t *testing.T, dataDir string) {
	t.Helper()
	self, _ := os.Executable()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := agentProcesses(self, dataDir)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("node-agent processes left behind: %v", left)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func agentProcesses(exe, dataDir string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(cmdline) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if len(args) > 1 && args[0] == exe && (args[1] == "agent" || args[1] == "trainer") {
			// An agent names its directory in its arguments, a trainer in
			// its environment.
			environ, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
			if dataDir != "" && !strings.Contains(string(cmdline), dataDir) && !strings.Contains(string(environ), dataDir) {
				continue
			}
			if status, err := os.ReadFile("/proc/" + e.Name() + "/status"); err == nil && strings.Contains(string(status), "State:\tZ") {
				continue // a zombie has exited; its parent just has not reaped it yet
			}
			out = append(out, e.Name()+": "+strings.Join(args, " "))
		}
	}
	return out
}
