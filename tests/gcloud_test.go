package tests

import (
	"context"
	"encoding/json"
	"fmt"
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
	out, err := g.try(args...)
	if err != nil {
		g.t.Fatal(err)
	}
	return out
}

// try is run that returns its failure, the command and what gcloud said
// in it, for a caller that may expect one.
func (g gcloudCLI) try(args ...string) ([]byte, error) {
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
		return out, fmt.Errorf("gcloud %s: %w\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return out, nil
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
	parallelFirst(t) // about two minutes here, more beside other tests
	wf := registry.New()
	wf.Run.HeartbeatTimeout, wf.Run.RestartBackoff = 5*time.Second, time.Second
	s := startStack(t, func(c *controlplane.Config) {
		c.Workflows = wf
		c.Provider = controlplane.ProviderGCE
		c.Sim = controlplane.SimConfig{Speed: 0, ServeGCE: "127.0.0.1:0"}
		c.GCE = gce.Config{Project: "refuel-test", Zones: []string{"us-central1-a"}, PollInterval: 100 * time.Millisecond}
	})
	g := gcloudCLI{t: t, endpoint: s.GCEEndpoint, config: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute) // a bound: about 2 minutes here
	defer cancel()
	js := quickJob("gcloud-run", spec.TierFlexible)
	// Work enough that the run is still on its replacement when the
	// gcloud commands, seconds each under load, come to delete it: with
	// 30 s a loaded machine saw the run complete first.
	js.Work = spec.Duration(90 * time.Second)
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
	// Under load the run can leave an instance on its own (a heartbeat
	// late past its 5 s timeout, then a restart) between our reading which
	// it holds and a gcloud command on it. Each step takes the instance
	// held now, and is tried again on the next one only where the run had
	// moved on before the command came.
	onHeld := func(not string, act func(id string) error) string {
		t.Helper()
		for {
			id := running(not).Instance.ID
			err := act(id)
			if err == nil {
				return id
			}
			if now := running(""); now.Instance.ID == id {
				t.Fatal(err) // the instance is still the run's: a real failure
			}
			t.Logf("the run left %s before gcloud reached it; again on the next: %v", id, err)
		}
	}
	first := onHeld("", func(id string) error {
		for _, in := range g.list() {
			if in.Name != id {
				continue
			}
			if in.Labels["refuel-run"] != js.ID || in.Labels["refuel-deployment"] == "" {
				t.Fatalf("gcloud lists %s with labels %v; want refuel-run=%s and refuel-deployment", id, in.Labels, js.ID)
			}
			return nil
		}
		return fmt.Errorf("gcloud does not list %s", id)
	})

	// --async: gcloud would otherwise read the instance back once the
	// event's operation is done, and the run has deleted it by then.
	maintained := onHeld("", func(id string) error {
		_, err := g.try("compute", "instances", "simulate-maintenance-event", id, "--zone", "us-central1-a", "--async")
		return err
	})
	onHeld(maintained, func(id string) error {
		_, err := g.try("compute", "instances", "delete", id, "--zone", "us-central1-a")
		return err
	})
	t.Logf("listed %s; a maintenance event on %s; deleted its replacement", first, maintained)

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
