package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"refuel/pkg/policy"
)

// The authors' figures carried in: every point of Figure 10a (six zones,
// D/W 1.05 to 2.0) and 10b (1 to 13 zones at D/W 1.2), each with its
// published SkyNomad above its optimum and its six windows.
func TestSkyNomadFiguresAreEveryPoint(t *testing.T) {
	points, err := readFigures()
	if err != nil {
		t.Fatal(err)
	}
	var a, b int
	for _, p := range points {
		switch {
		case p.figure == "10a" && len(p.zones) == 6:
			a++
		case p.figure == "10b" && p.ratio == 1.2 && len(p.zones) == b+1:
			b++
		default:
			t.Errorf("unexpected point: figure %s, D/W %g, %d zones", p.figure, p.ratio, len(p.zones))
		}
		if p.theirs < p.optimum || p.optimum <= 0 {
			t.Errorf("figure %s, D/W %g, %d zones: SkyNomad $%.2f under its optimum $%.2f", p.figure, p.ratio, len(p.zones), p.theirs, p.optimum)
		}
		// The windows carried in are the ones the published means
		// average.
		var theirs, optimum float64
		for _, w := range p.windows {
			theirs += w.theirs / skyNomadWindows
			optimum += w.optimum / skyNomadWindows
		}
		if math.Abs(theirs-p.theirs) > 0.01 || math.Abs(optimum-p.optimum) > 0.01 {
			t.Errorf("figure %s, D/W %g, %d zones: windows average SkyNomad $%.3f and optimum $%.3f, the means say $%.2f and $%.2f",
				p.figure, p.ratio, len(p.zones), theirs, optimum, p.theirs, p.optimum)
		}
	}
	if a != 7 || b != 13 {
		t.Errorf("%d points of Figure 10a and %d of 10b, want 7 and 13", a, b)
	}
}

// A prices.csv that cannot price a zone is an error naming the file and
// what it lacks.
func TestSkyNomadBenchNamesWhatItCannotPrice(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prices.csv"), []byte("zone,region,spot_usd_per_hour\nus-east4-a,us-east4,14.85\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	err := runSimBench([]string{"--skynomad", dir}, &out, &errs)
	if err == nil || !strings.Contains(err.Error(), "has no column on_demand_usd_per_hour") || !strings.Contains(err.Error(), "prices.csv") {
		t.Errorf("got %v, want an error naming prices.csv and its missing column", err)
	}
}

// A point where refuel is behind the authors' SkyNomad is printed window
// by window, refuel's and the optimum's dollars beside theirs, so that
// the window that holds the loss shows.
func TestSkyNomadBehindIsPrintedWindowByWindow(t *testing.T) {
	p := &figurePoint{figure: "10b", ratio: 1.2, zones: []string{"a", "b"}, theirs: 105, optimum: 100,
		probe: map[policy.Name]float64{}, met: map[policy.Name]int{policy.Refuel: skyNomadWindows}}
	for w := range p.windows {
		refuel := 100.0
		if w == 2 {
			refuel = 190 // the window that holds the loss
		}
		p.windows[w] = figureWindow{cost: map[policy.Name]float64{policy.Refuel: refuel, policy.SkyNomad: 100, policy.Optimal: 100}, theirs: 105, optimum: 100}
	}
	var out bytes.Buffer
	printSkyNomad(&out, []*figurePoint{p})
	if strings.Contains(out.String(), "refuel known") || strings.Contains(out.String(), "known in advance") {
		t.Errorf("refuel with known statistics printed where it was not replayed:\n%s", out.String())
	}
	// With --known-statistics, a column, and a line under each point
	// behind: whether better estimation alone would close it.
	for w := range p.windows {
		p.windows[w].known = 103
	}
	out.Reset()
	printSkyNomad(&out, []*figurePoint{p})
	for _, want := range []string{
		"refuel known",
		"with each window's own statistics known in advance: refuel 1.030",
		"refuel at or below the authors' SkyNomad at every point: NOT met",
		"10b 2 regions D/W 1.20: refuel 1.150, theirs 1.050",
		"window 2: refuel $190.00, their SkyNomad $105.00 (optimum $100.00, theirs $100.00)",
		"window 5: refuel $100.00, their SkyNomad $105.00",
		"(in dollars, refuel pays at most their SkyNomad's mean at 0 of 1 points)",
		// skynomad off theirs by 0.05, and in dollars by 4.8 %.
		"10b 2 regions D/W 1.20: skynomad 1.000, theirs 1.050; per window skynomad $100.00, their SkyNomad $105.00 (-4.8%; optimum $100.00, theirs $100.00)",
		"(in dollars, refuel's skynomad pays within 2% of their SkyNomad's mean at 0 of 1 points)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
}
