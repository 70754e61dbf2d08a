package sim

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/local"
)

// fakeAgent is a node agent made of sh: it notes its pid, reports ready
// and sleeps; a broken one exits at once.
func fakeAgent(broken bool) func(local.AgentLaunch) []string {
	return func(l local.AgentLaunch) []string {
		if broken {
			return []string{"sh", "-c", "exit 3"}
		}
		return []string{"sh", "-c", "echo $$ > " + filepath.Join(l.Dir, "pid") + "; touch " + l.ReadyFile + "; exec sleep 600"}
	}
}

func newAgentCloud(t *testing.T, trace []int, broken bool) (*Cloud, string) {
	t.Helper()
	dir := t.TempDir()
	c, err := New(Config{
		Launcher:     local.LauncherConfig{AgentCommand: fakeAgent(broken), Dir: dir, ReadyTimeout: 10 * time.Second},
		Pools:        []PoolConfig{{Pool: v100A, Spot: points(trace...)}},
		NoticeWindow: 2 * time.Second, // long enough to see the agent alive under notice
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, dir
}

func TestStockDropServesTheNoticeThenKillsTheAgent(t *testing.T) {
	c, dir := newAgentCloud(t, []int{1, 0}, false)
	inst, err := c.Acquire(context.Background(), capacity.Request{RunID: "run", Offerings: []capacity.Offering{
		{Provider: ProviderName, InstanceType: v100A.InstanceType, Zone: v100A.Zone, Market: capacity.Spot, PricePerHour: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := c.Status(inst.ID)
	if st.State != capacity.StateRunning || st.MetadataEndpoint == "" {
		t.Fatalf("after acquire: %s, metadata %q; want running with an endpoint", st.State, st.MetadataEndpoint)
	}
	pidText, err := os.ReadFile(filepath.Join(dir, inst.ID, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if body := imds(t, st.MetadataEndpoint, "spot/instance-action"); body != "404" {
		t.Fatalf("notice before the stock dropped: %s", body)
	}

	c.Advance(1)
	if body := imds(t, st.MetadataEndpoint, "spot/instance-action"); !strings.Contains(body, `"action":"terminate"`) {
		t.Fatalf("notice after the stock dropped: %s; want a terminate action", body)
	}
	if syscall.Kill(pid, 0) != nil {
		t.Fatal("the agent died before its notice ran out")
	}
	deadline := time.Now().Add(20 * time.Second) // hang guard only
	for syscall.Kill(pid, 0) == nil || state(t, c, inst.ID) != capacity.StateTerminated {
		if time.Now().After(deadline) {
			t.Fatalf("agent %d still alive or instance %s not terminated after the notice", pid, state(t, c, inst.ID))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st, _ := c.Status(inst.ID); st.Reason != ReasonSpotTermination {
		t.Errorf("ended for %v; want a spot termination", st.Reason)
	}
}

func TestBrokenAgentIsAnInitFailure(t *testing.T) {
	c, _ := newAgentCloud(t, []int{3}, true)
	_, err := c.Acquire(context.Background(), capacity.Request{RunID: "run", Offerings: []capacity.Offering{
		{Provider: ProviderName, InstanceType: v100A.InstanceType, Zone: v100A.Zone, Market: capacity.OnDemand},
	}})
	if capacity.ClassOf(err) != capacity.InitFailure {
		t.Fatalf("acquire with a broken agent: %v; want init-failure", err)
	}
	st, err := c.Launch(context.Background(), LaunchRequest{Offers: []Offer{offer(v100A, capacity.OnDemand)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := waitSettled(t, c, st.ID); got.State != capacity.StateTerminated || got.Reason != ReasonLaunchFailure {
		t.Errorf("launched without waiting: %s (%v); want terminated by a launch failure", got.State, got.Reason)
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
