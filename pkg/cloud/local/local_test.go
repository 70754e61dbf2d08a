package local

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/metadata"
	"refuel/pkg/spec"
)

// fakeAgent is a node agent made of sh: it reports ready and sleeps, or
// exits at once when broken.
func fakeAgent(broken bool) func(AgentLaunch) []string {
	return func(l AgentLaunch) []string {
		if broken {
			return []string{"sh", "-c", "exit 3"}
		}
		return []string{"sh", "-c", "touch " + l.ReadyFile + "; exec sleep 600"}
	}
}

func newCloud(t *testing.T, stock map[string]int, broken bool) *Cloud {
	t.Helper()
	c, err := New(Config{LauncherConfig: LauncherConfig{AgentCommand: fakeAgent(broken), Dir: t.TempDir(), ReadyTimeout: 5 * time.Second}, Stock: stock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func request(run string, attempt int, os ...capacity.Offering) capacity.Request {
	return capacity.Request{RunID: run, Attempt: attempt, Offerings: os}
}

func TestAcquireReleaseAndIdempotency(t *testing.T) {
	ctx := context.Background()
	offs := DefaultOfferings()
	c := newCloud(t, nil, false)
	inst, err := c.Acquire(ctx, request("run-1", 1, offs[0]))
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Acquire(ctx, request("run-1", 1, offs[0]))
	if err != nil || again.ID != inst.ID {
		t.Fatalf("retried acquire gave %v, %v; want the same instance %s", again.ID, err, inst.ID)
	}
	if list, _ := c.List(ctx, map[string]string{capacity.TagRun: "run-1"}); len(list) != 1 {
		t.Fatalf("List by run tag = %d instances; want 1", len(list))
	}
	if inst.TaskQueue != TaskQueueFor(inst.ID) || inst.Tags[capacity.TagManagedBy] != capacity.ManagedBy {
		t.Errorf("instance %+v lacks its task queue or tags", inst)
	}
	// A gang's peers reach rank 0's instance on this machine.
	if inst.Address != metadata.Loopback {
		t.Errorf("instance address %q; want %s", inst.Address, metadata.Loopback)
	}
	if got, _, _ := c.Describe(ctx, inst.ID); got.Address != metadata.Loopback {
		t.Errorf("described address %q; want %s", got.Address, metadata.Loopback)
	}
	if err := c.Release(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, inst.ID); !capacity.IsNotFound(err) {
		t.Errorf("second release: %v; want NotFound", err)
	}
}

func TestAcquireFailsOverAndClassifies(t *testing.T) {
	ctx := context.Background()
	offs := DefaultOfferings() // spot a, on-demand a, spot b, on-demand b
	c := newCloud(t, map[string]int{offs[0].Key(): 0}, false)
	inst, err := c.Acquire(ctx, request("run-2", 1, offs[0], offs[2]))
	if err != nil {
		t.Fatal(err)
	}
	if inst.Offering != offs[2] {
		t.Errorf("acquired %s; want failover to %s", inst.Offering.Key(), offs[2].Key())
	}

	_, err = c.Acquire(ctx, request("run-3", 1, offs[0],
		capacity.Offering{Provider: ProviderName, InstanceType: "gpu.1x", Zone: "x", Market: capacity.Spot},
		capacity.Offering{Provider: ProviderName, InstanceType: "tpu", Zone: "local-a", Market: capacity.Spot}))
	fs := capacity.Failures(err)
	if len(fs) != 3 || fs[0].Class != capacity.NoCapacity || fs[1].Class != capacity.SpecMismatch || fs[2].Class != capacity.Config {
		t.Fatalf("failures %v; want no-capacity, spec-mismatch (a type sold elsewhere), config (a type it has nowhere)", err)
	}
	if !strings.Contains(fs[2].Message, "fix resources.instance_types or the pools file") {
		t.Errorf("config failure %q says nothing of what to fix", fs[2].Message)
	}
}

func TestBrokenAgentIsAnInitFailure(t *testing.T) {
	c := newCloud(t, nil, true)
	_, err := c.Acquire(context.Background(), request("run-4", 1, DefaultOfferings()[0]))
	if capacity.ClassOf(err) != capacity.InitFailure {
		t.Fatalf("error %v; want init-failure", err)
	}
	if list, _ := c.List(context.Background(), nil); len(list) != 0 {
		t.Errorf("a failed launch left %v", list)
	}
}

func TestInterruptServesNoticeThenTakesTheInstance(t *testing.T) {
	ctx := context.Background()
	c := newCloud(t, nil, false)
	inst, err := c.Acquire(ctx, request("run-5", 1, DefaultOfferings()[0]))
	if err != nil {
		t.Fatal(err)
	}
	p := c.launcher.machine(inst.ID)
	endpoint, pid := p.meta.Endpoint(), p.cmd.Process.Pid
	if body := imds(t, endpoint, "spot/instance-action"); body != "404" {
		t.Fatalf("before the notice: %s; want 404", body)
	}
	if _, err := c.Interrupt(inst.ID, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if body := imds(t, endpoint, "spot/instance-action"); !strings.Contains(body, `"action":"terminate"`) {
		t.Errorf("notice %s; want a terminate action", body)
	}
	if _, state, _ := c.Describe(ctx, inst.ID); state != capacity.StateInterrupted {
		t.Errorf("state %s after notice; want interrupted", state)
	}
	// The process goes at the end of the grace; the cloud says terminated
	// once it has reaped it.
	deadline := time.Now().Add(10 * time.Second)
	state := capacity.StateInterrupted
	for (syscall.Kill(pid, 0) == nil || state != capacity.StateTerminated) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		_, state, _ = c.Describe(ctx, inst.ID)
	}
	if state != capacity.StateTerminated || syscall.Kill(pid, 0) == nil {
		t.Errorf("state %s after the grace, process alive %v; want terminated and gone", state, syscall.Kill(pid, 0) == nil)
	}
}

func TestOfferingsMatchResources(t *testing.T) {
	c := newCloud(t, nil, false)
	got, _ := c.Offerings(context.Background(), spec.Resources{GPUs: 1, Zones: []string{"local-b"}, MaxPricePerHour: 1})
	if len(got) != 1 || got[0].Zone != "local-b" || got[0].Market != capacity.Spot {
		t.Errorf("offerings %v; want the one spot offering in local-b", got)
	}
}

// imds reads a metadata path the IMDSv2 way: token first.
func imds(t *testing.T, endpoint, path string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, endpoint+"/latest/api/token", nil)
	req.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "60")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	req, _ = http.NewRequest(http.MethodGet, endpoint+"/latest/meta-data/"+path, nil)
	req.Header.Set("X-aws-ec2-metadata-token", string(tok))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return "404"
	}
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestNewRequiresAgentCommand(t *testing.T) {
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "AgentCommand") {
		t.Errorf("New without AgentCommand: %v", err)
	}
}

