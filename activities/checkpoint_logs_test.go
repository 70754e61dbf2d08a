package activities

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"refuel/pkg/policy"
)

// The pools' checkpoint logs survive a restart, and a damaged file says
// how to recover rather than being silently overwritten.
func TestCheckpointLogsPersist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logs", "checkpoint-logs.json")
	a := &CheckpointLogs{Path: path}
	if err := a.Load(); err != nil {
		t.Fatal(err)
	}
	lesson := policy.CheckpointLog{Held: time.Hour, Preemptions: 1, Writes: 2, WriteTime: 3 * time.Second}
	for range 2 {
		if err := a.Add("sim/p3.2xlarge/us-west-2a/spot", lesson); err != nil {
			t.Fatal(err)
		}
	}
	b := &CheckpointLogs{Path: path}
	if err := b.Load(); err != nil {
		t.Fatal(err)
	}
	if got, want := b.Get("sim/p3.2xlarge/us-west-2a/spot"), lesson.Add(lesson); got != want {
		t.Errorf("reloaded %+v; want %+v", got, want)
	}
	if got := b.Get("sim/p3.2xlarge/us-west-2b/spot"); got != (policy.CheckpointLog{}) {
		t.Errorf("a pool never used has log %+v", got)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := (&CheckpointLogs{Path: path}).Load(); err == nil || !strings.Contains(err.Error(), "delete it") {
		t.Errorf("damaged file: %v; want an error saying how to start afresh", err)
	}
}
