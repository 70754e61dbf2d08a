package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"refuel/pkg/policy"
)

// simTrace writes a small trace: 40 ticks of 10 minutes, stock coming and
// going.
func simTrace(t *testing.T, name string) string {
	t.Helper()
	var pts []string
	for i := range 40 {
		if (i/5)%3 == 2 {
			pts = append(pts, "0")
		} else {
			pts = append(pts, "1")
		}
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(`{"metadata": {"gap_seconds": 600}, "data": [`+strings.Join(pts, ", ")+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// runSim and runSimBench run `starter sim` and `starter sim-bench` as the
// CLI does, returning the command's error.
func runSim(args []string, stdout, stderr io.Writer) error {
	return runCommand(append([]string{"sim"}, args...), stdout, stderr)
}

func runSimBench(args []string, stdout, stderr io.Writer) error {
	return runCommand(append([]string{"sim-bench"}, args...), stdout, stderr)
}

func runCommand(args []string, stdout, stderr io.Writer) error {
	root := newRoot(stdout, stderr)
	root.SetArgs(normalizeArgs(root, args))
	_, err := root.ExecuteC()
	return err
}

var simJob = []string{"--work", "3h", "--deadline", "4h", "--restart-overhead", "12m", "--spot-price", "0.9701", "--ondemand-price", "3.06"}

func simJSON(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	var out, errs bytes.Buffer
	if err := runSim(append(args, "--json"), &out, &errs); err != nil {
		t.Fatalf("runSim: %v\n%s", err, errs.String())
	}
	var rows []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var row map[string]any
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("line %q is not one JSON object: %v", line, err)
		}
		rows = append(rows, row)
	}
	return rows
}

// checkRow checks the fields docs/contracts.md promises, and their types.
func checkRow(t *testing.T, row map[string]any) {
	t.Helper()
	kinds := map[string]string{
		"policy": "string", "start": "number", "cost_usd": "number", "finish_hours": "number", "deadline_met": "bool",
		"spot_hours": "number", "ondemand_hours": "number", "preemptions": "number", "changeovers": "number",
	}
	for field, kind := range kinds {
		v, ok := row[field]
		if !ok {
			t.Errorf("row %v has no %q", row, field)
			continue
		}
		got := "number"
		switch v.(type) {
		case string:
			got = "string"
		case bool:
			got = "bool"
		}
		if got != kind {
			t.Errorf("%q is a %s, want a %s", field, got, kind)
		}
	}
}

func TestSimPrintsOneJSONRowPerPolicy(t *testing.T) {
	tr := simTrace(t, "z1_v100_1.json")
	rows := simJSON(t, append([]string{"--trace", tr, "--policy", "greedy,refuel", "--policy", "optimal", "--start", "2"}, simJob...)...)
	if len(rows) != 3 {
		t.Fatalf("got %d rows, want 3", len(rows))
	}
	for i, want := range []string{"greedy", "refuel", "optimal"} {
		checkRow(t, rows[i])
		if rows[i]["policy"] != want || rows[i]["start"] != 2.0 || rows[i]["deadline_met"] != true {
			t.Errorf("row %d: %v", i, rows[i])
		}
	}
	if rows[2]["cost_usd"].(float64) > rows[0]["cost_usd"].(float64)+1e-9 {
		t.Errorf("optimal costs more than greedy: %v", rows)
	}
}

func TestSimStartsEndWithASummaryPerPolicy(t *testing.T) {
	a, b := simTrace(t, "za_v100_1.json"), simTrace(t, "zb_v100_1.json")
	rows := simJSON(t, append([]string{"--trace", a, "--trace", b, "--policy", "ondemand,uniform-progress", "--starts", "3"}, simJob...)...)
	if len(rows) != 3*2+2 {
		t.Fatalf("got %d rows, want 8", len(rows))
	}
	for _, row := range rows[:6] {
		checkRow(t, row)
	}
	if rows[0]["start"] != 0.0 || rows[4]["start"] != 16.0 {
		t.Errorf("starts are %v and %v, want 0 and 16 (the last that leaves room for the deadline)", rows[0]["start"], rows[4]["start"])
	}
	for i, want := range []string{"ondemand", "uniform-progress"} {
		s := rows[6+i]
		if s["summary"] != true || s["policy"] != want || s["windows"] != 3.0 || s["deadlines_met"] != 3.0 {
			t.Errorf("summary %d: %v", i, s)
		}
	}
}

func TestSimRejectsBadFlags(t *testing.T) {
	tr := simTrace(t, "z1_v100_1.json")
	cases := map[string]struct {
		args []string
		want string
	}{
		"no trace":          {nil, "--trace is missing"},
		"bad duration":      {[]string{"--trace", tr, "--work", "two days"}, "-work"},
		"bad price":         {[]string{"--trace", tr, "--spot-price", "cheap"}, "-spot-price"},
		"unknown policy":    {[]string{"--trace", tr, "--policy", "fast"}, `unknown policy "fast"`},
		"deadline too soon": {[]string{"--trace", tr, "--work", "5h", "--deadline", "4h"}, "--deadline"},
		"start and starts":  {[]string{"--trace", tr, "--start", "3", "--starts", "2"}, "--starts"},
		"start past end":    {[]string{"--trace", tr, "--start", "99"}, "--start 99 is past"},
		"plot format":       {[]string{"--trace", tr, "--plot", "out.jpg"}, "--plot"},
		"no nodes":          {[]string{"--trace", tr, "--nodes", "0"}, "--nodes 0 is outside 1..256"},
		"rules past latest": {[]string{"--trace", tr, "--rules", strconv.Itoa(policy.RulesLatest + 1)}, fmt.Sprintf("--rules %d is outside 0..%d", policy.RulesLatest+1, policy.RulesLatest)},
		"negative rules":    {[]string{"--trace", tr, "--rules", "-1"}, "--rules -1 is outside"},
		"too many nodes":    {[]string{"--trace", tr, "--nodes", "257"}, "--nodes 257 is outside 1..256"},
		"min nodes above":   {[]string{"--trace", tr, "--nodes", "2", "--min-nodes", "3"}, "--min-nodes 3 is outside 1..2 (--nodes)"},
		"missing file":      {[]string{"--trace", filepath.Join(t.TempDir(), "none.json")}, "none.json cannot be read"},
		"zone not priced":   {[]string{"--trace", tr, "--prices", "embedded"}, "zone z1 cannot be priced from embedded"},
		"type not known": {[]string{"--trace", simTrace(t, "us-east-1a_h100_1.json"), "--prices", "embedded"},
			"zone us-east-1a cannot be priced from embedded: its trace"},
		"type not priced": {[]string{"--trace", simTrace(t, "us-east-1a_h100_1.json"), "--prices", "embedded", "--instance-type", "a3-highgpu-8g"},
			"zone us-east-1a cannot be priced from embedded: the file has no spot price for a3-highgpu-8g"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out, errs bytes.Buffer
			err := runSim(tc.args, &out, &errs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// With --prices the plot says each zone's prices, those it was replayed at.
func TestSimPlotsThePricesItUsed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plot.svg")
	var out, errs bytes.Buffer
	args := []string{"--trace", simTrace(t, "us-east-1a_v100_1.json"), "--trace", simTrace(t, "us-west-2a_v100_1.json"), "--prices", "embedded", "--policy", "greedy", "--plot", path}
	if err := runSim(append(args, simJob...), &out, &errs); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"us-east-1a spot $", "us-west-2a spot $"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the plot does not say %q", want)
		}
	}
	if bytes.Contains(b, []byte("spot $0.9701/h")) {
		t.Error("the plot says the default spot price")
	}
}

func TestSimPlots(t *testing.T) {
	tr := simTrace(t, "z1_v100_1.json")
	for _, ext := range []string{".svg", ".png"} {
		path := filepath.Join(t.TempDir(), "plot"+ext)
		var out, errs bytes.Buffer
		if err := runSim(append([]string{"--trace", tr, "--policy", "greedy,optimal", "--plot", path}, simJob...), &out, &errs); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if (ext == ".svg" && !bytes.Contains(b, []byte("<svg"))) || (ext == ".png" && !bytes.HasPrefix(b, []byte("\x89PNG"))) {
			t.Errorf("%s is not a %s file", path, ext)
		}
	}
}

func TestSimBenchReportsTargetsAndTheKnownStatisticsLine(t *testing.T) {
	dir := t.TempDir()
	for _, zone := range []string{"us-west-2a", "us-west-2b"} {
		b, err := os.ReadFile(simTrace(t, zone+"_v100_1.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, zone+"_v100_1.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(extra ...string) string {
		var out, errs bytes.Buffer
		args := append([]string{"--traces", dir, "--starts", "2", "--work", "3h", "--deadlines", "4h,5h"}, extra...)
		if err := runSimBench(args, &out, &errs); err != nil {
			t.Fatalf("sim-bench: %v\n%s", err, errs.String())
		}
		return out.String()
	}
	plain, known := run(), run("--known-statistics")
	if gang := run("--nodes", "3"); !strings.Contains(gang, "a gang of 3 nodes") || !strings.Contains(gang, "ALL single-zone (4 windows)") {
		t.Errorf("sim-bench --nodes 3 does not replay a gang:\n%s", gang)
	}
	// One pool for every gang size: a table each, and on these one-node
	// traces the gang's shares are the one node's (not replayed again).
	both := run("--nodes", "1,3")
	one, gang, ok := strings.Cut(both, "== "+dir+", 3 nodes ==")
	if !ok || !strings.Contains(one, "== "+dir+", 1 node ==") || !strings.Contains(gang, "a gang of 3 nodes") {
		t.Fatalf("sim-bench --nodes 1,3 lacks a table per size:\n%s", both)
	}
	all := func(table string) string {
		i := strings.Index(table, "ALL single-zone")
		return table[i : i+strings.Index(table[i:], "\n")]
	}
	if all(one) != all(gang) {
		t.Errorf("on one-node traces a gang of 3 costs %q of on-demand, one node %q; want the same shares", all(gang), all(one))
	}
	var out, errs bytes.Buffer
	if err := runSimBench([]string{"--traces", dir, "--nodes", "0"}, &out, &errs); err == nil || !strings.Contains(err.Error(), `"--nodes"`) {
		t.Errorf("sim-bench --nodes 0: got %v, want an error naming --nodes", err)
	}
	out.Reset()
	if err := runSimBench([]string{"--traces", dir, "--rules", "-1"}, &out, &errs); err == nil || !strings.Contains(err.Error(), "--rules -1 is outside") {
		t.Errorf("sim-bench --rules -1: got %v, want an error naming --rules", err)
	}
	for _, want := range []string{"ALL single-zone (4 windows)", "refuel meets every deadline", "v100_1 (2 zones)"} {
		if !strings.Contains(plain, want) {
			t.Errorf("sim-bench output lacks %q:\n%s", want, plain)
		}
	}
	if strings.Contains(plain, "known in advance") {
		t.Errorf("the known-statistics line is printed without --known-statistics:\n%s", plain)
	}
	if n := strings.Count(known, "with each window's own statistics known in advance"); n != 2 {
		t.Errorf("want the known-statistics line once per deadline, got %d:\n%s", n, known)
	}
}

// countTrace writes a trace of counts: 40 ticks of 10 minutes, 4 in stock
// but for every fifth stretch of 4 ticks, where only 2 are.
func countTrace(t *testing.T, name string) string {
	t.Helper()
	var pts []string
	for i := range 40 {
		if (i/4)%5 == 3 {
			pts = append(pts, "2")
		} else {
			pts = append(pts, "4")
		}
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(`{"metadata": {"gap_seconds": 600}, "data": [`+strings.Join(pts, ", ")+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSimNodesReplayAGang(t *testing.T) {
	one, counts := simTrace(t, "z1_v100_1.json"), countTrace(t, "z2_v100_1.json")
	run := func(tr, nodes string) map[string]any {
		rows := simJSON(t, append([]string{"--trace", tr, "--policy", "optimal", "--start", "2", "--nodes", nodes}, simJob...)...)
		if len(rows) != 1 {
			t.Fatalf("got %d rows, want 1", len(rows))
		}
		checkRow(t, rows[0])
		return rows[0]
	}
	cases := map[string]struct {
		trace    string
		nodes    string
		scale    float64 // of the cost of one node
		dearer   bool    // the gang pays more than that
		restarts bool    // and starts more often
	}{
		"a one-node trace stands for four alike": {one, "4", 4, false, false},
		"counts hold two as they hold one":       {counts, "2", 2, false, false},
		"counts fall below three":                {counts, "3", 3, true, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			base, gang := run(tc.trace, "1"), run(tc.trace, tc.nodes)
			if gang["nodes"] != float64(tc.scale) || base["nodes"] != 1.0 {
				t.Errorf("rows say nodes %v and %v", base["nodes"], gang["nodes"])
			}
			b, g := base["cost_usd"].(float64), gang["cost_usd"].(float64)
			if got := g > tc.scale*b*(1+1e-9); got != tc.dearer || g < tc.scale*b*(1-1e-9) {
				t.Errorf("gang $%v, one node $%v: want %v× it, dearer %v", g, b, tc.scale, tc.dearer)
			}
			if got := gang["restarts"].(float64) > base["restarts"].(float64); got != tc.restarts {
				t.Errorf("%v restarts for the gang, %v for one node", gang["restarts"], base["restarts"])
			}
		})
	}
}

func TestSimWarnsOfAGangNoTraceCanHold(t *testing.T) {
	var out, errs bytes.Buffer
	tr := countTrace(t, "z2_v100_1.json")
	if err := runSim(append([]string{"--trace", tr, "--policy", "greedy", "--nodes", "5"}, simJob...), &out, &errs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errs.String(), "counts at most 4 instances in stock; a gang of 5 never finds spot there") {
		t.Errorf("stderr lacks the warning:\n%s", errs.String())
	}
	if !strings.Contains(out.String(), "A gang of 5 nodes") {
		t.Errorf("the table does not say it is a gang's:\n%s", out.String())
	}
}

func TestSimMinNodesReplayAnElasticGang(t *testing.T) {
	counts := countTrace(t, "z2_v100_1.json")
	run := func(p string, more ...string) map[string]any {
		rows := simJSON(t, append(append([]string{"--trace", counts, "--policy", p, "--start", "2", "--nodes", "3"}, more...), simJob...)...)
		if len(rows) != 1 {
			t.Fatalf("got %d rows, want 1", len(rows))
		}
		checkRow(t, rows[0])
		return rows[0]
	}
	rigid, elastic := run("optimal"), run("optimal", "--min-nodes", "2")
	if rigid["min_nodes"] != 3.0 || elastic["min_nodes"] != 2.0 {
		t.Errorf("rows say min nodes %v and %v; want 3 and 2", rigid["min_nodes"], elastic["min_nodes"])
	}
	if r, e := rigid["cost_usd"].(float64), elastic["cost_usd"].(float64); e >= r {
		t.Errorf("the elastic gang's optimum costs $%v, the rigid one's $%v; want less where 2 are in stock", e, r)
	}
	if g := run("greedy", "--min-nodes", "2"); g["shrunk_hours"].(float64) <= 0 {
		t.Errorf("greedy never trained on 2 nodes: %v", g)
	}
}

// Markets sampled finer than --region-tick are replayed across priced
// regions at a multiple of their gap at least that long.
func TestSimBenchReadsFineMarketsCoarserAcrossRegions(t *testing.T) {
	dir := t.TempDir()
	for _, zone := range []string{"us-west-2a", "us-east-1a"} {
		b, err := os.ReadFile(simTrace(t, zone+"_v100_1.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, zone+"_v100_1.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for tick, want := range map[string]string{"25m": "(2 zones) at 30m ticks", "0": "(2 zones)  "} {
		var out, errs bytes.Buffer
		if err := runSimBench([]string{"--traces", dir, "--starts", "1", "--work", "3h", "--deadlines", "4h", "--region-tick", tick}, &out, &errs); err != nil {
			t.Fatalf("sim-bench: %v\n%s", err, errs.String())
		}
		_, regions, ok := strings.Cut(out.String(), "Priced regions")
		if !ok || !strings.Contains(regions, want) || !strings.Contains(regions, "skynomad") || !strings.Contains(regions, "probes r/s $") {
			t.Errorf("--region-tick %s: the table across priced regions lacks %q, skynomad or its probe spend:\n%s", tick, want, regions)
		}
	}
}

// --prices may be a table of each zone's prices (.csv, as the GCP trace's
// prices.csv): every zone is charged its row, and a zone the table has no
// row for is an error naming it and the table.
func TestSimPricesFromAZoneTable(t *testing.T) {
	table := filepath.Join(t.TempDir(), "prices.csv")
	rows := "zone,region,machine_type,spot_usd_per_hour,on_demand_usd_per_hour\n" +
		"us-east4-a,us-east4,a3-highgpu-8g,14.8534,82.5254\n"
	if err := os.WriteFile(table, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	args := append([]string{"--trace", simTrace(t, "us-east4-a_h100_1.json"), "--prices", table, "--policy", "greedy", "--json"}, simJob...)
	if err := runSim(args, &out, &errs); err != nil {
		t.Fatal(err)
	}
	var row struct {
		Cost     float64 `json:"cost_usd"`
		Spot     float64 `json:"spot_hours"`
		OnDemand float64 `json:"ondemand_hours"`
	}
	if err := json.Unmarshal(out.Bytes(), &row); err != nil {
		t.Fatalf("%v in %s", err, out.String())
	}
	if want := row.Spot*14.8534 + row.OnDemand*82.5254; row.Spot == 0 || math.Abs(row.Cost-want) > 0.01 {
		t.Errorf("cost $%.2f for %.2f h spot and %.2f h on-demand; want $%.2f at the table's prices", row.Cost, row.Spot, row.OnDemand, want)
	}
	err := runSim(append([]string{"--trace", simTrace(t, "us-west1-a_h100_1.json"), "--prices", table}, simJob...), &out, &errs)
	if err == nil || !strings.Contains(err.Error(), "zone us-west1-a cannot be priced from "+table+": the file has no row for it") {
		t.Errorf("got %v, want an error naming the zone and the table", err)
	}
}

// --transfer-gbps 0 makes moves take no time, as the SkyNomad benchmark
// models them; a negative rate is an error naming the flag.
func TestSimTransferRate(t *testing.T) {
	var out, errs bytes.Buffer
	tr := simTrace(t, "z1_v100_1.json")
	if err := runSim(append([]string{"--trace", tr, "--transfer-gbps", "0"}, simJob...), &out, &errs); err != nil {
		t.Errorf("--transfer-gbps 0: %v", err)
	}
	if err := runSim(append([]string{"--trace", tr, "--transfer-gbps", "-1"}, simJob...), &out, &errs); err == nil || !strings.Contains(err.Error(), "--transfer-gbps -1 is not a rate") {
		t.Errorf("--transfer-gbps -1: got %v, want an error naming the flag", err)
	}
}

// Policies learn stock by trying by default: refuel pays for the probes
// that show it a zone's stock is back; greedy decides as it does seeing
// every zone (--sees-every-zone), and the optimum, knowing the whole
// market, pays for none. --learns-by-trying, the flag before it became
// the default, still names it, and refused beside --sees-every-zone.
func TestSimLearnsByTrying(t *testing.T) {
	dir := filepath.Join("..", "pkg", "cloud", "sim", "traces", "aws-10-26-2022")
	args := []string{"--trace", filepath.Join(dir, "us-west-2a_v100_1.json"), "--trace", filepath.Join(dir, "us-west-2b_v100_1.json"),
		"--work", "6h", "--deadline", "9h", "--start", "984", "--policy", "greedy,refuel,optimal"}
	seeing := simJSON(t, append(args, "--sees-every-zone")...)
	learning := simJSON(t, args...)
	probes := func(row map[string]any) float64 { return row["probe_usd"].(float64) }
	if probes(seeing[1]) != 0 || probes(learning[1]) <= 0 {
		t.Errorf("refuel's probes: $%v seeing every zone, $%v learning by trying; want none, then some", probes(seeing[1]), probes(learning[1]))
	}
	for _, i := range []int{0, 2} {
		if seeing[i]["cost_usd"] != learning[i]["cost_usd"] || probes(learning[i]) != 0 {
			t.Errorf("%s: $%v seeing every zone, $%v (probes $%v) learning by trying; want the same, no probes",
				seeing[i]["policy"], seeing[i]["cost_usd"], learning[i]["cost_usd"], probes(learning[i]))
		}
	}
	// The summary's mean_probe_usd, and the table's probes column, which
	// a replay seeing every zone leaves out.
	windows := slices.Clone(args)
	windows[len(windows)-4], windows[len(windows)-3], windows[len(windows)-1] = "--starts", "2", "refuel"
	sums := simJSON(t, windows...)
	if len(sums) != 3 || sums[2]["summary"] != true || sums[2]["mean_probe_usd"] != (probes(sums[0])+probes(sums[1]))/2 {
		t.Errorf("refuel over 2 windows: %v; want a summary whose mean_probe_usd is the windows' mean probe_usd", sums)
	}
	for _, tc := range []struct {
		flag string
		want bool
	}{{"--learns-by-trying", true}, {"--sees-every-zone", false}} {
		var out, errs bytes.Buffer
		if err := runSim(append(args, tc.flag), &out, &errs); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(out.String(), "probes $"); got != tc.want {
			t.Errorf("%s: the table has a probes column %v; want %v\n%s", tc.flag, got, tc.want, out.String())
		}
	}
	if named := simJSON(t, append(args, "--learns-by-trying")...); !reflect.DeepEqual(named, learning) {
		t.Errorf("--learns-by-trying replays otherwise than the default:\n%v\n%v", named, learning)
	}
	var out, errs bytes.Buffer
	err := runSim(append(args, "--sees-every-zone", "--learns-by-trying"), &out, &errs)
	if err == nil || !strings.Contains(err.Error(), "--sees-every-zone") || !strings.Contains(err.Error(), "--learns-by-trying") {
		t.Errorf("--sees-every-zone --learns-by-trying: got %v, want an error naming both", err)
	}
}
