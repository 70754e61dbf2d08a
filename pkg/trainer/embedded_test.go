package trainer

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestEmbeddedIsMain runs the same job through Main and through Embedded
// and compares everything the agent would see: the checkpoints on disk,
// byte for byte, and the protocol lines.
func TestEmbeddedIsMain(t *testing.T) {
	args := strings.Fields("--steps 40 --checkpoint-every 8 --step-time 0 --seed 5 --features 6")
	mainDir, embeddedDir := filepath.Join(t.TempDir(), "ckpt"), filepath.Join(t.TempDir(), "ckpt")
	var mainOut, embeddedOut bytes.Buffer
	t.Setenv(CheckpointDirEnv, mainDir)
	if code := Main(args, &mainOut, new(bytes.Buffer)); code != 0 {
		t.Fatalf("Main = %d", code)
	}
	env := []string{"PATH=/bin", CheckpointDirEnv + "=" + embeddedDir, "REFUEL_JOB_ID=j"}
	if code := Embedded(context.Background(), nil, args, env, &embeddedOut, new(bytes.Buffer)); code != 0 {
		t.Fatalf("Embedded = %d", code)
	}
	if mainOut.String() != embeddedOut.String() {
		t.Errorf("protocol lines differ:\nMain:\n%s\nEmbedded:\n%s", mainOut.String(), embeddedOut.String())
	}
	if got, want := tree(t, embeddedDir), tree(t, mainDir); got != want {
		t.Errorf("checkpoints differ:\nEmbedded:\n%s\nMain:\n%s", got, want)
	}
	if !strings.Contains(embeddedOut.String(), Train(Config{Steps: 40, Seed: 5, Features: 6}).Digest()) {
		t.Errorf("Embedded's last line does not name Train's digest:\n%s", embeddedOut.String())
	}
}

// tree lists every file under dir with its content's digest.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		fmt.Fprintf(&b, "%s %x\n", rel, data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestEmbeddedStopAndKill stops one embedded life as SIGTERM would, kills
// the next as SIGKILL would, and finishes with a third: the model is
// Train's, and nothing of the killed life is left running.
func TestEmbeddedStopAndKill(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	env := []string{CheckpointDirEnv + "=" + dir}
	cfg := Config{Steps: 60, CheckpointEvery: 10, Seed: 9, Features: 8}
	args := func(stepTime time.Duration) []string {
		return strings.Fields(fmt.Sprintf("--steps %d --checkpoint-every %d --step-time %s --seed %d --features %d",
			cfg.Steps, cfg.CheckpointEvery, stepTime, cfg.Seed, cfg.Features))
	}

	// Stopped: the step under way is finished and checkpointed.
	ctx, stop := context.WithCancel(context.Background())
	out := &watchWriter{seen: make(chan struct{}), want: "REFUEL_PROGRESS step=20 "}
	codes := make(chan int, 1)
	go func() { codes <- Embedded(ctx, nil, args(time.Millisecond), env, out, new(bytes.Buffer)) }()
	<-out.seen
	stop()
	if code := <-codes; code != 0 {
		t.Fatalf("stopped life = %d, want 0", code)
	}
	m, _, found, err := latest(dir, new(bytes.Buffer))
	if err != nil || !found || m.Step < 20 || !strings.Contains(out.String(), fmt.Sprintf("REFUEL_STOPPED step=%d ", m.Step)) {
		t.Fatalf("after the stop: checkpoint step %d (%v, %v); output:\n%s", m.Step, found, err, out.String())
	}
	stoppedAt := m.Step

	// Killed in the middle of a step's pacing: it returns at once, 137,
	// with no checkpoint of the step.
	kill := make(chan struct{})
	out = &watchWriter{seen: make(chan struct{}), want: fmt.Sprintf("REFUEL_PROGRESS step=%d ", stoppedAt)}
	go func() { codes <- Embedded(context.Background(), kill, args(time.Hour), env, out, new(bytes.Buffer)) }()
	<-out.seen
	close(kill)
	select {
	case code := <-codes:
		if code != exitKilled {
			t.Fatalf("killed life = %d, want %d", code, exitKilled)
		}
	case <-time.After(30 * time.Second): // hang guard only
		t.Fatal("a killed trainer did not return")
	}
	if m, _, _, _ := latest(dir, new(bytes.Buffer)); m.Step != stoppedAt {
		t.Errorf("the killed life left checkpoint step %d; want still %d", m.Step, stoppedAt)
	}

	var last bytes.Buffer
	if code := Embedded(context.Background(), nil, args(0), env, &last, new(bytes.Buffer)); code != 0 {
		t.Fatalf("last life = %d", code)
	}
	if want := Train(cfg).Digest(); !strings.Contains(last.String(), "digest="+want) {
		t.Errorf("final output does not name Train's digest %s:\n%s", want, last.String())
	}
}

// watchWriter closes seen once a line starting with want was written.
type watchWriter struct {
	bytes.Buffer
	want string
	seen chan struct{}
	once bool
}

func (w *watchWriter) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	if !w.once && strings.Contains(w.Buffer.String(), w.want) {
		w.once = true
		close(w.seen)
	}
	return n, err
}
