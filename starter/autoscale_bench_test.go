package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

func TestAutoscaleBenchJSON(t *testing.T) {
	var out bytes.Buffer
	if err := runAutoscaleBench([]string{"--trace", shortTrace(t), "--scenarios", "hour", "--json"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var policies []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r autoscaleRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		policies = append(policies, r.Policy)
		if r.Scenario != "hour" || r.Requests != 3000 || r.Attainment < 0 || r.Attainment > 1 || r.CostUSD <= 0 || r.PeakReplicas < 1 {
			t.Errorf("implausible row %+v", r)
		}
		if r.Policy == "oracle" && (r.CostVsOracle != 1 || r.Attainment != 1) {
			t.Errorf("oracle row %+v; want all demand served at cost ratio 1", r)
		}
		if r.Policy == "static peak" && r.Attainment != 1 {
			t.Errorf("static row %+v; want all demand served", r)
		}
	}
	if diff := cmp.Diff(policies, []string{"refuel", "reactive (SkyServe-like)", "static peak", "oracle"}); diff != "" {
		t.Errorf("policies got(-), want(+):\n%s", diff)
	}
}

func TestAutoscaleBenchTable(t *testing.T) {
	var out bytes.Buffer
	if err := runAutoscaleBench([]string{"--trace", shortTrace(t), "--scenarios", "hour"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SLO attained", "reactive (SkyServe-like)", "targets for refuel", "hour:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestAutoscaleBenchRejectsBadFlags(t *testing.T) {
	cases := map[string]struct {
		args []string
		flag string
	}{
		"unknown scenario": {[]string{"--scenarios", "hour,week"}, "scenarios"},
		"no decode rate":   {[]string{"--decode-tps", "0"}, "decode-tps"},
		"tiny window":      {[]string{"--demand-window", "10ms"}, "demand-window"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := runAutoscaleBench(append([]string{"--trace", "unused.csv"}, tc.args...), &bytes.Buffer{}, io.Discard)
			var fe *FlagError
			if !errors.As(err, &fe) || fe.Flag != tc.flag {
				t.Errorf("error %v; want a *FlagError for --%s", err, tc.flag)
			}
		})
	}
}
