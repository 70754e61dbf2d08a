package trace

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestGangReadsPointsAsCountsOrAsEveryNodeAlike(t *testing.T) {
	counts := []int{0, 1, 2, 3, 4, 2, 0, 5}
	cases := map[string]struct {
		points  []int
		nodes   int
		want    []bool
		oneNode bool
		peak    int
	}{
		"counts, one node: any stock": {counts, 1, []bool{false, true, true, true, true, true, false, true}, false, 5},
		"counts, no nodes is one":     {counts, 0, []bool{false, true, true, true, true, true, false, true}, false, 5},
		"counts, a gang of 3":         {counts, 3, []bool{false, false, false, true, true, false, false, true}, false, 5},
		"counts, a gang above peak":   {counts, 6, []bool{false, false, false, false, false, false, false, false}, false, 5},
		"0/1, one node":               {[]int{1, 0, 1, 1}, 1, []bool{true, false, true, true}, true, 1},
		"0/1 stands for every node":   {[]int{1, 0, 1, 1}, 4, []bool{true, false, true, true}, true, 1},
		"never in stock":              {[]int{0, 0}, 2, []bool{false, false}, true, 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tr := &Trace{Gap: time.Minute, Points: tc.points}
			got := []any{tr.Gang(tc.nodes), tr.OneNode(), tr.Peak()}
			if d := cmp.Diff(got, []any{tc.want, tc.oneNode, tc.peak}); d != "" {
				t.Errorf("got(-), want(+):\n%s", d)
			}
			for i, p := range tc.points {
				if got := GangInStock(p, tc.nodes, tc.oneNode); got != tc.want[i] {
					t.Errorf("GangInStock(%d, %d, %v) = %v; Gang says %v", p, tc.nodes, tc.oneNode, got, tc.want[i])
				}
				if tc.nodes <= 1 && tr.Gang(1)[i] != tr.Available(i) {
					t.Errorf("tick %d: a gang of one sees %v, Available %v", i, tr.Gang(1)[i], tr.Available(i))
				}
			}
		})
	}
}

func TestCoarsenKeepsStockThatLastedThroughATick(t *testing.T) {
	tr := &Trace{Gap: 30 * time.Second, Points: []int{1, 1, 1, 1, 0, 1, 4, 3, 4, 2}}
	got := tr.Coarsen(time.Minute + 10*time.Second) // three points a tick
	if got.Gap != 90*time.Second || !cmp.Equal(got.Points, []int{1, 0, 3}) {
		t.Errorf("coarsened to %s %v; want 1m30s [1 0 3]", got.Gap, got.Points)
	}
	if tr.Coarsen(30*time.Second) != tr || len(tr.Points) != 10 {
		t.Error("a trace as coarse as asked was copied or changed")
	}
}
