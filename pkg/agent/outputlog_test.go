package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"refuel/pkg/checkpoint"
)

// storedOutput is what the store holds of an attempt's output, one
// "stream: text" line each.
func (h *harness) storedOutput(attempt int) string {
	h.t.Helper()
	chunks, err := h.store.NewLogReader(attempt).Next(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range chunks {
		if c.Missing > 0 {
			fmt.Fprintf(&b, "(%d missing)\n", c.Missing)
		}
		for _, l := range c.Lines {
			fmt.Fprintf(&b, "%s: %s\n", l.Stream, l.Text)
		}
	}
	return b.String()
}

// streamLines picks the texts of one stream out of storedOutput's form.
func streamLines(output string, stream checkpoint.LogStream) []string {
	var out []string
	for line := range strings.Lines(output) {
		if text, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), string(stream)+": "); ok {
			out = append(out, text)
		}
	}
	return out
}

func TestOutputKeptInStore(t *testing.T) {
	h := newHarness(t)
	cfg := h.config("chatty", "FAKE_LINES=30")
	cfg.Attempt = 3
	res, err := h.run(context.Background(), cfg)()
	if err != nil || res.Outcome != Completed || res.LogsErr != nil {
		t.Fatalf("Run: %+v, %v", res, err)
	}
	out := h.storedOutput(3)
	wantOut := []string{"RESUMED step=0 state=", "ENV job=job-1 instance=i-0123"}
	var wantErr []string
	for i := range 30 {
		if i%2 == 0 {
			wantOut = append(wantOut, fmt.Sprintf("line %03d", i))
		} else {
			wantErr = append(wantErr, fmt.Sprintf("line %03d", i))
		}
	}
	if diff := cmp.Diff(wantOut, streamLines(out, checkpoint.Stdout)); diff != "" {
		t.Errorf("stored stdout (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantErr, streamLines(out, checkpoint.Stderr)); diff != "" {
		t.Errorf("stored stderr (-want +got):\n%s", diff)
	}
	agent := streamLines(out, checkpoint.AgentStream)
	if len(agent) != 4 || !strings.HasPrefix(agent[0], "no checkpoint in ") ||
		!strings.HasPrefix(agent[1], "environment: ") ||
		!strings.HasPrefix(agent[2], fmt.Sprintf("attempt 3 on i-0123: running [%q] in %s", os.Args[0], cfg.Dir)) ||
		agent[3] != "trainer exited with code 0: completed" {
		t.Errorf("the agent's lines: %q", agent)
	}
	if h.storedOutput(1) != "" {
		t.Error("output stored under another attempt too")
	}

	// What the agent keeps on the instance is the job's alone.
	for _, d := range []string{cfg.Dir, filepath.Join(cfg.Dir, "logs"), filepath.Join(cfg.Dir, "checkpoints")} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, %v; want a 0700 directory", d, fi.Mode(), err)
		}
	}
	local, _ := filepath.Glob(filepath.Join(cfg.Dir, "logs", "*"))
	if len(local) != 1 {
		t.Fatalf("local logs %v; want one segment", local)
	}
	if fi, err := os.Stat(local[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v, %v; want a 0600 file", local[0], fi.Mode(), err)
	}
	if data, _ := os.ReadFile(local[0]); !strings.Contains(string(data), " stderr F line 029\n") {
		t.Errorf("local log lacks the last line:\n%s", data)
	}
}

func TestOutputRotatesWithinItsCaps(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	dir := filepath.Join(t.TempDir(), "logs")
	// Each line is about 50 bytes: three to a segment.
	l, err := newOutputLog(dir, h.store, 7, "i-9", LogOptions{SegmentBytes: 200, LocalSegments: 2, StoreSegments: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	var want []string
	for i := range 40 {
		l.add(checkpoint.Stdout, fmt.Sprintf("uploaded %03d", i), false)
		want = append(want, fmt.Sprintf("stdout: uploaded %03d", i))
		if err := l.upload(ctx); err != nil {
			t.Fatal(err)
		}
	}
	segs, err := h.store.LogSegments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var indexes []int
	for _, g := range segs {
		indexes = append(indexes, g.Index)
	}
	// The three newest closed segments and the current one.
	cur := l.index
	if diff := cmp.Diff([]int{cur - 3, cur - 2, cur - 1, cur}, indexes); diff != "" || cur < 10 {
		t.Errorf("stored segments of %d (-want +got):\n%s", cur, diff)
	}
	got := strings.Split(strings.TrimSuffix(h.storedOutput(7), "\n"), "\n")
	if got[0] != fmt.Sprintf("(%d missing)", cur-4) || !slices.Equal(got[1:], want[len(want)-len(got)+1:]) || len(got) < 10 {
		t.Errorf("stored output %q; want the oldest segments missing, then every later line", got)
	}
	if local, _ := filepath.Glob(filepath.Join(dir, "*")); len(local) != 2 {
		t.Errorf("local segments %v; want the newest 2", local)
	}

	// While the store cannot be reached, closed segments wait, up to
	// LocalSegments; beyond that the oldest are dropped and counted.
	for i := range 20 {
		l.add(checkpoint.Stderr, fmt.Sprintf("waiting %03d", i), false)
	}
	if l.droppedSegments() == 0 {
		t.Error("no segment counted as dropped")
	}
	if err := l.upload(ctx); err != nil {
		t.Fatal(err)
	}
	waited := streamLines(h.storedOutput(7), checkpoint.Stderr)
	if len(waited) == 0 || waited[len(waited)-1] != "waiting 019" || waited[0] == "waiting 000" {
		t.Errorf("stderr in store %q; want the newest lines and not the dropped oldest", waited)
	}
}

// TestOutputUploadedWhileRunning: output reaches the store while the
// trainer runs, not only at its end, and a stop's last lines follow.
func TestOutputUploadedWhileRunning(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := h.config("wait")
	cfg.Attempt = 1
	cfg.Logs.UploadEvery = 20 * time.Millisecond
	wait := h.run(ctx, cfg)
	h.events.waitFor(t, EventCheckpoint, 1)
	deadline := time.Now().Add(hangGuard)
	for !strings.Contains(h.storedOutput(1), "stdout: REFUEL_PROGRESS step=1\n") {
		if time.Now().After(deadline) {
			t.Fatalf("the running trainer's output never reached the store:\n%s", h.storedOutput(1))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if _, err := wait(); err != nil {
		t.Fatal(err)
	}
	out := h.storedOutput(1)
	for _, want := range []string{"refuel: stop requested: sent SIGTERM", "stderr: got SIGTERM, saving", "refuel: uploaded checkpoint step 2 in ", "refuel: trainer exited with code 0: stopped"} {
		if !strings.Contains(out, want) {
			t.Errorf("stored output lacks %q:\n%s", want, out)
		}
	}
}

// BenchmarkOutputLogAdd is the agent's cost per line of trainer output
// kept (the local copy included; uploads are apart).
func BenchmarkOutputLogAdd(b *testing.B) {
	store, err := checkpoint.Open(context.Background(), "mem://", "job-1")
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	l, err := newOutputLog(b.TempDir(), store, 1, "i", LogOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.close()
	text := strings.Repeat("x", 100)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		l.add(checkpoint.Stdout, text, false)
	}
}
