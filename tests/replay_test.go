package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"

	"refuel/workflows"
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
// REFUEL_RECORD_HISTORIES=testdata/histories go test ./tests -run 'TestDrill$|TestPauseAndResume|TestCancelReleasesInstances|TestPriorityPreemption|TestClockedRun|TestDeadlineRunGoesBackToSpot|TestDeadlineRunWaitsForSpot|TestServiceReplaces'.
// Histories recorded by earlier versions (*-before-*.json) stay, so runs
// started before a versioned change keep replaying.
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
			r, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			history, err := client.HistoryFromJSON(r, client.HistoryJSONOptions{})
			if err != nil {
				t.Fatal(err)
			}
			replayer := worker.NewWorkflowReplayer()
			workflows.New().Register(replayer)
			// Workflows that talk to each other compare ids, so the
			// replay runs under the recorded workflow's own.
			id := recordedIDs[strings.TrimSuffix(filepath.Base(f), ".json")]
			opts := worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: id}}
			if err := replayer.ReplayWorkflowHistoryWithOptions(nil, history, opts); err != nil {
				t.Fatalf("replay of %s: %v", f, err)
			}
		})
	}
}

// recordedIDs are the workflow ids the histories were recorded under.
var recordedIDs = map[string]string{
	"capacity-pool":                                   workflows.PoolWorkflowID,
	"inference-service":                               "chat",
	"training-run-pool-yield":                         "low",
	"training-run-market-time":                        "clocked",
	"training-run-back-to-spot":                       "back-to-spot-1",
	"inference-service-replica-lost":                  "chat-spot",
	"training-run-wait-for-spot":                      "wait-for-spot-1",
	"training-run-wait-for-spot-before-stock-history": "wait-for-spot-1",
	"training-run-back-to-spot-before-stock-history":  "back-to-spot-1",
	"inference-service-before-options":                "chat",
	"inference-service-replica-lost-before-options":   "chat-spot",
	"training-run-pool-yield-before-options":          "low",
	"training-run-market-time-before-options":         "clocked",
	"training-run-back-to-spot-before-options":        "back-to-spot-1",
	"training-run-wait-for-spot-before-options":       "wait-for-spot-1",
	"training-run-cancel":                             "cancel-1",
}
