package serving

import "testing"

// A report's missed requests are those not answered within the SLO,
// errors among them: what staffing for slo.latency steers by.
func TestMissedAreTheRequestsNotWithinTheSLO(t *testing.T) {
	for _, tc := range []struct {
		t    Traffic
		want int
	}{
		{Traffic{Requests: 200, SLOShare: 0.99}, 2},
		{Traffic{Requests: 3, Errors: 1, SLOShare: 2.0 / 3}, 1},
		{Traffic{Requests: 0, SLOShare: 1}, 0},
		{Traffic{Requests: 7, SLOShare: 1}, 0},
	} {
		if got := tc.t.Missed(); got != tc.want {
			t.Errorf("%+v.Missed() = %d; want %d", tc.t, got, tc.want)
		}
	}
}
