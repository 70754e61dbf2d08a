package cost

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRollup(t *testing.T) {
	vision := JobCost{Job: "resnet", Team: "vision", At: at(10), Ledger: build(
		open("i-1", "burst-aws", "spot", 1, 0), closeAt("i-1", 2),
		open("i-2", "base", "base", 0.5, 2), closeAt("i-2", 4),
		open("i-3", "burst-aws", "on-demand", 3, 4),
	)}
	vision2 := JobCost{Job: "vit", Team: "vision", At: at(10), Ledger: build(
		open("i-4", "burst-aws", "spot", 1.5, 8),
	)}
	speech := JobCost{Job: "whisper", Team: "speech", At: at(3), Ledger: build(
		open("i-5", "base", "base", 0.5, 0), lost("i-5", 3600),
	)}
	idle := JobCost{Job: "queued", Team: "speech", At: at(3)}
	tests := map[string]struct {
		items []JobCost
		want  []Row
	}{
		"none": {want: []Row{}},
		"a job with no segments": {
			items: []JobCost{idle},
			want:  []Row{},
		},
		"one job, two pools": {
			items: []JobCost{vision},
			want: []Row{
				{Team: "vision", Pool: "base", Jobs: 1, Hours: 2, USD: 1},
				{Team: "vision", Pool: "burst-aws", Jobs: 1, Hours: 8, USD: 20},
			},
		},
		"teams and pools": {
			items: []JobCost{vision2, speech, idle, vision},
			want: []Row{
				{Team: "speech", Pool: "base", Jobs: 1, Hours: 3, USD: 1.5, LostWorkUSD: 0.5},
				{Team: "vision", Pool: "base", Jobs: 1, Hours: 2, USD: 1},
				{Team: "vision", Pool: "burst-aws", Jobs: 2, Hours: 10, USD: 23},
			},
		},
		// $8 over 4 hours: $2 an hour. The hour lost was done on spot in
		// burst; the half hour of recovery was paid on base.
		"lost work and recovery go to the pool they happened on": {
			items: []JobCost{{Job: "llm", Team: "nlp", At: at(4), Ledger: build(
				open("i-1", "burst", "spot", 1, 0), closeAt("i-1", 2), lost("i-1", 3600),
				open("i-2", "base", "base", 3, 2), recovery("i-2", 1800),
			)}},
			want: []Row{
				{Team: "nlp", Pool: "base", Jobs: 1, Hours: 2, USD: 6, RecoveryUSD: 1},
				{Team: "nlp", Pool: "burst", Jobs: 1, Hours: 2, USD: 2, LostWorkUSD: 2},
			},
		},
		"no team": {
			items: []JobCost{{Job: "x", At: at(1), Ledger: build(open("i-9", "p", "spot", 2, 0))}},
			want:  []Row{{Pool: "p", Jobs: 1, Hours: 1, USD: 2}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Rollup(tc.items)
			if diff := cmp.Diff(got, tc.want, approx); diff != "" {
				t.Errorf("Rollup, got(-), want(+):\n%s", diff)
			}
			reversed := slices.Clone(tc.items)
			slices.Reverse(reversed)
			if diff := cmp.Diff(Rollup(reversed), got); diff != "" {
				t.Errorf("Rollup depends on the order of items, reversed(-), given(+):\n%s", diff)
			}
		})
	}
}
