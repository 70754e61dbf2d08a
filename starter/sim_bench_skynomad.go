package main

import (
	_ "embed"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"refuel/pkg/policy"
	"refuel/pkg/replay"
	"refuel/pkg/spec"
	"refuel/pkg/trace"
)

// skyNomadFigures are SkyNomad's published results on its authors'
// benchmark, point by point, with their source in the file's header.
//
//go:embed skynomad_figures.csv
var skyNomadFigures string

// The authors' job (their configs deadline_sensitivity and
// region_scaling): a 51.83 h deadline, work the deadline over the point's
// D/W, a 0.2 h restart, a 50 GB checkpoint at $0.02/GB between regions,
// replayed in 6 windows laid end to end from the trace's start.
const (
	skyNomadDeadline   = 3110 * time.Minute
	skyNomadRestart    = 12 * time.Minute
	skyNomadWindows    = 6
	skyNomadCheckpoint = 50
	skyNomadEgress     = 0.02
)

// skyNomadWindowFigures are the same results window by window, with
// their source in the file's header.
//
//go:embed skynomad_windows.csv
var skyNomadWindowFigures string

// skyNomadPolicies are replayed at every point of the figures.
var skyNomadPolicies = []policy.Name{policy.Optimal, policy.Refuel, policy.SkyNomad, policy.UniformProgress, policy.Greedy}

// figurePoint is one point of the authors' figures and its replays.
type figurePoint struct {
	figure  string
	ratio   float64 // D/W
	zones   []string
	theirs  float64 // their SkyNomad's mean cost, USD
	optimum float64 // their optimum's
	// Per policy, summed over the windows: deadlines met, and what
	// probing cost (included in cost).
	probe map[policy.Name]float64
	met   map[policy.Name]int
	// windows are the point's windows: what each policy cost in each,
	// and the authors' SkyNomad and optimum there.
	windows [skyNomadWindows]figureWindow
}

// figureWindow is one window of a point: cost in USD per policy, and the
// authors' published SkyNomad and optimum for it.
type figureWindow struct {
	cost            map[policy.Name]float64
	theirs, optimum float64
	// known is what refuel cost planning with the window's own stretch
	// statistics (--known-statistics); 0 when not replayed.
	known float64
}

// readFigures parses the embedded figures, each point with its windows.
func readFigures() ([]*figurePoint, error) {
	rows, err := readFigureTable(skyNomadFigures)
	if err != nil {
		return nil, fmt.Errorf("skynomad_figures.csv: %w", err)
	}
	var out []*figurePoint
	for _, r := range rows[1:] {
		p := &figurePoint{figure: r[0], zones: strings.Fields(r[5]),
			probe: map[policy.Name]float64{}, met: map[policy.Name]int{}}
		var errs [3]error
		p.ratio, errs[0] = strconv.ParseFloat(r[1], 64)
		p.theirs, errs[1] = strconv.ParseFloat(r[3], 64)
		p.optimum, errs[2] = strconv.ParseFloat(r[4], 64)
		for _, e := range errs {
			if e != nil {
				return nil, fmt.Errorf("skynomad_figures.csv: %w", e)
			}
		}
		for w := range p.windows {
			p.windows[w].cost = map[policy.Name]float64{}
		}
		out = append(out, p)
	}
	if err := readFigureWindows(out); err != nil {
		return nil, fmt.Errorf("skynomad_windows.csv: %w", err)
	}
	return out, nil
}

// cost is what policy pol cost over the point's windows, in USD.
func (p *figurePoint) cost(pol policy.Name) float64 {
	return p.sum(func(w figureWindow) float64 { return w.cost[pol] })
}

// known is what refuel cost over the point's windows planning with each
// window's own statistics (--known-statistics), in USD; 0 when not
// replayed.
func (p *figurePoint) known() float64 {
	return p.sum(func(w figureWindow) float64 { return w.known })
}

// sum is of over the point's windows.
func (p *figurePoint) sum(of func(figureWindow) float64) float64 {
	total := 0.0
	for _, w := range p.windows {
		total += of(w)
	}
	return total
}

