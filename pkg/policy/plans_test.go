package policy

import (
	"sync"
	"testing"
	"time"
)

// Plans never change a decision: deciding with a worker's shared plans
// answers what a Decider of one's own answers, over runs at every point
// of their slack.
func TestPlansDecideAsAnyDecider(t *testing.T) {
	plans := NewPlans(1 << 30)
	shared := plans.Decider()
	for _, done := range []float64{10, 47} {
		for _, left := range []float64{49, 60} {
			for _, cur := range []Choice{None, odA} {
				for _, m := range []Market{market(true, true), market(false, false)} {
					s := state(done, left, cur)
					if got, want := shared.refuel(s, m), new(Decider).refuel(s, m); got != want {
						t.Errorf("done %vh, %vh left, holding %v: shared plans chose %v, a Decider %v", done, left, cur, got, want)
					}
				}
				s := state(done, left, cur)
				if got, want := shared.WaitForSpot(s, market(false, false)), WaitForSpot(s, market(false, false)); got != want {
					t.Errorf("done %vh, %vh left: wait for spot %v with plans, %v without", done, left, got, want)
				}
			}
		}
	}
	if st := plans.Stats(); st.Hits == 0 || st.Misses == 0 {
		t.Errorf("stats %+v; want outlooks both solved and found again", st)
	}
}

// Runs deciding at once on the same stock solve its outlook once.
func TestPlansSolveEachOutlookOnce(t *testing.T) {
	plans := NewPlans(1 << 30)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() { plans.Decider().WaitForSpot(state(10, 60, None), market(false, false)) })
	}
	wg.Wait()
	st := plans.Stats()
	if st.Misses != 1 || st.Shared+st.Hits < 31 {
		t.Errorf("stats %+v; want one outlook solved, and found or waited for by the 31 others", st)
	}
}

// The bound holds: the least recently used outlooks go, and one larger
// than the bound is used but not kept.
func TestPlansKeepWithinTheirBound(t *testing.T) {
	one := NewPlans(1 << 30)
	one.Decider().WaitForSpot(state(10, 60, None), market(false, false))
	size := one.Stats().Bytes
	if size <= 0 {
		t.Fatalf("an outlook of %d bytes", size)
	}
	plans := NewPlans(2*size + size/2) // two of that size fit, not three
	d := plans.Decider()
	for i := range 6 {
		// Another restart overhead is another outlook of about the size.
		s := state(10, 60, None)
		s.RestartOverhead = time.Duration(12+i%3) * time.Minute
		d.WaitForSpot(s, market(false, false))
	}
	st := plans.Stats()
	if st.Bytes > 2*size+size/2 || st.Outlooks > 2 || st.Evicted == 0 {
		t.Errorf("stats %+v; want at most 2 outlooks of %d bytes kept, the others evicted", st, size)
	}
	tiny := NewPlans(size / 2)
	if tiny.Decider().WaitForSpot(state(10, 60, None), market(false, false)) != WaitForSpot(state(10, 60, None), market(false, false)) {
		t.Error("an outlook too large to keep changed the decision")
	}
	if st := tiny.Stats(); st.Outlooks != 0 || st.Bytes != 0 {
		t.Errorf("stats %+v; want nothing kept past a bound smaller than an outlook", st)
	}
}
