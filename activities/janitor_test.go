package activities

import (
	"encoding/json"
	"testing"
)

func TestStatusHolds(t *testing.T) {
	cases := map[string]struct {
		status string
		want   bool
	}{
		"a run's instance":       {`{"state":"running","instance":{"id":"i-1"}}`, true},
		"a run without it":       {`{"state":"running","instance":{"id":"i-2"}}`, false},
		"a run holding nothing":  {`{"state":"waiting","instance":null}`, false},
		"a service replica's":    {`{"replicas":[{"id":"s/r1","instance":{"id":"i-9"}},{"id":"s/r2","instance":{"id":"i-1"}}]}`, true},
		"a service's queued one": {`{"replicas":[{"id":"s/r1","instance":null}]}`, false},
		"not a status":           {`"busy"`, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := statusHolds(json.RawMessage(tc.status), "i-1"); got != tc.want {
				t.Errorf("holds i-1: %v; want %v", got, tc.want)
			}
		})
	}
}
