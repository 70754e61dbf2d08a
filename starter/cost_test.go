package main

import (
	"bytes"
	"strings"
	"testing"

	"refuel/jobs"
	"refuel/pkg/cost"
)

// starter cost names the hours warm-pool instances spent stopped, in the
// table and in the JSON, beside the fields it always had.
func TestCostShowsVolumeHours(t *testing.T) {
	rep := jobs.CostReport{
		Jobs:   []jobs.JobCost{{ID: "chat", Kind: "service", Team: "serving", State: "running", CostUSD: 3.1, Cost: cost.Breakdown{Hours: 1, VolumeHours: 2.5, VolumeUSD: 0.055}}},
		Rollup: []cost.Row{{Team: "serving", Pool: "aws", Jobs: 1, Hours: 1, USD: 3.1, VolumeHours: 2.5}},
	}
	cases := map[string]struct {
		json bool
		want []string
	}{
		"table": {false, []string{"VOLUME H", "2.500"}},
		"json":  {true, []string{`"volume_hours":2.5`, `"volume_usd":0.055`, `"cost_usd":3.1`, `"hours":1`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := printCost(&out, rep, tc.json); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if strings.Count(out.String(), w) < 1 {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if !tc.json && strings.Count(out.String(), "2.500") != 2 {
				t.Errorf("volume hours on %d lines; want the job's and the rollup row's:\n%s", strings.Count(out.String(), "2.500"), out.String())
			}
		})
	}
}
