package agent

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Two lines of a real /proc/net/tcp: a server listening on 8080 (0A)
// and a connection to it (01), with a connection elsewhere.
const procTCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 51296 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F90 0100007F:D3A2 01 00000000:00000000 00:00000000 00000000  1000        0 51300 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:D3A2 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 51299 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:0016 0100007F:E001 01 00000000:00000000 00:00000000 00000000     0        0 51301 1 0000000000000000 20 4 30 10 -1
   4: 0100007F:1F90 0100007F:D3A4 06 00000000:00000000 03:00000BB8 00000000     0        0 0 3 0000000000000000
`

const procTCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1F90 00000000000000000000000001000000:C350 01 00000000:00000000 00:00000000 00000000  1000        0 1 1 0 20 4 30 10 -1
`

func TestCountEstablished(t *testing.T) {
	cases := map[string]struct {
		table string
		port  int
		want  int
	}{
		"the server's one connection, not the listener nor the one in TIME_WAIT": {procTCP, 8080, 1},
		"another port":  {procTCP, 22, 1},
		"no connection": {procTCP, 9999, 0},
		"IPv6":          {procTCP6, 8080, 1},
		"empty":         {"", 8080, 0},
		"garbage":       {"heading\nnot a table\n1: x 01\n", 8080, 0},
	}
	for name, tc := range cases {
		if got := countEstablished(strings.NewReader(tc.table), tc.port); got != tc.want {
			t.Errorf("%s: %d; want %d", name, got, tc.want)
		}
	}
}

// On this machine's own tables: a connection to a listener is counted
// while it is open, from either table; a missing table counts nothing.
func TestEstablishedConnectionsOnThisMachine(t *testing.T) {
	if _, err := os.Stat(procNetTCP[0]); err != nil {
		t.Skip("no /proc/net/tcp here")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	tables := append([]string{"/nonexistent/tcp"}, procNetTCP...)
	if n := establishedConnections(port, tables); n != 0 {
		t.Fatalf("%d connections before any; want 0", n)
	}
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if n := establishedConnections(port, tables); n != 1 {
		t.Errorf("%d connections while one is open; want 1", n)
	}
	c.Close()
	s.Close()
}

func TestParseGPUUtilization(t *testing.T) {
	cases := map[string]struct {
		out   string
		share float64
		ok    bool
	}{
		"one GPU":           {"37\n", 0.37, true},
		"the busiest of 2":  {"12\n80\n", 0.8, true},
		"not supported":     {"[N/A]\n", 0, false},
		"some not answered": {"[N/A]\n5\n", 0.05, true},
		"nothing":           {"", 0, false},
	}
	for name, tc := range cases {
		share, ok := parseGPUUtilization(tc.out)
		if share != tc.share || ok != tc.ok {
			t.Errorf("%s: %g, %v; want %g, %v", name, share, ok, tc.share, tc.ok)
		}
	}
}

func TestGPUProbe(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		must(os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
		return p
	}
	cases := map[string]struct {
		command string
		share   float64
		ok      bool
		absent  bool
	}{
		"answers":          {script("busy", `echo 3; echo 64`), 0.64, true, false},
		"a driver failure": {script("broken", `echo "NVIDIA-SMI has failed" >&2; exit 9`), 0, false, false},
		"not installed":    {filepath.Join(dir, "nvidia-smi"), 0, false, true},
		"not on the PATH":  {"no-such-nvidia-smi-here", 0, false, true},
	}
	for name, tc := range cases {
		g := &gpuProbe{command: tc.command}
		share, ok := g.utilization(context.Background())
		if share != tc.share || ok != tc.ok || g.absent != tc.absent {
			t.Errorf("%s: %g, %v, absent %v; want %g, %v, absent %v", name, share, ok, g.absent, tc.share, tc.ok, tc.absent)
		}
	}
}

func TestChoosePort(t *testing.T) {
	cases := map[string]struct {
		dev  Dev
		want int // 0: any free port
	}{
		"a loopback host":        {Dev{Host: "127.0.0.1"}, 0},
		"IPv6 loopback":          {Dev{Host: "::1"}, 0},
		"localhost":              {Dev{Host: "localhost"}, 0},
		"a shared host":          {Dev{Host: "build-7", SharedHost: true}, 0},
		"a port asked for":       {Dev{Host: "127.0.0.1", Port: 2222}, 2222},
		"a port asked for alone": {Dev{Host: "10.0.0.7", Port: 2222}, 2222},
	}
	for name, tc := range cases {
		got, err := tc.dev.choosePort()
		switch {
		case err != nil:
			t.Errorf("%s: %v", name, err)
		case tc.want != 0 && got != tc.want:
			t.Errorf("%s: port %d; want %d", name, got, tc.want)
		case tc.want == 0 && (got == DefaultDevPort || got < 1024):
			t.Errorf("%s: port %d; want a free one the kernel chose", name, got)
		}
	}
}

// On an instance of its own the command gets DefaultDevPort, or a free
// port where something already listens there (a second machine joined
// from the same host, another program).
func TestChoosePortOnItsOwnInstance(t *testing.T) {
	own := Dev{Host: "10.0.0.7"}
	if l, err := net.Listen("tcp", ":"+strconv.Itoa(DefaultDevPort)); err == nil {
		l.Close()
		if got, err := own.choosePort(); err != nil || got != DefaultDevPort {
			t.Errorf("the usual port free: port %d, %v; want %d", got, err, DefaultDevPort)
		}
	}
	held, err := net.Listen("tcp", ":"+strconv.Itoa(DefaultDevPort))
	if err != nil {
		t.Logf("port %d is held by another program: %v", DefaultDevPort, err)
	} else {
		defer held.Close()
	}
	got, err := own.choosePort()
	if err != nil || got == DefaultDevPort || got < 1024 {
		t.Errorf("the usual port held: port %d, %v; want a free one the kernel chose", got, err)
	}
}

func TestDevConfigErrors(t *testing.T) {
	for name, d := range map[string]Dev{
		"no workspace":        {},
		"relative workspace":  {Workspace: "work"},
		"a port out of range": {Workspace: "/w", Port: 70000},
	} {
		if err := d.setDefaults(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// On a machine with GPUs, the real nvidia-smi's answer reads as a share;
// elsewhere there is nothing to ask.
func TestGPUProbeOnThisMachine(t *testing.T) {
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		t.Skip("no nvidia-smi here")
	}
	g := &gpuProbe{command: "nvidia-smi"}
	share, ok := g.utilization(context.Background())
	if !ok || g.absent || share < 0 || share > 1 {
		t.Errorf("nvidia-smi read as %g, %v (absent %v); want a share from 0 to 1", share, ok, g.absent)
	}
}
