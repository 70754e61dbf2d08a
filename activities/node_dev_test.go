package activities

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"

	"refuel/pkg/devenv"
	"refuel/pkg/spec"
)

// waitSignal returns the first progress signal, from index from on, that
// ok accepts, and the index after it.
func (s *signals) waitSignal(t *testing.T, from int, what string, ok func(Progress) bool) (Progress, int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a hang guard, not a speed bound
	for time.Now().Before(deadline) {
		s.mu.Lock()
		got := append([]Progress(nil), s.got...)
		s.mu.Unlock()
		for i := from; i < len(got); i++ {
			if ok(got[i]) {
				return got[i], i + 1
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no progress signal: %s", what)
	return Progress{}, 0
}

func kind(k ProgressKind) func(Progress) bool { return func(p Progress) bool { return p.Kind == k } }

// runDev runs one attempt of a development environment on node n in the
// background; the returned func stops it (StopTraining) and waits.
func runDev(t *testing.T, n *Node, in TrainingInput) func() TrainingResult {
	t.Helper()
	type ran struct {
		res TrainingResult
		err error
	}
	done := make(chan ran, 1)
	go func() {
		var suite testsuite.WorkflowTestSuite
		env := suite.NewTestActivityEnvironment()
		env.RegisterActivity(n)
		v, err := env.ExecuteActivity(n.RunTraining, in)
		var res TrainingResult
		if err == nil {
			err = v.Get(&res)
		}
		done <- ran{res, err}
	}()
	return func() TrainingResult {
		t.Helper()
		if err := n.StopTraining(context.Background(), StopInput{JobID: in.Spec.ID, Attempt: in.Attempt}); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatalf("RunTraining: %v", r.err)
			}
			return r.res
		case <-time.After(30 * time.Second):
			t.Fatal("RunTraining did not return")
			return TrainingResult{}
		}
	}
}

func httpGet(t *testing.T, endpoint, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + endpoint + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// A development environment's attempt through the node activity: the
// run hears where it listens, when it answers and when its use changes,
// and a stop saves the workspace that the next attempt, on a fresh
// instance, restores.
func TestRunTrainingOfADevEnvironment(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	store := (&url.URL{Scheme: "file", Path: filepath.ToSlash(t.TempDir())}).String()
	ds := spec.DevSpec{ID: "dev-1", Command: []string{"sh", "-c",
		`exec python3 -m http.server "$REFUEL_PORT" --bind 127.0.0.1 --directory "$REFUEL_WORKSPACE"`}}
	ds.Normalize()
	input := func(attempt int) TrainingInput {
		return TrainingInput{
			Spec: ds.Job(), Attempt: attempt, InstanceID: "i-1", CheckpointURL: store, StopGrace: 10 * time.Second,
			Control: ControlPush, HeartbeatEvery: 20 * time.Millisecond, RunIdentity: "run-of-the-first-workflow",
			Dev: &DevInput{Host: "127.0.0.1", IdleTimeout: 400 * time.Millisecond, SampleEvery: 20 * time.Millisecond},
		}
	}
	node := func(sent *signals) *Node {
		return &Node{InstanceID: "i-1", Dir: t.TempDir(), Signaler: sent, Logger: zap.NewNop(), ProgressSignal: "progress"}
	}

	sent := &signals{}
	n := node(sent)
	stop := runDev(t, n, input(1))
	started, i := sent.waitSignal(t, 0, "the endpoint", kind(ProgressEndpoint))
	if d := started.Dev; d == nil || d.Workspace != filepath.Join(n.Dir, "workspaces", "dev-1") || d.Since.IsZero() {
		t.Fatalf("endpoint signal %+v; want the default workspace and the start", started.Dev)
	}
	serving, i := sent.waitSignal(t, i, "the endpoint answers", kind(ProgressServing))
	endpoint := serving.Dev.Endpoint
	if !serving.Dev.Serving || !strings.HasPrefix(endpoint, "127.0.0.1:") {
		t.Fatalf("serving signal %+v", serving.Dev)
	}
	if err := os.WriteFile(filepath.Join(serving.Dev.Workspace, "notes.txt"), []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Quiet a quarter of the idle timeout after the start (every signal
	// says whether it is in use: this may be the serving one), in use
	// while a connection is open, quiet again after it closed.
	quiet, _ := sent.waitSignal(t, 0, "quiet", func(p Progress) bool { return p.Dev != nil && !p.Dev.InUse })
	conn, err := net.Dial("tcp", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	used, i := sent.waitSignal(t, i, "in use", func(p Progress) bool { return p.Kind == ProgressUsage && p.Dev.InUse })
	conn.Close()
	again, _ := sent.waitSignal(t, i, "quiet again", func(p Progress) bool { return p.Kind == ProgressUsage && !p.Dev.InUse })
	if used.Dev.Usage.Connections != 1 || !used.Dev.LastActive.After(quiet.Dev.LastActive) || again.Dev.LastActive.Before(used.Dev.LastActive) {
		t.Errorf("usage: quiet %+v, used %+v, quiet again %+v; want the connection seen and the last activity moving on", quiet.Dev, used.Dev, again.Dev)
	}
	// What the workflow judges idleness on.
	act := again.Dev.Activity(time.Time{})
	if at, ok := act.StopAt(400 * time.Millisecond); !ok || !at.Equal(again.Dev.LastActive.Add(400*time.Millisecond)) {
		t.Errorf("stop at %s, %v; want the last activity plus the idle timeout", at, ok)
	}

	res := stop()
	if res.Outcome != OutcomeStopped || res.Dev == nil || !res.Dev.Saved || !res.Dev.Served || res.Dev.Endpoint != endpoint ||
		res.LastCheckpoint == nil {
		t.Fatalf("result %+v, dev %+v; want stopped, the workspace saved", res, res.Dev)
	}

	// The next attempt on a fresh instance restores it, whatever run
	// identity its workflow has.
	sent2 := &signals{}
	in2 := input(2)
	in2.RunIdentity = "a-later-workflow-of-the-same-id"
	stop2 := runDev(t, node(sent2), in2)
	restored, j := sent2.waitSignal(t, 0, "the restore", kind(ProgressRestored))
	if restored.Step != res.LastCheckpoint.Step {
		t.Errorf("restored save %d; want %d", restored.Step, res.LastCheckpoint.Step)
	}
	serving2, _ := sent2.waitSignal(t, j, "the endpoint answers", kind(ProgressServing))
	if got := httpGet(t, serving2.Dev.Endpoint, "/notes.txt"); got != "kept" {
		t.Errorf("after the move GET /notes.txt = %q", got)
	}
	if res2 := stop2(); !res2.Dev.Saved {
		t.Errorf("second attempt: %+v", res2.Dev)
	}
}

// A command that exits at once fails the attempt with its last lines,
// whatever its exit status, and says what that means for the
// environment.
func TestRunTrainingOfADevCommandThatExits(t *testing.T) {
	for name, tc := range map[string]struct {
		script string
		code   int
	}{
		"with an error":      {`echo "jupyter: command not found" >&2; exit 127`, 127},
		"with exit status 0": {`echo "jupyter: command not found" >&2; exit 0`, 0},
	} {
		t.Run(name, func(t *testing.T) { devCommandExits(t, tc.script, tc.code) })
	}
}

func devCommandExits(t *testing.T, script string, code int) {
	store := (&url.URL{Scheme: "file", Path: filepath.ToSlash(t.TempDir())}).String()
	ds := spec.DevSpec{ID: "dev-2", Command: []string{"sh", "-c", script}}
	ds.Normalize()
	n := &Node{InstanceID: "i-1", Dir: t.TempDir(), Signaler: &signals{}, Logger: zap.NewNop(), ProgressSignal: "progress"}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(n)
	v, err := env.ExecuteActivity(n.RunTraining, TrainingInput{
		Spec: ds.Job(), Attempt: 1, InstanceID: "i-1", CheckpointURL: store, Control: ControlPush,
		Dev: &DevInput{Host: "127.0.0.1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var res TrainingResult
	if err := v.Get(&res); err != nil {
		t.Fatal(err)
	}
	if res.Outcome != OutcomeFailed || res.ExitCode != code || res.Dev == nil || res.Dev.Served {
		t.Fatalf("result %+v; want failed with code %d, never served", res, code)
	}
	for _, want := range []string{"before its endpoint ever answered", "jupyter: command not found", "starter logs dev-2 --attempt 1"} {
		if !strings.Contains(res.Message, want) {
			t.Errorf("message %q lacks %q", res.Message, want)
		}
	}
	state, _ := devenv.CommandExit{Code: res.ExitCode, Ran: time.Duration(res.Dev.RanSeconds * float64(time.Second)), Served: res.Dev.Served}.Verdict()
	if state != devenv.StateFailed {
		t.Errorf("verdict %s; want failed", state)
	}
}
