package policy

import (
	"slices"
	"testing"
	"time"

	"refuel/pkg/capacity"
)

func TestProbesTryZonesLastSeenOutOnceAnHour(t *testing.T) {
	seen := func(in bool) Availability {
		var a Availability
		a.Observe(in, 30*time.Minute)
		return a
	}
	m := Market{Step: 10 * time.Minute, Zones: []Zone{
		{Name: "a", History: seen(false)},
		{Name: "b", History: seen(true)},
		{Name: "c"}, // never seen
		{Name: "d", History: seen(false)},
	}}
	held := Choice{Market: capacity.Spot, Zone: "d"}
	for name, tc := range map[string]struct {
		elapsed time.Duration
		held    Choice
		want    []string
	}{
		"on the hour: out and unseen, not the one held": {elapsed: 2 * time.Hour, held: held, want: []string{"a", "c"}},
		"within the step after the hour":                {elapsed: time.Hour + 9*time.Minute, held: held, want: []string{"a", "c"}},
		"between hours":                                 {elapsed: time.Hour + 10*time.Minute, held: held},
		"on-demand in the zone: its spot is tried too":  {elapsed: 0, held: Choice{Market: capacity.OnDemand, Zone: "d"}, want: []string{"a", "c", "d"}},
	} {
		t.Run(name, func(t *testing.T) {
			got := Probes(State{Elapsed: tc.elapsed}, m, tc.held)
			if !slices.Equal(got, tc.want) {
				t.Errorf("probes %v, want %v", got, tc.want)
			}
		})
	}
}
