package policy

import (
	"testing"
	"time"
)

// A Decider keeps the outlooks its latest decision used, not the ones of
// models refitted since: each may be tens of megabytes.
func TestDeciderKeepsOnlyTheOutlooksInUse(t *testing.T) {
	var d Decider
	s := state(10, 60, None)
	one := market(true, false)
	one.Zones = one.Zones[:1]
	d.refuel(s, one)
	if len(d.outlooks) != 1 {
		t.Fatalf("after a one-zone decision: %d outlooks kept; want 1", len(d.outlooks))
	}
	first := d.outlooks[0]
	for range 40 { // enough stretches to refit the zone's model
		one.Zones[0].History.Observe(true, 10*time.Minute)
		one.Zones[0].History.Observe(false, 30*time.Minute)
	}
	d.refuel(s, one)
	if len(d.outlooks) != 1 || d.outlooks[0] == first {
		t.Fatalf("after the refit: %d outlooks, the first kept: %v; want only the new one", len(d.outlooks), d.outlooks[0] == first)
	}
	two := market(true, true) // two zones, no roaming history: one outlook per zone's model
	two.Zones[1].History = one.Zones[0].History
	d.refuel(s, two)
	if len(d.outlooks) != 2 {
		t.Errorf("after a two-zone decision: %d outlooks kept; want 2", len(d.outlooks))
	}
}

// Stretches seen in part count their time at risk: a zone whose spot
// instances were given back after hours, never preempted, fits as stock
// that lasts, though no stretch in stock was seen to end.
func TestSeenStretchesCountTheirTimeAtRisk(t *testing.T) {
	var held, lost Availability
	for range 10 {
		held.Seen(true, 6*time.Hour, false)
		lost.Seen(true, 20*time.Minute, true)
	}
	h, l := fitStock(held), fitStock(lost)
	if h.end[1][1] >= l.end[1][1] || h.end[1][2] >= l.end[1][2] {
		t.Errorf("in-stock end rates: held %v, preempted %v; want the held zone's lower", h.end[1], l.end[1])
	}
	if held.In.Count != 0 || lost.In.Count != 10 || held.FitIn != held.In {
		t.Errorf("counts: held %d, lost %d; want 0 and 10, and the fit taken at once", held.In.Count, lost.In.Count)
	}
}