// readFigureWindows fills in each point's windows from the embedded
// window figures; every window of every point must be there.
func readFigureWindows(points []*figurePoint) error {
	rows, err := readFigureTable(skyNomadWindowFigures)
	if err != nil {
		return err
	}
	seen := map[*figurePoint]int{}
	for n, r := range rows[1:] {
		var v [5]float64
		for i, f := range r[1:6] {
			if v[i], err = strconv.ParseFloat(f, 64); err != nil {
				return fmt.Errorf("line %d: %w", n+2, err)
			}
		}
		w := int(v[2])
		i := slices.IndexFunc(points, func(p *figurePoint) bool {
			return p.figure == r[0] && p.ratio == v[0] && len(p.zones) == int(v[1])
		})
		if i < 0 || w < 0 || w >= skyNomadWindows {
			return fmt.Errorf("line %d: no window %d of a point %s, D/W %g, %g regions", n+2, w, r[0], v[0], v[1])
		}
		points[i].windows[w].theirs, points[i].windows[w].optimum = v[3], v[4]
		seen[points[i]]++
	}
	for _, p := range points {
		if seen[p] != skyNomadWindows {
			return fmt.Errorf("%d windows of %s, D/W %g, %d regions, want %d", seen[p], p.figure, p.ratio, len(p.zones), skyNomadWindows)
		}
	}
	return nil
}

// readFigureTable reads an embedded CSV table, its # lines left out.
func readFigureTable(text string) ([][]string, error) {
	var body []string
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "#") && l != "" {
			body = append(body, l)
		}
	}
	return csv.NewReader(strings.NewReader(strings.Join(body, "\n"))).ReadAll()
}

// zonePrices are prices.csv of the authors' trace folder.
func zonePrices(dir string) (map[string]replay.ZonePrice, error) {
	return readZonePrices(filepath.Join(dir, "prices.csv"))
}

