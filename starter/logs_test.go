package main

import (
	"bytes"
	"context"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"refuel/pkg/checkpoint"
)

func line(stream checkpoint.LogStream, text string) checkpoint.LogLine {
	return checkpoint.LogLine{Time: time.Now(), Stream: stream, Text: text}
}

func TestLogPrinter(t *testing.T) {
	a1 := checkpoint.LogSource{Attempt: 1, Instance: "i-a"}
	a3 := checkpoint.LogSource{Attempt: 3, Instance: "i-b"}
	part := line(checkpoint.Stdout, "progress 10%...")
	part.Partial = true
	var b bytes.Buffer
	p := &logPrinter{w: &b}
	p.print([]checkpoint.LogChunk{
		{LogSource: a1, Lines: []checkpoint.LogLine{line(checkpoint.AgentStream, "attempt 1 on i-a: running"), line(checkpoint.Stdout, "epoch 1"), part}},
	})
	// A follow's next read continues the same source without a header.
	p.print([]checkpoint.LogChunk{
		{LogSource: a1, Lines: []checkpoint.LogLine{line(checkpoint.Stdout, " 20%"), part, line(checkpoint.Stderr, "Traceback")}},
		{LogSource: a3, Missing: 2, Lines: []checkpoint.LogLine{line(checkpoint.Stderr, "late line")}},
	})
	want := `==> attempt 1 on i-a <==
[refuel] attempt 1 on i-a: running
epoch 1
progress 10%... 20%
progress 10%...
Traceback

==> attempt 3 on i-b <==
[refuel] ... 2 earlier segments of this output are no longer kept
late line
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !p.printed {
		t.Error("printed not set")
	}
}

func TestFollowLogsUntilTheRunEnds(t *testing.T) {
	ctx := context.Background()
	bucket := (&url.URL{Scheme: "file", Path: filepath.ToSlash(t.TempDir())}).String()
	store, err := checkpoint.Open(ctx, bucket, "job-1")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var seg []byte
	put := func(attempt, index int, text string) {
		t.Helper()
		seg = line(checkpoint.Stdout, text).Append(seg)
		if err := store.PutLogSegment(ctx, checkpoint.LogSegment{Attempt: attempt, Instance: "i", Index: index}, seg); err != nil {
			t.Fatal(err)
		}
	}
	put(1, 1, "one")
	polls := 0
	running := func(context.Context) (bool, error) {
		polls++
		switch polls {
		case 1:
			put(1, 1, "two")
			return true, nil
		default:
			// The run's last output lands as it ends.
			seg = nil
			put(2, 1, "three")
			return false, nil
		}
	}
	var b bytes.Buffer
	if err := followLogs(ctx, store.NewLogReader(), &logPrinter{w: &b}, time.Millisecond, running); err != nil {
		t.Fatal(err)
	}
	want := "==> attempt 1 on i <==\none\ntwo\n\n==> attempt 2 on i <==\nthree\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if polls != 2 {
		t.Errorf("asked whether the run runs %d times; want 2", polls)
	}
}

func TestDefaultStoreURL(t *testing.T) {
	t.Setenv("REFUEL_CHECKPOINT_URL", "")
	t.Setenv("REFUEL_DATA_DIR", "/srv/refuel")
	if got := defaultStoreURL(); got != "file:///srv/refuel/checkpoints" {
		t.Errorf("with REFUEL_DATA_DIR: %s", got)
	}
	t.Setenv("REFUEL_CHECKPOINT_URL", "s3://b/c")
	if got := defaultStoreURL(); got != "s3://b/c" {
		t.Errorf("with REFUEL_CHECKPOINT_URL: %s", got)
	}
}

// The trainer's progress lines are the agent's to read: logs leaves them
// out unless --progress asks for them.
func TestLogsHideProgressLines(t *testing.T) {
	src := checkpoint.LogSource{Attempt: 1, Instance: "i-a"}
	chunk := []checkpoint.LogChunk{{LogSource: src, Lines: []checkpoint.LogLine{
		line(checkpoint.Stdout, "REFUEL_PROGRESS step=0 total=1200"),
		line(checkpoint.Stdout, "epoch 1 loss 0.93"),
		line(checkpoint.Stdout, "REFUEL_PROGRESS step=1 total=1200"),
		line(checkpoint.Stdout, "REFUEL_PROGRESS step=2 total=1200"),
		line(checkpoint.Stderr, "REFUEL_PROGRESS on stderr is the trainer's own"),
		line(checkpoint.Stdout, "REFUEL_PROGRESSIVE is not a progress line"),
		line(checkpoint.Stdout, "epoch 2 loss 0.71"),
	}}}
	for name, progress := range map[string]bool{"logs-hide-progress": false, "logs-with-progress": true} {
		var b bytes.Buffer
		(&logPrinter{w: &b, progress: progress}).print(chunk)
		golden(t, name+".golden", b.String())
	}
}
