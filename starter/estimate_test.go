package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"refuel/pkg/cloud/sim"
	"refuel/pkg/cloud/sim/gceapi"
	"refuel/pkg/estimate"
	"refuel/pkg/marketmem"
)

// jobFile writes a JobSpec whose deadline is hours from now.
func jobFile(t *testing.T, dir, extra string, hours int) string {
	t.Helper()
	path := filepath.Join(dir, "job.yaml")
	body := fmt.Sprintf("id: est-1\ntier: deadline\nwork: 48h\ndeadline: %s\nresources:\n  instance_types: [p3.2xlarge]\n%s",
		time.Now().Add(time.Duration(hours)*time.Hour).UTC().Format(time.RFC3339), extra)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// starter estimate --json prints the fields docs/contracts.md names, per
// case, from the built-in market where the deployment's memory is empty,
// and says so.
func TestEstimateJSONFromTheBuiltInMarket(t *testing.T) {
	dir := t.TempDir()
	var out, errs bytes.Buffer
	code := run([]string{"estimate", jobFile(t, dir, "", 60), "--json", "--windows", "4", "--data-dir", dir, "--provider", "sim"}, &out, &errs)
	if code != 0 {
		t.Fatalf("starter estimate: exit %d\n%s", code, errs.String())
	}
	var got struct {
		ID    string
		Cases []map[string]any
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("starter estimate --json: %v\n%s", err, out.String())
	}
	if got.ID != "est-1" || len(got.Cases) != 6 {
		t.Fatalf("estimate of %q has %d cases; want est-1 with the spec, two tiers and three deadlines", got.ID, len(got.Cases))
	}
	for _, c := range got.Cases {
		for _, k := range []string{"cost_usd", "ondemand_cost_usd", "finish_hours", "offerings", "basis"} {
			if _, ok := c[k]; !ok {
				t.Errorf("case %v lacks %s", c["name"], k)
			}
		}
		cost, _ := c["cost_usd"].(map[string]any)
		finish, _ := c["finish_hours"].(map[string]any)
		for _, k := range []string{"p10", "p50", "p90"} {
			if _, ok := cost[k]; !ok {
				t.Errorf("case %v: cost_usd lacks %s", c["name"], k)
			}
		}
		for _, k := range []string{"p50", "p90"} {
			if _, ok := finish[k]; !ok {
				t.Errorf("case %v: finish_hours lacks %s", c["name"], k)
			}
		}
		if _, ok := c["deadline_met_share"]; !ok {
			t.Errorf("case %v lacks deadline_met_share though it has a deadline", c["name"])
		}
		// The run learns the stock of the zone it does not hold by trying
		// it, and the estimate pays for its probes as the run will.
		if p, _ := c["probe_usd"].(float64); c["name"] == "as written" && p <= 0 {
			t.Errorf("case as written: probe_usd %v; want the probes of a run that holds one zone of two", c["probe_usd"])
		}
		if b, _ := c["basis"].(string); !strings.HasPrefix(b, "built-in market aws-10-26-2022, no history for p3.2xlarge in us-west-2a, us-west-2b") {
			t.Errorf("case %v: basis %q; want the built-in market, for want of history", c["name"], b)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "market-memory")); !os.IsNotExist(err) {
		t.Errorf("estimating created the market memory (stat: %v); it only reads", err)
	}
}

// Where the deployment's memory has watched a pool long enough, the
// estimate replays it, and says for how long it watched.
func TestEstimateFromTheMarketMemory(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	mem, err := marketmem.Open(ctx, "file://"+filepath.Join(dir, "market-memory"), "default", marketmem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range []time.Duration{20 * time.Hour, 30 * time.Hour, 12 * time.Hour} {
		if err := mem.Held(ctx, fmt.Sprintf("i-%d", i), "sim/p3.2xlarge/us-west-2a/spot", d, true); err != nil {
			t.Fatal(err)
		}
	}
	mem.Close()
	var out, errs bytes.Buffer
	if code := run([]string{"estimate", jobFile(t, dir, "", 60), "--windows", "4", "--data-dir", dir, "--provider", "sim", "--deployment", "default"}, &out, &errs); code != 0 {
		t.Fatalf("starter estimate: exit %d\n%s", code, errs.String())
	}
	for _, want := range []string{"basis: 2.6 days of market memory for p3.2xlarge in us-west-2a; built-in market aws-10-26-2022, no history for p3.2xlarge in us-west-2b", "as written", "deadline 1.5x work"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("starter estimate printed\n%s\nwant %q", out.String(), want)
		}
	}
}

// Asks that cannot be met say what to change: an offering nobody sells
// is a usage error naming what is offered; a budget below the p10 is a
// line of the report.
func TestEstimateSaysWhatToChange(t *testing.T) {
	dir := t.TempDir()
	var out, errs bytes.Buffer
	none := jobFile(t, dir, "  zones: [eu-west-9z]\n", 60)
	if code := run([]string{"estimate", none, "--data-dir", dir}, &out, &errs); code != 2 ||
		!strings.Contains(errs.String(), "zones eu-west-9z match no offering of provider sim") || !strings.Contains(errs.String(), "offers p2.8xlarge in us-west-2a, us-west-2b") {
		t.Errorf("estimate of a zone nobody sells: exit %d, stderr %q; want 2, naming what is offered", code, errs.String())
	}
	out.Reset()
	errs.Reset()
	poor := jobFile(t, dir, "budget_usd: 20\n", 60)
	if code := run([]string{"estimate", poor, "--windows", "4", "--data-dir", dir}, &out, &errs); code != 0 ||
		!strings.Contains(out.String(), "what to change:\n  budget_usd: $20.00 is below the estimate's p10") {
		t.Errorf("estimate of a budget below every replay: exit %d\n%s\nwant the budget line", code, out.String())
	}
	out.Reset()
	errs.Reset()
	if code := run([]string{"estimate-bench", "--starts", "0"}, &out, &errs); code != 2 || !strings.Contains(errs.String(), "--starts") {
		t.Errorf("estimate-bench --starts 0: exit %d, %q; want 2 naming --starts", code, errs.String())
	}
	errs.Reset()
	if code := run([]string{"estimate-bench", "--sees-every-zone", "--learns-by-trying"}, &out, &errs); code != 2 || !strings.Contains(errs.String(), "--sees-every-zone") || !strings.Contains(errs.String(), "--learns-by-trying") {
		t.Errorf("estimate-bench --sees-every-zone --learns-by-trying: exit %d, %q; want 2 naming both", code, errs.String())
	}
}

// The calibration bench estimates a run at each start from the trace
// before it, replays the run, and sums up how the estimates fared.
func TestEstimateBenchChecksEstimatesAgainstRuns(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("../pkg/cloud/sim/traces/aws-10-26-2022/us-west-2a_v100_1.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "us-west-2a_v100_1.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	if code := run([]string{"estimate-bench", "--traces", dir, "--starts", "2", "--windows", "4", "--deadlines", "52h", "--json"}, &out, &errs); code != 0 {
		t.Fatalf("estimate-bench: exit %d\n%s", code, errs.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var rows, sums int
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if m["summary"] == true {
			sums++
			if m["runs"] != 2.0 || m["within_p10_p90"] == nil || m["p50_mean_error"] == nil {
				t.Errorf("summary %v; want 2 runs, the share within p10..p90 and the p50's mean error", m)
			}
			continue
		}
		rows++
		if m["p10"].(float64) > m["p90"].(float64) || m["cost_usd"].(float64) <= 0 {
			t.Errorf("row %v: want p10 <= p90 and the run's cost", m)
		}
	}
	if rows != 2 || sums != 2 {
		t.Errorf("%d rows and %d summaries; want a row per start and a summary for all and for the deadline", rows, sums)
	}
}

// The table names each offering's cloud, as its key does first.
func TestEstimateTableNamesTheCloud(t *testing.T) {
	for name, tc := range map[string]struct {
		uses []estimate.Use
		want string
	}{
		"two clouds": {[]estimate.Use{{Offering: "gce/a3-highgpu-1g/us-central1-a/spot", Share: 0.7}, {Offering: "aws/p3.2xlarge/us-west-2a/on-demand", Share: 0.3}},
			"gce spot a3-highgpu-1g in us-central1-a 70%, aws on-demand p3.2xlarge in us-west-2a 30%"},
		"the sim":        {[]estimate.Use{{Offering: "sim/p3.2xlarge/us-west-2b/spot", Share: 1}}, "sim spot p3.2xlarge in us-west-2b 100%"},
		"not a key":      {[]estimate.Use{{Offering: "dc-1", Share: 1}}, "dc-1 100%"},
		"a trace of use": {[]estimate.Use{{Offering: "aws/p3.2xlarge/us-west-2a/spot", Share: 0.001}}, "none"},
	} {
		if got := uses(tc.uses); got != tc.want {
			t.Errorf("%s: %q; want %q", name, got, tc.want)
		}
	}
}

// starter estimate prices a deployment on Compute Engine (here its sim's
// endpoint) with the keys of its offerings naming the cloud first, and
// refuses to mix the sim with a public cloud, naming --provider.
func TestEstimateOnComputeEngine(t *testing.T) {
	cfg, _, err := gceapi.AddMarket(sim.Config{}, "")
	if err != nil {
		t.Fatal(err)
	}
	cloud, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cloud.Close() })
	srv, err := gceapi.Start(cloud, "127.0.0.1:0", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	dir := t.TempDir()
	job := filepath.Join(dir, "job.yaml")
	body := fmt.Sprintf("id: est-1\ntier: deadline\nwork: 2h\ndeadline: %s\nresources:\n  instance_types: [a3-highgpu-1g]\n", time.Now().Add(4*time.Hour).UTC().Format(time.RFC3339))
	if err := os.WriteFile(job, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		provider string
		wantErr  string
	}{
		"gce":         {provider: "gce"},
		"sim and gce": {provider: "sim,gce", wantErr: "--provider"},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errs bytes.Buffer
			code := run([]string{"estimate", job, "--json", "--windows", "2", "--data-dir", dir, "--provider", tc.provider,
				"--gce-project", "p", "--gce-zones", "us-central1-a,us-east4-a", "--gce-endpoint", srv.Endpoint()}, &out, &errs)
			if tc.wantErr != "" {
				if code == 0 || !strings.Contains(errs.String(), tc.wantErr) {
					t.Errorf("exit %d, %q; want an error naming %s", code, errs.String(), tc.wantErr)
				}
				return
			}
			if code != 0 {
				t.Fatalf("starter estimate: exit %d\n%s", code, errs.String())
			}
			var got struct{ Cases []estimate.Case }
			if err := json.Unmarshal(out.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if len(got.Cases) == 0 || len(got.Cases[0].Offerings) == 0 {
				t.Fatalf("no offering used: %s", out.String())
			}
			for _, u := range got.Cases[0].Offerings {
				if !strings.HasPrefix(u.Offering, "gce/a3-highgpu-1g/us-") {
					t.Errorf("offering %q; want gce's a3-highgpu-1g, cloud first", u.Offering)
				}
			}
		})
	}
}
