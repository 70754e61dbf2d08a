package tests

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"refuel/controlplane"
	"refuel/jobs"
	"refuel/pkg/cloud/gce"
	"refuel/pkg/spec"
	"refuel/pkg/trainer"
	"refuel/workflows"
	"refuel/workflows/registry"
	"refuel/workflows/training"
)

// gcloudCLI runs the gcloud CLI against the stack's Compute Engine
// endpoint, with no credentials and a configuration of its own.
type gcloudCLI struct {
	t        *testing.T
	endpoint string
	config   string
}

func (g gcloudCLI) run(args ...string) []byte {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "gcloud", append(args, "--project", "refuel-test", "--quiet")...)
	cmd.Env = append(os.Environ(),
		"CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE="+g.endpoint,
		"CLOUDSDK_AUTH_DISABLE_CREDENTIALS=true",
		"CLOUDSDK_CONFIG="+g.config,
		"CLOUDSDK_CORE_DISABLE_PROMPTS=1",
		"CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK=1",
	)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		g.t.Fatalf("gcloud %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

type gcloudInstance struct {
	Name   string            `json:"name"`
	Status string            `json:"status"`
	Labels map[string]string `json:"labels"`
}

func (g gcloudCLI) list() []gcloudInstance {
	g.t.Helper()
	var out []gcloudInstance
	if err := json.Unmarshal(g.run("compute", "instances", "list", "--format=json"), &out); err != nil {
		g.t.Fatalf("gcloud compute instances list: %v", err)
	}
	return out
}

// The gcloud CLI against a run on Compute Engine (the in-process sim):
// the run's instance is listed with its labels; a maintenance event on
// its spot VM is survived (final checkpoint, resumed on a replacement);
// deleting the replacement is recovered; after the run nothing is listed.
func TestGcloudCLIOnARun(t *testing.T) {
	if _, err := exec.LookPath("gcloud"); err != nil {
		t.Skip("the gcloud CLI (google-cloud-cli) is not installed on this machine: nothing to run this test with")
	}
	parallelFirst(t) // about a minute here, more beside other tests
	wf := registry.New()
	wf.Run.HeartbeatTimeout, wf.Run.RestartBackoff = 5*time.Second, time.Second
	s := startStack(t, func(c *controlplane.Config) {
		c.Workflows = wf
		c.Provider = controlplane.ProviderGCE
		c.Sim = controlplane.SimConfig{Speed: 0, ServeGCE: "127.0.0.1:0"}
		c.GCE = gce.Config{Project: "refuel-test", Zones: []string{"us-central1-a"}, PollInterval: 100 * time.Millisecond}
	})
	g := gcloudCLI{t: t, endpoint: s.GCEEndpoint, config: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	js := quickJob("gcloud-run", spec.TierFlexible)
	js.Work = spec.Duration(30 * time.Second)
	js.Resources.InstanceTypes = []string{"a2-highgpu-1g"}
	run, err := jobs.Submit(ctx, s.Client, js)
	if err != nil {
		t.Fatal(err)
	}
	running := func(not string) *training.Status {
		t.Helper()
		st, err := jobs.WaitFor(ctx, s.Client, js.ID, func(st training.Status) bool {
			return st.LastCheckpoint != nil && st.Instance != nil && st.Instance.ID != not && st.State == workflows.StateRunning
		})
		if err != nil {
			t.Fatal(err)
		}
		return &st
	}
	first := running("").Instance
	var listed *gcloudInstance
	for _, in := range g.list() {
		if in.Name == first.ID {
			listed = &in
		}
	}
	if listed == nil || listed.Labels["refuel-run"] != js.ID || listed.Labels["refuel-deployment"] == "" {
		t.Fatalf("gcloud lists %+v; want %s with labels refuel-run=%s and refuel-deployment", g.list(), first.ID, js.ID)
	}

	// --async: gcloud would otherwise read the instance back once the
	// event's operation is done, and the run has deleted it by then.
	g.run("compute", "instances", "simulate-maintenance-event", first.ID, "--zone", "us-central1-a", "--async")
	second := running(first.ID).Instance
	g.run("compute", "instances", "delete", second.ID, "--zone", "us-central1-a")

	var final training.Status
	if err := run.Get(ctx, &final); err != nil {
		t.Fatal(err)
	}
	if final.Preemptions < 1 || final.LastPreemption == nil || final.Recoveries < 2 {
		t.Errorf("preemptions %d (last %+v), recoveries %d; want the maintenance event's preemption and two recoveries", final.Preemptions, final.LastPreemption, final.Recoveries)
	}
	want := trainer.Train(trainer.Config{Steps: final.TotalSteps, Seed: trainer.DefaultSeed}).Digest()
	if final.ModelDigest != want {
		t.Errorf("final model %s; want the uninterrupted %s", final.ModelDigest, want)
	}
	if left := g.list(); len(left) != 0 {
		t.Errorf("gcloud lists %+v after the run; want none", left)
	}
}