// readZonePrices reads a table of zone prices (CSV, a header naming
// zone, region, spot_usd_per_hour and on_demand_usd_per_hour, other
// columns ignored): each zone's region and its spot and on-demand USD
// per hour.
func readZonePrices(file string) (map[string]replay.ZonePrice, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(rows) < 2 {
		return nil, fmt.Errorf("%s prices no zone; give a header line zone,region,machine_type,gpus,spot_usd_per_hour,on_demand_usd_per_hour and a line per zone", file)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	for _, h := range []string{"zone", "region", "spot_usd_per_hour", "on_demand_usd_per_hour"} {
		if _, ok := col[h]; !ok {
			return nil, fmt.Errorf("%s has no column %s; its header must name zone, region, spot_usd_per_hour and on_demand_usd_per_hour", file, h)
		}
	}
	out := map[string]replay.ZonePrice{}
	for n, r := range rows[1:] {
		spot, err1 := strconv.ParseFloat(r[col["spot_usd_per_hour"]], 64)
		od, err2 := strconv.ParseFloat(r[col["on_demand_usd_per_hour"]], 64)
		if err1 != nil || err2 != nil || spot <= 0 || od <= 0 {
			return nil, fmt.Errorf("%s line %d: prices %q and %q are not positive USD per hour", file, n+2, r[col["spot_usd_per_hour"]], r[col["on_demand_usd_per_hour"]])
		}
		out[r[col["zone"]]] = replay.ZonePrice{Region: r[col["region"]], Spot: spot, OnDemand: od}
	}
	return out, nil
}

// skyNomadBench replays every point of the authors' Figures 10a and 10b
// on their trace (dir) with their job under refuel, refuel's skynomad,
// uniform progress, greedy and the optimum, and, if known, refuel
// planning with each window's own statistics; and prints them beside the
// authors' published SkyNomad and optimum.
func skyNomadBench(dir string, learns bool, rules int, known bool, stdout, stderr io.Writer) error {
	points, err := readFigures()
	if err != nil {
		return err
	}
	prices, err := zonePrices(dir)
	if err != nil {
		return &FlagError{"skynomad", err.Error(), "give the folder of the authors' trace, ../shared/traces/availability/16-node/gcp-10-04-2025"}
	}
	traces := map[string]*trace.Trace{}
	var tasks []benchTask
	var mu sync.Mutex
	for _, p := range points {
		var ts []*trace.Trace
		job := replay.Job{Tier: spec.TierDeadline, Deadline: skyNomadDeadline, RestartOverhead: skyNomadRestart,
			Work:         time.Duration(float64(skyNomadDeadline) / p.ratio).Round(time.Second),
			CheckpointGB: skyNomadCheckpoint, EgressUSDPerGB: skyNomadEgress, Rules: rules, LearnsByTrying: learns}
		for _, z := range p.zones {
			t := traces[z]
			if t == nil {
				file := filepath.Join(dir, z+"_h100_1.json")
				if t, err = trace.Load(file); err != nil {
					return &FlagError{"skynomad", err.Error(), "give the folder of the authors' trace, ../shared/traces/availability/16-node/gcp-10-04-2025"}
				}
				traces[z] = t
			}
			zp, ok := prices[z]
			if !ok {
				return &FlagError{"skynomad", fmt.Sprintf("%s does not price zone %s", filepath.Join(dir, "prices.csv"), z), "add the zone's line to prices.csv"}
			}
			ts = append(ts, t)
			job.Zones = append(job.Zones, zp)
		}
		m, err := replay.NewMarket(ts)
		if err != nil {
			return err
		}
		window := int(skyNomadDeadline / m.Gap)
		for w := range skyNomadWindows {
			for _, pol := range skyNomadPolicies {
				tasks = append(tasks, benchTask{weight: replayWeight(pol, window, len(ts)), run: func() error {
					res, err := replaySim(m, job, w*window, pol)
					if err != nil {
						return fmt.Errorf("figure %s, %d regions, D/W %g, window %d, %s: %w", p.figure, len(p.zones), p.ratio, w, pol, err)
					}
					mu.Lock()
					defer mu.Unlock()
					p.windows[w].cost[pol] = res.Cost
					p.probe[pol] += res.ProbeUSD
					if res.DeadlineMet {
						p.met[pol]++
					}
					return nil
				}})
			}
			if known {
				tasks = append(tasks, benchTask{weight: replayWeight(policy.Refuel, window, len(ts)), run: func() error {
					res, err := replayKnown(m, job, w*window)
					if err != nil {
						return fmt.Errorf("figure %s, %d regions, D/W %g, window %d, refuel with known statistics: %w", p.figure, len(p.zones), p.ratio, w, err)
					}
					mu.Lock()
					defer mu.Unlock()
					p.windows[w].known = res.Cost
					return nil
				}})
			}
		}
	}
	if err := runBenchTasks(tasks, stderr); err != nil {
		return err
	}
	printSkyNomad(stdout, points)
	return nil
}

// skyNomadTolerance is how close refuel's skynomad is to land to the
// authors' ratio to the optimum at each point.
const skyNomadTolerance = 0.02

// printSkyNomad prints the figures' table and the targets on it.
func printSkyNomad(w io.Writer, points []*figurePoint) {
	fmt.Fprintf(w, "SkyNomad's benchmark (its authors' Figures 10a and 10b): their trace, %d windows of %s from its start, work = deadline / (D/W),\n", skyNomadWindows, shortDuration(skyNomadDeadline))
	fmt.Fprintf(w, "%s restart, a %d GB checkpoint at $%.2f/GB between regions, each zone at its own price, the market's past known before each window.\n", shortDuration(skyNomadRestart), skyNomadCheckpoint, skyNomadEgress)
	fmt.Fprintln(w, "Mean cost per window over refuel's optimum (the authors' SkyNomad over their optimum); probe spend per window in USD, in the cost.")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	known := len(points) > 0 && points[0].known() > 0
	head := "figure\tregions\tD/W\toptimal $\ttheir optimal $\ttheir skynomad\trefuel\tskynomad\tuniform-progress\tgreedy\tprobes r/s/u/g $\tmet r/s/u/g\t"
	if known {
		head += "refuel known\t"
	}
	fmt.Fprintln(tw, head)
	var behind, off, missed []string
	dearer := 0 // points where refuel pays more dollars than their SkyNomad
	alike := 0  // points where skynomad pays within the tolerance of theirs, in dollars
	n := float64(skyNomadWindows)
	for _, p := range points {
		opt := p.cost(policy.Optimal)
		theirs := p.theirs / p.optimum
		ratio := func(pol policy.Name) float64 { return p.cost(pol) / opt }
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.2f/%.2f/%.2f/%.2f\t%d/%d/%d/%d\t",
			p.figure, len(p.zones), p.ratio, opt/n, p.optimum, theirs,
			ratio(policy.Refuel), ratio(policy.SkyNomad), ratio(policy.UniformProgress), ratio(policy.Greedy),
			p.probe[policy.Refuel]/n, p.probe[policy.SkyNomad]/n, p.probe[policy.UniformProgress]/n, p.probe[policy.Greedy]/n,
			p.met[policy.Refuel], p.met[policy.SkyNomad], p.met[policy.UniformProgress], p.met[policy.Greedy])
		if known {
			fmt.Fprintf(tw, "%.3f\t", p.known()/opt)
		}
		fmt.Fprintln(tw)
		at := fmt.Sprintf("%s %d regions D/W %.2f", p.figure, len(p.zones), p.ratio)
		if ratio(policy.Refuel) > theirs+1e-9 {
			// In dollars too: a point behind in ratio can be level in
			// cost where this optimum is cheaper than theirs.
			behind = append(behind, fmt.Sprintf("%s: refuel %.3f, theirs %.3f; per window refuel $%.2f, their SkyNomad $%.2f (optimum $%.2f, theirs $%.2f)",
				at, ratio(policy.Refuel), theirs, p.cost(policy.Refuel)/n, p.theirs, opt/n, p.optimum))
			if known {
				// Whether better estimation alone would close it.
				behind = append(behind, fmt.Sprintf("  with each window's own statistics known in advance: refuel %.3f", p.known()/opt))
			}
			// Window by window, where refuel's loss lies.
			for w, fw := range p.windows {
				behind = append(behind, fmt.Sprintf("  window %d: refuel $%.2f, their SkyNomad $%.2f (optimum $%.2f, theirs $%.2f)",
					w, fw.cost[policy.Refuel], fw.theirs, fw.cost[policy.Optimal], fw.optimum))
			}
		}
		if p.cost(policy.Refuel)/n > p.theirs {
			dearer++
		}
		sky := p.cost(policy.SkyNomad) / n
		apart := sky/p.theirs - 1 // skynomad's dollars against theirs
		if math.Abs(ratio(policy.SkyNomad)-theirs) > skyNomadTolerance {
			// In dollars too: where the two optima differ, so do the
			// ratios of policies that pay alike.
			off = append(off, fmt.Sprintf("%s: skynomad %.3f, theirs %.3f; per window skynomad $%.2f, their SkyNomad $%.2f (%+.1f%%; optimum $%.2f, theirs $%.2f)",
				at, ratio(policy.SkyNomad), theirs, sky, p.theirs, 100*apart, opt/n, p.optimum))
		}
		if math.Abs(apart) <= skyNomadTolerance {
			alike++
		}
		if p.met[policy.Refuel] < skyNomadWindows {
			missed = append(missed, at)
		}
	}
	tw.Flush()
	yes := map[bool]string{true: "met", false: "NOT met"}
	fmt.Fprintln(w, "\nTargets on SkyNomad's benchmark:")
	fmt.Fprintf(w, "  refuel at or below the authors' SkyNomad at every point: %s\n", yes[len(behind) == 0])
	for _, s := range behind {
		fmt.Fprintf(w, "      %s\n", s)
	}
	// Not a target: the ratios are over each simulator's own optimum.
	fmt.Fprintf(w, "  (in dollars, refuel pays at most their SkyNomad's mean at %d of %d points)\n", len(points)-dearer, len(points))
	fmt.Fprintf(w, "  refuel meets every deadline: %s\n", yes[len(missed) == 0])
	for _, s := range missed {
		fmt.Fprintf(w, "      %s\n", s)
	}
	fmt.Fprintf(w, "  refuel's skynomad within %.2f of the authors' SkyNomad at every point: %s\n", skyNomadTolerance, yes[len(off) == 0])
	for _, s := range off {
		fmt.Fprintf(w, "      %s\n", s)
	}
	fmt.Fprintf(w, "  (in dollars, refuel's skynomad pays within %.0f%% of their SkyNomad's mean at %d of %d points)\n", 100*skyNomadTolerance, alike, len(points))
}
