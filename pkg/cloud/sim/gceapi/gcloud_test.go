package gceapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/gce"
	"refuel/pkg/cloud/local"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/cloud/sim/gceapi"
)

// TestGcloudAgainstTheSim drives the sim with the real gcloud CLI: it
// lists a run's instances with their labels, a maintenance event
// preempts the spot VM (its metadata says preempted, a
// compute.instances.preempted operation is recorded, the VM is gone once
// its notice ran out), and delete deletes.
func TestGcloudAgainstTheSim(t *testing.T) {
	gcloud, err := exec.LookPath("gcloud")
	if err != nil {
		t.Skip("gcloud (google-cloud-cli) is not installed: this test drives the simulated Compute Engine with it")
	}
	const notice = 2 * time.Second
	cfg, _, err := gceapi.AddMarket(sim.Config{}, "")
	if err != nil {
		t.Fatal(err)
	}
	// Each instance's "agent" records the metadata host it was given and
	// says it is ready: what a node agent would read, without Temporal.
	cfg.Launcher = local.LauncherConfig{Dir: t.TempDir(), AgentCommand: func(l local.AgentLaunch) []string {
		return []string{"sh", "-c", `echo "$GCE_METADATA_HOST" > metadata-host && touch "$1" && exec sleep 600`, "agent", l.ReadyFile}
	}}
	cloud, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cloud.Close() })
	srv, err := gceapi.Start(cloud, "127.0.0.1:0", nil, nil, gceapi.WithNoticeWindow(notice))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })

	provider, err := gce.New(t.Context(), gce.Config{Project: "demo", Endpoint: srv.Endpoint(), PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	req := func(m capacity.Market) capacity.Request {
		return capacity.Request{RunID: "gcloud-run", Attempt: map[capacity.Market]int{capacity.Spot: 1, capacity.OnDemand: 2}[m],
			Tags:      map[string]string{capacity.TagPool: "gpu"},
			Offerings: []capacity.Offering{{Provider: "gce", InstanceType: "a3-highgpu-1g", Zone: "us-central1-a", Market: m, GPUs: 1}}}
	}
	spot, err := provider.Acquire(t.Context(), req(capacity.Spot))
	if err != nil {
		t.Fatal(err)
	}
	onDemand, err := provider.Acquire(t.Context(), req(capacity.OnDemand))
	if err != nil {
		t.Fatal(err)
	}

	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), gcloud, args...)
		cmd.Env = append(os.Environ(),
			"CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE="+srv.Endpoint(),
			"CLOUDSDK_AUTH_DISABLE_CREDENTIALS=true",
			"CLOUDSDK_CORE_PROJECT=demo",
			"CLOUDSDK_CORE_DISABLE_PROMPTS=1",
			"CLOUDSDK_CONFIG="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("gcloud %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	type listed struct {
		Name   string            `json:"name"`
		Status string            `json:"status"`
		Labels map[string]string `json:"labels"`
	}
	list := func() map[string]listed {
		var got []listed
		out := run("compute", "instances", "list", "--format=json")
		if err := json.Unmarshal([]byte(out[strings.Index(out, "["):]), &got); err != nil {
			t.Fatalf("gcloud's list: %v\n%s", err, out)
		}
		byName := map[string]listed{}
		for _, l := range got {
			byName[l.Name] = l
		}
		return byName
	}

	got := list()
	for _, id := range []string{spot.ID, onDemand.ID} {
		if l := got[id]; l.Status != "RUNNING" || l.Labels[gce.LabelRun] != "gcloud-run" || l.Labels[gce.LabelPool] != "gpu" {
			t.Errorf("gcloud lists %s as %+v, want RUNNING with the run's labels", id, l)
		}
	}

	// The spot VM's agent was pointed at its metadata server.
	hostFile := filepath.Join(cfg.Launcher.Dir, spot.ID, "metadata-host")
	b, err := os.ReadFile(hostFile)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimSpace(string(b))
	if host == "" {
		t.Fatal("the agent of a Compute Engine instance got no GCE_METADATA_HOST")
	}
	metadata := func(path string) string {
		r, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+host+"/computeMetadata/v1/instance/"+path, nil)
		r.Header.Set("Metadata-Flavor", "Google")
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	if name, zone := metadata("name"), metadata("zone"); name != spot.ID || !strings.HasSuffix(zone, "/zones/us-central1-a") {
		t.Errorf("metadata says name %q zone %q", name, zone)
	}
	if v := metadata("preempted"); v != "FALSE" {
		t.Fatalf("preempted before any event: %q", v)
	}
	changed := make(chan string, 1)
	go func() { changed <- metadata("preempted?wait_for_change=true") }()

	run("compute", "instances", "simulate-maintenance-event", spot.ID, "--zone", "us-central1-a")
	select {
	case v := <-changed:
		if v != "TRUE" {
			t.Errorf("the hanging GET of preempted answered %q, want TRUE", v)
		}
	case <-time.After(notice):
		t.Fatal("the hanging GET of preempted did not answer within the notice")
	}
	ops := run("compute", "operations", "list", "--zones", "us-central1-a", "--filter", "operationType=compute.instances.preempted", "--format=value(targetLink)")
	if !strings.Contains(ops, "/instances/"+spot.ID) {
		t.Errorf("no compute.instances.preempted operation of %s: %q", spot.ID, ops)
	}
	deadline := time.Now().Add(notice + 5*time.Second)
	for {
		if _, _, err := provider.Describe(t.Context(), spot.ID); capacity.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the preempted spot VM is still there after its notice")
		}
		time.Sleep(100 * time.Millisecond)
	}

	run("compute", "instances", "delete", onDemand.ID, "--zone", "us-central1-a")
	if left := list(); len(left) != 0 { // the spot VM is gone too
		t.Errorf("instances left after delete: %+v", left)
	}
	if rest, err := provider.List(t.Context(), nil); err != nil || len(rest) != 0 {
		t.Errorf("the provider lists %v (%v) after delete", rest, err)
	}
}
