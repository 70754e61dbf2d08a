package agent

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"refuel/pkg/devenv"
)

// procNetTCP are the kernel's tables of TCP sockets, IPv4 and IPv6.
var procNetTCP = []string{"/proc/net/tcp", "/proc/net/tcp6"}

// tcpEstablished is the state column's value of an established socket
// in /proc/net/tcp.
const tcpEstablished = "01"

// establishedConnections counts the established TCP connections whose
// local port is port, in the tables given: on Linux, the connections to
// a server listening there. A table that cannot be read (another
// system, IPv6 off) counts none.
func establishedConnections(port int, tables []string) int {
	n := 0
	for _, t := range tables {
		f, err := os.Open(t)
		if err != nil {
			continue
		}
		n += countEstablished(f, port)
		f.Close()
	}
	return n
}

// countEstablished reads one /proc/net/tcp table: a heading, then a line
// per socket whose second field is local_address (hex IP:hex port) and
// fourth the state.
func countEstablished(r io.Reader, port int) int {
	n := 0
	sc := bufio.NewScanner(r)
	sc.Scan() // the heading
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[3] != tcpEstablished {
			continue
		}
		i := strings.LastIndexByte(f[1], ':')
		if i < 0 {
			continue
		}
		if p, err := strconv.ParseUint(f[1][i+1:], 16, 16); err == nil && int(p) == port {
			n++
		}
	}
	return n
}

// gpuProbe asks nvidia-smi how busy the instance's GPUs are. One that is
// not installed is asked no more: no GPU use is ever seen, and that is
// no error.
type gpuProbe struct {
	command string
	absent  bool
}

// gpuQueryTimeout bounds one nvidia-smi call: a wedged driver must not
// hold the samples up.
const gpuQueryTimeout = 5 * time.Second

// utilization is the busiest GPU's utilisation, 0 to 1; ok is false
// when nvidia-smi is absent or did not answer.
func (g *gpuProbe) utilization(ctx context.Context) (share float64, ok bool) {
	if g.absent {
		return 0, false
	}
	ctx, cancel := context.WithTimeout(ctx, gpuQueryTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, g.command, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits").Output()
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		g.absent = true
		return 0, false
	}
	if err != nil {
		return 0, false
	}
	return parseGPUUtilization(string(out))
}

// parseGPUUtilization reads nvidia-smi's answer, one percentage a line
// and GPU, into the busiest GPU's share; ok is false when no line is a
// number ("[N/A]").
func parseGPUUtilization(out string) (share float64, ok bool) {
	for _, line := range strings.Split(out, "\n") {
		pct, err := strconv.ParseFloat(strings.TrimSpace(line), 64)
		if err != nil {
			continue
		}
		share, ok = max(share, pct/100), true
	}
	return min(share, 1), ok
}

// sampleUsage is what the agent sees of an environment's use now.
func (d *devSession) sampleUsage(ctx context.Context) devenv.Sample {
	s := devenv.Sample{Connections: d.cfg.Connections(d.port)}
	s.GPUUtilization, s.GPUKnown = d.gpu.utilization(ctx)
	return s
}
