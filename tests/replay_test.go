package tests

import (
	"os"
	"path/filepath"
	"testing"

	"refuel/workflows/registry"

	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"
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
// REFUEL_RECORD_HISTORIES=testdata/histories go test ./tests -run 'TestDrill$|TestPauseAndResume|TestCancelReleasesInstances|TestPriorityPreemption|TestClockedRun|TestClockedGang|TestClockedElasticGang|TestDeadlineRunGoesBackToSpot|TestDeadlineRunWaitsForSpot|TestServiceReplaces|TestAgentKilledMidTraining|TestGangDrill$|TestElasticGangDrill|TestDeadlineGangGoesBackToSpot|TestJoinedBaseMachines|TestBudgetHoldsEndToEnd|TestSubmittedRunCarriesItsEstimate|TestServiceServesThroughItsBalancer|TestServiceWarmPoolIsStopped|TestServingWarmPoolIsStoppedAndPromoted'.
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
			registry.New().Register(replayer)
			// Workflows that talk to each other compare ids, and a run
			// checks its spec's id against its own: the replay runs under
			// the recorded workflow's id.
			id := history.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowId()
			opts := worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: id}}
			if err := replayer.ReplayWorkflowHistoryWithOptions(nil, history, opts); err != nil {
				t.Fatalf("replay of %s: %v", f, err)
			}
		})
	}
}
