package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stockedTrace writes a trace in stock at every one of its 40 ticks.
func stockedTrace(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(`{"metadata": {"gap_seconds": 600}, "data": [`+strings.Repeat("1, ", 39)+`1]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A market whose zones come from EC2 and Compute Engine replays as one:
// each placement names its offering cloud first, a move between the
// clouds is priced as one between regions and counted apart.
func TestSimNamesTheCloudOfEachPlacement(t *testing.T) {
	aws := simTrace(t, "us-west-2a_v100_1.json") // out of stock at ticks 10-14, 25-29
	awsEast := simTrace(t, "us-east-1a_v100_1.json")
	gce := stockedTrace(t, "us-central1-a_h100_1.json")
	other := simTrace(t, "za_v100_1.json")
	for name, tc := range map[string]struct {
		args []string
		// offerings are the keys placements may name; clouds those that
		// must be held.
		offerings, clouds []string
		cloudMoves        bool
		egressPerMove     float64
	}{
		"aws and gce, priced": {
			args:      []string{"--trace", aws, "--trace", gce, "--prices", "embedded", "--checkpoint-gb", "50"},
			offerings: []string{"aws/p3.2xlarge/us-west-2a/", "gce/a3-highgpu-1g/us-central1-a/"}, clouds: []string{"aws", "gce"},
			cloudMoves: true, egressPerMove: 1,
		},
		"aws and gce at one price": {
			args:      []string{"--trace", aws, "--trace", gce},
			offerings: []string{"aws/p3.2xlarge/us-west-2a/", "gce/a3-highgpu-1g/us-central1-a/"}, clouds: []string{"aws", "gce"},
			cloudMoves: true,
		},
		"aws in two regions": {
			args:      []string{"--trace", aws, "--trace", awsEast, "--prices", "embedded", "--checkpoint-gb", "50"},
			offerings: []string{"aws/p3.2xlarge/us-west-2a/", "aws/p3.2xlarge/us-east-1a/"}, clouds: []string{"aws"},
			egressPerMove: 1,
		},
		"a zone of no public cloud": {
			args:      []string{"--trace", other},
			offerings: []string{"sim/p3.2xlarge/za/"}, clouds: []string{"sim"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			rows := simJSON(t, append(append(tc.args, "--policy", "greedy", "--starts", "1"), simJob...)...)
			if len(rows) != 2 {
				t.Fatalf("got %d rows, want a window and its summary", len(rows))
			}
			row, sum := rows[0], rows[1]
			held := map[string]bool{}
			places, _ := row["placements"].([]any)
			if len(places) == 0 {
				t.Fatalf("no placements in %v", row)
			}
			for _, p := range places {
				key, _ := p.(map[string]any)["offering"].(string)
				if !strings.HasSuffix(key, "/spot") && !strings.HasSuffix(key, "/on-demand") || !hasAnyPrefix(key, tc.offerings) {
					t.Errorf("placement on %q; want one of %v, then its market", key, tc.offerings)
				}
				cloud, _, _ := strings.Cut(key, "/")
				held[cloud] = true
			}
			for _, c := range tc.clouds {
				if !held[c] {
					t.Errorf("never held %s: %v", c, places)
				}
			}
			moves, transfers := row["cloud_moves"].(float64), row["transfers"].(float64)
			if tc.cloudMoves != (moves > 0) || moves > transfers {
				t.Errorf("%v moves between clouds of %v transfers; want some: %v", moves, transfers, tc.cloudMoves)
			}
			if egress := row["egress_usd"].(float64); egress != transfers*tc.egressPerMove {
				t.Errorf("egress $%v for %v transfers; want $%v each", egress, transfers, tc.egressPerMove)
			}
			if sum["cloud_moves"] != moves {
				t.Errorf("the summary counts %v moves between clouds; its window %v", sum["cloud_moves"], moves)
			}
		})
	}
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
