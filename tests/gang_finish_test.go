package tests

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"refuel/workflows/training"

	"refuel/jobs"
	"refuel/workflows"
)

// lastRankScript is a gang's trainer whose rank 0 writes the job's final
// checkpoint a while after the other rank is done, as a data-parallel
// trainer's does: every rank takes the last step together, then rank 0
// saves the model (seconds, for a large one) and the others have nothing
// left to do. It keeps going on SIGTERM, as the contract asks, and a rank
// that finds the final step restored is done at once.
const lastRankScript = `trap '' TERM
total=10
if [ -d "$REFUEL_CHECKPOINT_DIR/step-$total" ]; then
	echo "REFUEL_DONE step=$total total=$total"
	exit 0
fi
echo "REFUEL_PROGRESS step=0 total=$total"
if [ "$REFUEL_NODE_RANK" = 0 ]; then
	sleep 3
	mkdir "$REFUEL_CHECKPOINT_DIR/.tmp-$total"
	echo "$total" > "$REFUEL_CHECKPOINT_DIR/.tmp-$total/state"
	mv "$REFUEL_CHECKPOINT_DIR/.tmp-$total" "$REFUEL_CHECKPOINT_DIR/step-$total"
fi
echo "REFUEL_DONE step=$total total=$total"
`

// TestGangCompletesWhenRankZeroFinishesLast: a gang whose rank 1 is done
// before rank 0 has written the job's final checkpoint completes on the
// gang it has, in one attempt: rank 1's end is no reason to stop rank 0,
// whose checkpoint is the job's.
func TestGangCompletesWhenRankZeroFinishesLast(t *testing.T) {
	parallel(t)
	workdir := t.TempDir()
	if err := os.WriteFile(filepath.Join(workdir, "train.sh"), []byte(lastRankScript), 0o600); err != nil {
		t.Fatal(err)
	}
	js := quickJob("gang-rank-zero-last", "flexible")
	js.Resources.Nodes = 2
	js.Command, js.Workdir = []string{"/bin/sh", "train.sh"}, workdir
	s := startStack(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := jobs.Submit(ctx, s.Client, js)
	if err != nil {
		t.Fatal(err)
	}
	var final training.Status
	if err := run.Get(ctx, &final); err != nil {
		t.Fatal(err)
	}
	var paid []string
	for _, seg := range final.Ledger.Segments {
		if !slices.Contains(paid, seg.InstanceID) {
			paid = append(paid, seg.InstanceID)
		}
	}
	t.Logf("final %s at step %d/%d, attempt %d, instances %v", final.State, final.Step, final.TotalSteps, final.Attempt, paid)
	if final.State != workflows.StateCompleted || final.LastCheckpoint == nil || final.LastCheckpoint.Step != 10 {
		t.Fatalf("final status %+v; want completed with rank 0's checkpoint of step 10", final)
	}
	if len(paid) != 2 {
		t.Errorf("instances paid for %v; want the one gang of 2 that trained: rank 0 was stopped as rank 1 ended, and its completion taken for a pause", paid)
	}
}
