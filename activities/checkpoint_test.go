package activities

import (
	"context"
	"testing"

	"refuel/pkg/checkpoint"
)

// A checkpoint's reference carries its size, which a run counts when it
// weighs moving the checkpoint to another region.
func TestCheckpointRefCarriesItsSize(t *testing.T) {
	s, err := checkpoint.Open(context.Background(), "mem://refs", "job-1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := checkpoint.Manifest{JobID: "job-1", Step: 7, Files: []checkpoint.File{{Path: "model.bin", Size: 3 << 20}, {Path: "optimizer.bin", Size: 5 << 20}}}
	if got := refOf(s, m); got.Bytes != 8<<20 || got.Step != 7 || got.URL != s.StepURL(7) {
		t.Errorf("ref %+v; want step 7 at its URL, %d bytes", got, 8<<20)
	}
}
