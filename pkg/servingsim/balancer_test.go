package servingsim

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBalancer drives the balancer event by event and checks each
// request's outcome against a hand-worked timeline.
func TestBalancer(t *testing.T) {
	type arrival struct {
		at, firstToken, hold float64
	}
	tests := []struct {
		name     string
		slots    int
		arrivals []arrival
		// slotsAt changes the slots at a time, before the arrivals after it.
		slotsAt           map[float64]int
		latencies         []float64
		met, failed, busy int
		busySecs          float64
	}{
		{
			name: "a free slot answers at once", slots: 2,
			arrivals:  []arrival{{0, 0.5, 4}, {1, 0.5, 4}},
			latencies: []float64{0.5, 0.5}, met: 2, busySecs: 8,
		},
		{
			name: "the third waits for the first slot to free", slots: 2,
			arrivals: []arrival{{0, 0.5, 4}, {1, 0.5, 6}, {2, 0.5, 1}},
			// The third waits from 2 s to 4 s: 2 s + 0.5 s.
			latencies: []float64{0.5, 0.5, 2.5}, met: 3, busySecs: 11,
		},
		{
			name: "a wait past the SLO is answered but not met", slots: 1,
			arrivals:  []arrival{{0, 0, 10}, {0, 1, 1}},
			latencies: []float64{0, 11}, met: 1, busySecs: 11,
		},
		{
			name: "a wait past the queue timeout fails and takes no slot", slots: 1,
			arrivals: []arrival{{0, 0, 40}, {1, 0, 5}, {35, 0, 1}},
			// The second waits 39 s > 30 s: failed at the free slot of 40 s,
			// which the third (waiting 5 s) takes.
			latencies: []float64{0, 30, 5}, met: 2, failed: 1, busySecs: 41,
		},
		{
			name: "more slots start the queue at once", slots: 1,
			arrivals: []arrival{{0, 0, 10}, {1, 0, 10}, {2.5, 0, 1}},
			slotsAt:  map[float64]int{2: 2},
			// The second waits from 1 s until the slot added at 2 s.
			latencies: []float64{0, 1, 7.5}, met: 2, busySecs: 21,
		},
		{
			name: "fewer slots drain those in flight and start none", slots: 2,
			arrivals:  []arrival{{0, 0, 10}, {0, 0, 10}, {5, 0, 1}},
			slotsAt:   map[float64]int{1: 1},
			latencies: []float64{0, 0, 5}, met: 3, busySecs: 21,
		},
		{
			name: "no slot at all fails everything when drained", slots: 0,
			arrivals:  []arrival{{0, 0, 1}},
			latencies: []float64{30}, failed: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBalancer(5, 30)
			b.setSlots(tt.slots, 0)
			for _, a := range tt.arrivals {
				for at, n := range tt.slotsAt {
					if at <= a.at && at > b.last {
						b.setSlots(n, at)
					}
				}
				b.arrive(pending{arrived: a.at, firstToken: a.firstToken, hold: a.hold})
			}
			b.drain()
			b.advance(1000)
			if diff := cmp.Diff(b.latencies, tt.latencies); diff != "" {
				t.Errorf("latencies got(-), want(+):\n%s", diff)
			}
			if b.met != tt.met || b.failed != tt.failed || b.busy != tt.busy || b.busySecs != tt.busySecs {
				t.Errorf("met %d, failed %d, busy %d, busy slot-seconds %g; want %d, %d, %d, %g", b.met, b.failed, b.busy, b.busySecs, tt.met, tt.failed, tt.busy, tt.busySecs)
			}
		})
	}
}

func TestBalancerExpireLeavesOnlyLiveRequests(t *testing.T) {
	b := newBalancer(5, 30)
	for _, at := range []float64{0, 10, 20} {
		b.arrive(pending{arrived: at, hold: 1})
	}
	b.expire(35)
	if b.queued() != 2 || b.failed != 1 || b.missed != 1 {
		t.Errorf("%d queued, %d failed, %d missed at 35 s; want the request of 0 s failed, two queued", b.queued(), b.failed, b.missed)
	}
}