func TestSetStockComesAndGoes(t *testing.T) {
	ctx := context.Background()
	spot := DefaultOfferings()[0]
	stock := map[string]int{spot.Key(): 0}
	c := newCloud(t, stock, false)
	try := func(attempt int) error {
		_, err := c.Acquire(ctx, request("run-1", attempt, spot))
		return err
	}
	var ce *capacity.Error
	if err := try(1); !errors.As(err, &ce) || ce.Class != capacity.NoCapacity {
		t.Fatalf("out of stock: %v; want no-capacity", err)
	}
	c.SetStock(spot.Key(), 1)
	if stock[spot.Key()] != 0 {
		t.Error("SetStock changed the caller's map")
	}
	if err := try(2); err != nil {
		t.Fatalf("in stock: %v", err)
	}
	if err := try(3); !errors.As(err, &ce) || ce.Class != capacity.NoCapacity {
		t.Fatalf("the one in stock is running: %v; want no-capacity", err)
	}
	c.SetStock(spot.Key(), -1)
	if err := try(4); err != nil {
		t.Fatalf("cap lifted: %v", err)
	}
}

// TestAgentsGetOnlyWhatTheyNeed starts an agent that writes its own
// environment down: the launcher's Env and the machine's variables are
// there (this host's, as an image's: the BLAS and NCCL settings), the
// worker's cloud credentials and Temporal settings are not.
func TestAgentsGetOnlyWhatTheyNeed(t *testing.T) {
	t.Setenv("OPENBLAS_CORETYPE", "Haswell")
	t.Setenv("NCCL_SOCKET_IFNAME", "eth0")
	t.Setenv("TEMPORAL_API_KEY", "worker-api-key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "worker-secret")
	t.Setenv("AWS_ACCESS_KEY_ID", "worker-key-id")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "/etc/worker-sa.json")
	t.Setenv("LC_ALL", "C.UTF-8")
	dir := t.TempDir()
	envFile := filepath.Join(dir, "agent.env")
	l, err := NewLauncher(LauncherConfig{
		AgentCommand: func(a AgentLaunch) []string {
			return []string{"/bin/sh", "-c", "env > " + envFile + "; touch " + a.ReadyFile + "; exec sleep 600"}
		},
		Dir: filepath.Join(dir, "instances"), ReadyTimeout: 5 * time.Second,
		Env: []string{"TEMPORAL_API_KEY=agent-key", "REFUEL_CODEC_KEYS=/keys"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Start(context.Background(), "i-env"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	env := string(data)
	for _, want := range []string{"TEMPORAL_API_KEY=agent-key", "REFUEL_CODEC_KEYS=/keys", "PATH=", "LC_ALL=C.UTF-8", "OPENBLAS_CORETYPE=Haswell", "NCCL_SOCKET_IFNAME=eth0"} {
		if !strings.Contains(env, want) {
			t.Errorf("agent environment lacks %s:\n%s", want, env)
		}
	}
	for _, leaked := range []string{"worker-secret", "worker-key-id", "worker-sa.json", "worker-api-key"} {
		if strings.Contains(env, leaked) {
			t.Errorf("agent environment holds the worker's %s:\n%s", leaked, env)
		}
	}
	for _, d := range []string{filepath.Join(dir, "instances"), filepath.Join(dir, "instances", "i-env")} {
		if info, err := os.Stat(d); err != nil {
			t.Error(err)
		} else if info.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v, want 0700", d, info.Mode().Perm())
		}
	}
	if info, err := os.Stat(filepath.Join(dir, "instances", "i-env", "agent.log")); err != nil {
		t.Error(err)
	} else if info.Mode().Perm() != 0o600 {
		t.Errorf("agent.log: mode %v, want 0600", info.Mode().Perm())
	}
}
