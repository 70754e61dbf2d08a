package tests

import (
	"os"
	"path/filepath"
	"testing"

	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/proto"

	"refuel/controlplane"
)

// protoJSON encodes a history event the way `temporal workflow show
// --output json` does, so recorded files stay readable by both.
func protoJSON(m proto.Message) ([]byte, error) {
	return temporalproto.CustomJSONMarshalOptions{}.Marshal(m)
}

// TestReplayRecordedHistories replays every recorded history against the
// current workflow code: a change that would break running workflows
// (a non-deterministic edit) fails here. Record them anew, when a change
// is meant to be incompatible and versioned, with
// REFUEL_RECORD_HISTORIES=testdata/histories go test ./tests -run 'TestDrill|TestPauseAndResume'.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob("testdata/histories/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recorded histories under testdata/histories")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if _, err := os.Stat(f); err != nil {
				t.Fatal(err)
			}
			r := worker.NewWorkflowReplayer()
			controlplane.RegisterWorkflows(r)
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay of %s: %v", f, err)
			}
		})
	}
}
