package activities

import (
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"

	"refuel/pkg/spec"
)

// A service replica's attempt: the agent starts the model server with
// REFUEL_PORT, says it is ready at the first 2xx of its readiness path
// with the time it took, and stops one that never answers 2xx, failing
// the attempt with its last lines.
func TestRunTrainingOfAServiceReplica(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	store := (&url.URL{Scheme: "file", Path: filepath.ToSlash(t.TempDir())}).String()
	// The server sleeps a little before it listens (its "model load"),
	// and /healthz is a file it serves; /missing never answers 2xx.
	server := []string{"sh", "-c", `echo loading weights >&2; sleep 0.3; mkdir -p www && echo ok > www/healthz && exec python3 -m http.server "$REFUEL_PORT" --bind 127.0.0.1 --directory www`}
	input := func(path string, initialDelay time.Duration) TrainingInput {
		job := spec.JobSpec{ID: "chat-r1", Command: server, Policy: spec.DefaultPolicy}
		return TrainingInput{
			Spec: job, Attempt: 1, InstanceID: "i-1", CheckpointURL: store, StopGrace: 5 * time.Second,
			Control: ControlPush, HeartbeatEvery: 20 * time.Millisecond, RunIdentity: "run-1",
			Dev: &DevInput{Host: "127.0.0.1", Ready: &ReadyInput{Path: path, InitialDelay: initialDelay, Period: 50 * time.Millisecond, Timeout: 50 * time.Millisecond}},
		}
	}
	t.Run("ready", func(t *testing.T) {
		sent := &signals{}
		n := &Node{InstanceID: "i-1", Dir: t.TempDir(), Signaler: sent, Logger: zap.NewNop(), ProgressSignal: "progress"}
		stop := runDev(t, n, input("/healthz", 20*time.Second))
		ready, _ := sent.waitSignal(t, 0, "the server is ready", kind(ProgressServing))
		if d := ready.Dev; d == nil || !d.Serving || d.LoadSeconds < 0.3 || !strings.HasPrefix(d.Endpoint, "127.0.0.1:") {
			t.Fatalf("ready signal %+v; want serving at a loopback endpoint after its 0.3 s load", ready.Dev)
		}
		if body := httpGet(t, ready.Dev.Endpoint, "/healthz"); strings.TrimSpace(body) != "ok" {
			t.Errorf("GET /healthz: %q", body)
		}
		if res := stop(); res.Outcome != OutcomeStopped {
			t.Errorf("a stopped replica ended %s: %s", res.Outcome, res.Message)
		}
	})
	t.Run("never ready", func(t *testing.T) {
		sent := &signals{}
		n := &Node{InstanceID: "i-1", Dir: t.TempDir(), Signaler: sent, Logger: zap.NewNop(), ProgressSignal: "progress"}
		var suite testsuite.WorkflowTestSuite
		env := suite.NewTestActivityEnvironment()
		env.RegisterActivity(n)
		v, err := env.ExecuteActivity(n.RunTraining, input("/missing", time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var res TrainingResult
		if err := v.Get(&res); err != nil {
			t.Fatal(err)
		}
		if res.Outcome != OutcomeFailed || res.Dev == nil || !res.Dev.NeverReady ||
			!strings.Contains(res.Message, "did not answer GET /missing") || !strings.Contains(res.Message, "loading weights") {
			t.Errorf("never-ready replica ended %s (dev %+v): %s", res.Outcome, res.Dev, res.Message)
		}
	})
}
