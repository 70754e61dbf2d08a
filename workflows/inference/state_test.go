package inference

import (
	"encoding/json"
	"testing"
)

func TestServiceStateCarriedByEarlierRuns(t *testing.T) {
	t.Parallel()
	carried := `{"next_attempt":7,"ledger":{"segments":[]},"replicas":[` +
		`{"id":"svc/r1","state":"ready","instance":{"id":"i-1","task_queue":"q"},"acquired_at":"2026-11-30T10:00:00Z"},` +
		`{"id":"svc/r2","state":"starting"}]}`
	var s ServiceState
	if err := json.Unmarshal([]byte(carried), &s); err != nil {
		t.Fatal(err)
	}
	if s.Attempts != 7 || len(s.Replicas) != 2 {
		t.Fatalf("read attempts %d and %d replicas; want 7 and 2", s.Attempts, len(s.Replicas))
	}
	if r := s.Replicas[0]; r.Lease == nil || r.Instance.ID != "i-1" || r.Since.IsZero() {
		t.Errorf("replica r1 read as %+v; want its instance i-1 leased since 10:00", r)
	}
	if s.Replicas[1].Lease != nil {
		t.Errorf("replica r2 read with lease %+v; want none", s.Replicas[1].Lease)
	}
}
