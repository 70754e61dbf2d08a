package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// shortTrace writes ten minutes of Azure-format traffic whose rate
// doubles halfway, and returns its path.
func shortTrace(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("TIMESTAMP,ContextTokens,GeneratedTokens\n")
	start := time.Date(2023, 11, 16, 18, 0, 0, 0, time.UTC)
	for i := range 3000 {
		at := start.Add(time.Duration(i) * 300 * time.Millisecond)
		if i >= 1000 {
			at = start.Add(5*time.Minute + time.Duration(i-1000)*150*time.Millisecond)
		}
		fmt.Fprintf(&b, "%s,%d,%d\n", at.Format("2006-01-02 15:04:05.0000000"), 200+i%900, 20+i%300)
	}
	path := filepath.Join(t.TempDir(), "short.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// autoscaleBench runs the command as the CLI does, and wants it to
// succeed.
func autoscaleBench(t *testing.T, args ...string) string {
	t.Helper()
	var out, errs bytes.Buffer
	if code := run(append([]string{"autoscale-bench"}, args...), &out, &errs); code != exitOK {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	return out.String()
}

func TestAutoscaleBenchJSON(t *testing.T) {
	out := autoscaleBench(t, "--trace", shortTrace(t), "--scenarios", "hour,hour-x0.25", "--seeds", "2", "--json")
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r autoscaleRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		got = append(got, fmt.Sprintf("%s/%d/%s", r.Scenario, r.Seed, r.Policy))
		if r.Attainment < 0 || r.Attainment > 1 || r.CostUSD <= 0 || r.PeakReplicas < 1 {
			t.Errorf("implausible row %+v", r)
		}
		// The oracle buys the target (99% of requests within the SLO) at
		// the least cost it finds; static holds the peak throughout.
		if r.Policy == policyOracle && (r.CostVsOracle != 1 || r.Attainment < 0.99) {
			t.Errorf("oracle row %+v; want at least 99%% of requests within the SLO at cost ratio 1", r)
		}
		if r.Policy == policyStatic && r.Attainment < 0.99 {
			t.Errorf("static row %+v; want at least 99%% of requests within the SLO", r)
		}
	}
	var want []string
	for _, sc := range []string{"hour", "hour-x0.25"} {
		for _, seed := range []int{1, 2} {
			for _, p := range autoscalePolicies {
				want = append(want, fmt.Sprintf("%s/%d/%s", sc, seed, p))
			}
		}
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("rows got(-), want(+):\n%s", diff)
	}
}

func TestAutoscaleBenchTable(t *testing.T) {
	out := autoscaleBench(t, "--trace", shortTrace(t), "--scenarios", "hour", "--seed", "3", "--seeds", "2")
	lines := strings.Split(out, "\n")
	var rows []string
	for _, l := range lines {
		if strings.HasPrefix(l, "worst rows") {
			break // the rows of the table; the hindsight rows follow
		}
		if f := strings.Fields(l); len(f) > 2 && f[0] == "hour" {
			rows = append(rows, f[0]+" "+f[1])
		}
	}
	if diff := cmp.Diff(rows, []string{"hour 3", "hour 4"}); diff != "" {
		t.Errorf("a row per scenario and seed, got(-), want(+):\n%s\n%s", diff, out)
	}
	for _, want := range []string{"reactive (SkyServe-like)", "oracle USD", "worst rows", "  refuel:", "  static peak:", "refuel met its targets on"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestAutoscaleBenchPlot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hour.png")
	autoscaleBench(t, "--trace", shortTrace(t), "--scenarios", "hour", "--plot", path)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != int(plotW) || b.Dy() < int(plotChartH) {
		t.Errorf("plot is %v; want %.0f wide with room for the chart", b, plotW)
	}
}

func TestAutoscaleBenchUsageErrors(t *testing.T) {
	cases := map[string]struct {
		args []string
		msg  string
	}{
		"unknown flag":     {[]string{"--bogus"}, "unknown flag: --bogus"},
		"unknown scenario": {[]string{"--scenarios", "hour,week"}, `--scenarios "week" is not a scenario`},
		"no decode rate":   {[]string{"--decode-tps", "0"}, "--decode-tps must be positive"},
		"tiny window":      {[]string{"--demand-window", "10ms"}, "--demand-window is under a second"},
		"no seeds":         {[]string{"--seeds", "0"}, "--seeds 0 is fewer than one"},
		"not a number":     {[]string{"--seeds", "five"}, `invalid argument "five" for "--seeds"`},
		"plot format":      {[]string{"--plot", "out.gif"}, "--plot \"out.gif\" names neither"},
		"an argument":      {[]string{"trace.csv"}, "takes no arguments"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out, errs bytes.Buffer
			code := run(append([]string{"autoscale-bench", "--trace", "unused.csv"}, tc.args...), &out, &errs)
			lines := strings.Split(strings.TrimSpace(errs.String()), "\n")
			if code != exitUsage || len(lines) != 2 || !strings.HasPrefix(lines[0], "starter autoscale-bench: ") ||
				!strings.Contains(lines[0], tc.msg) || lines[1] != "run `starter autoscale-bench -h` for its flags and an example" {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 2, the error naming %q and one hint line", code, errs.String(), tc.msg)
			}
			if out.Len() != 0 {
				t.Errorf("stdout %q; want nothing", out.String())
			}
		})
	}
}

// TestAutoscaleBenchMissingTrace: a trace that cannot be read is named
// with its flag and what to give instead.
func TestAutoscaleBenchMissingTrace(t *testing.T) {
	var out, errs bytes.Buffer
	code := run([]string{"autoscale-bench", "--trace", filepath.Join(t.TempDir(), "none.csv"), "--scenarios", "hour", "--seeds", "1"}, &out, &errs)
	if code == 0 || !strings.Contains(errs.String(), "--trace open ") || !strings.Contains(errs.String(), "give a request trace in the Azure LLM format") {
		t.Errorf("exit %d, stderr:\n%s\nwant a failure naming --trace and what to give", code, errs.String())
	}
}

func TestAutoscaleBenchCompletes(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"__complete", "autoscale-bench", "--s"}, &out, &bytes.Buffer{}); code != exitOK ||
		!strings.Contains(out.String(), "--scenarios\t") || !strings.Contains(out.String(), "--seeds\t") {
		t.Errorf("completing the flags: exit %d, %q", code, out.String())
	}
	out.Reset()
	if code := run([]string{"__complete", "autoscale-bench", "--scenarios", "hour,di"}, &out, &bytes.Buffer{}); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	got := strings.Split(strings.TrimSpace(out.String()), "\n")
	if diff := cmp.Diff(got[:len(got)-1], []string{"hour,diurnal", "hour,diurnal-small"}); diff != "" {
		t.Errorf("completions got(-), want(+):\n%s", diff)
	}
}
