package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"refuel/pkg/capacity"
)

// The fault injectors of the kill tests: processes the tests start and
// kill, the processes of an instance found by their command lines, and a
// gate that holds a worker's cloud calls on their way.

// process is a refuel binary a test runs in the background, its output
// in a log file shown when the test fails.
type process struct {
	name   string
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
	err    error // how it exited, once exited is closed
}

// startProcess starts argv with env; the test's cleanup stops it (SIGTERM,
// then SIGKILL) if it still runs.
func startProcess(t *testing.T, name string, env []string, argv ...string) *process {
	t.Helper()
	return startProcessWith(t, name, env, nil, argv...)
}

// startProcessWith is startProcess with attributes for the process (whose
// user it runs as, …); nil for none.
func startProcessWith(t *testing.T, name string, env []string, attr *syscall.SysProcAttr, argv ...string) *process {
	t.Helper()
	p := &process{name: name, log: filepath.Join(t.TempDir(), name+".log"), exited: make(chan struct{})}
	logFile, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Env, p.cmd.Stdout, p.cmd.Stderr, p.cmd.SysProcAttr = env, logFile, logFile, attr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		_ = logFile.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		if p.running() {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.exited:
			case <-time.After(30 * time.Second):
				p.kill()
			}
		}
		if t.Failed() {
			b, _ := os.ReadFile(p.log)
			t.Logf("%s (pid %d) log:\n%s", p.name, p.cmd.Process.Pid, tail(string(b), 40))
		}
	})
	return p
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL, which no handler sees, and waits for the exit.
func (p *process) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// stop sends SIGTERM and waits for a clean exit.
func (p *process) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if p.err != nil {
			t.Errorf("%s exited with %v after SIGTERM", p.name, p.err)
		}
	case <-time.After(30 * time.Second):
		p.kill()
		t.Errorf("%s did not exit within 30s of SIGTERM", p.name)
	}
}

// waitReady polls url until it answers 200, failing if the process exits
// first.
func (p *process) waitReady(t *testing.T, url string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if code, _ := get(url); code == http.StatusOK {
			return
		}
		if !p.running() {
			t.Fatalf("%s exited before %s answered: %v", p.name, url, p.err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s not ready after %s", p.name, url, within)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// identity is the Temporal identity a refuel worker process polls with.
func (p *process) identity() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%d@%s@refuel", p.pid(), host)
}

// agentOf finds the node agent of an instance by its command line
// (`agent … --instance-id ID …`) and the trainer it runs (`trainer`, a
// child of that agent). trainer is 0 when none runs now.
func agentOf(exe, instanceID string) (agent, trainer int) {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		args := cmdline(pid)
		if len(args) < 2 || args[0] != exe {
			continue
		}
		switch args[1] {
		case "agent":
			for i := 2; i+1 < len(args); i++ {
				if args[i] == "--instance-id" && args[i+1] == instanceID {
					agent = pid
				}
			}
		case "trainer":
			children[parentOf(pid)] = append(children[parentOf(pid)], pid)
		}
	}
	if kids := children[agent]; agent != 0 && len(kids) > 0 {
		trainer = kids[0]
	}
	return agent, trainer
}

func cmdline(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

func parentOf(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// alive reports whether pid runs (a zombie has exited).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	return err == nil && !strings.Contains(string(b), "State:\tZ")
}

// ec2Gate stands between one worker and the EC2 endpoint. Closed, it
// holds the worker's launches (CreateFleet) and its first termination
// (TerminateInstances) on their way, and lets every other call through:
// the worker is then mid-acquire and mid-release for as long as the test
// likes. Opened, it forwards what it held, even for a worker that died
// meanwhile, as a call already on the wire reaches the cloud.
type ec2Gate struct {
	proxy *httputil.ReverseProxy

	mu      sync.Mutex
	closed  bool
	opened  chan struct{}
	held    map[string]int // calls held now, by action
	holding int            // TerminateInstances held since the gate closed
}

func newEC2Gate(endpoint string) (*ec2Gate, error) {
	target, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	return &ec2Gate{proxy: httputil.NewSingleHostReverseProxy(target), opened: make(chan struct{}), held: map[string]int{}}, nil
}

// close starts holding calls.
func (g *ec2Gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed, g.opened, g.holding = true, make(chan struct{}), 0
}

// open forwards every held call and holds no more.
func (g *ec2Gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		g.closed = false
		close(g.opened)
	}
}

// heldNow is how many calls of action the gate holds.
func (g *ec2Gate) heldNow(action string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held[action]
}

func (g *ec2Gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	form, _ := url.ParseQuery(string(body))
	action := form.Get("Action")
	if opened := g.hold(action); opened != nil {
		<-opened
		g.mu.Lock()
		g.held[action]--
		g.mu.Unlock()
	}
	// Not cancelled when the worker's connection goes: its call goes on.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	g.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// hold returns the channel a call of action waits on, nil to let it pass.
func (g *ec2Gate) hold(action string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		return nil
	}
	switch action {
	case "CreateFleet":
	case "TerminateInstances":
		if g.holding > 0 {
			return nil
		}
		g.holding++
	default:
		return nil
	}
	g.held[action]++
	return g.opened
}

// waitUntil polls cond every 100ms until it holds or within passes.
func waitUntil(within time.Duration, cond func() bool) error {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// startAWSWorker starts a control-plane worker binary on the AWS provider
// against the EC2 endpoint (a sim on loopback), on the cluster at
// frontend, and waits until it is ready.
func startAWSWorker(t *testing.T, name, bin, frontend, endpoint string, extra ...string) *process {
	t.Helper()
	env := append(cleanEnv(), "TEMPORAL_ADDRESS="+frontend, "AWS_REGION=us-west-2",
		"AWS_ACCESS_KEY_ID=refuel-test", "AWS_SECRET_ACCESS_KEY=refuel-test", "AWS_EC2_METADATA_DISABLED=true")
	metrics := freeAddr(t)
	argv := append([]string{bin, "--provider", "aws", "--aws-endpoint", endpoint,
		"--data-dir", t.TempDir(), "--metrics", metrics, "--ui", "-", "--log-level", "warn"}, extra...)
	p := startProcess(t, name, env, argv...)
	p.waitReady(t, "http://"+metrics+"/readyz", time.Minute)
	return p
}

// launchedOnce checks that the sim at cloudURL launched exactly one
// instance for each run identity and attempt, ever, and returns how many
// acquisitions launched one and the instances still running.
func launchedOnce(t *testing.T, cloudURL string) (acquisitions int, running []string) {
	t.Helper()
	launched := map[string][]string{}
	for _, inst := range simInstances(t, cloudURL) {
		key := inst.Tags[capacity.TagIdentity] + " attempt " + inst.Tags[capacity.TagAttempt]
		launched[key] = append(launched[key], inst.ID)
		if inst.State != capacity.StateTerminated {
			running = append(running, inst.ID)
		}
	}
	for key, insts := range launched {
		if len(insts) != 1 {
			t.Errorf("%s: %d instances launched (%v); want exactly one", key, len(insts), insts)
		}
	}
	return len(launched), running
}
