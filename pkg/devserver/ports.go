package devserver

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// loopback is where the services that only talk to each other listen. They
// never use fixed ports, so they cannot clash with 7233/8233 or with another
// embedded server in the same process.
const loopback = "127.0.0.1"

// ports are the addresses one server binds.
type ports struct {
	// frontend is host:port as asked for in Options, with port 0 resolved.
	frontend string
	// The rest are on loopback, picked free for every start.
	frontendHTTP, history, matching, worker int
	// internalFrontend serves the server's own clients when the public
	// frontend is guarded (TLS or API keys).
	internalFrontend, internalFrontendHTTP int
}

// The server binds its ports itself, so a port picked for it is free for a
// moment and then bound. The kernel gives ports of its ephemeral range to
// every outgoing connection, and one made in that moment could take a port
// picked from it. Ports are therefore picked outside that range, where only
// an explicit bind can take them, and a start whose bind still fails is
// tried again on other ports (bindAttempts).
const (
	// lowestPicked keeps picks clear of the ports services are usually
	// configured on (PostgreSQL's 5432, Temporal's 7233, refuel's 9464, …).
	lowestPicked = 10000
	highestPort  = 65535
	// picksPerPort bounds the random tries for one free port.
	picksPerPort = 100
)

// gangPorts are never picked: a gang's rank 0 listens for the other ranks
// on a port of this range derived from its run (workflows.masterPort), on
// the loopback of the local and simulated clouds, where a server port
// picked there could take it, or be dialled by a rank looking for it.
var gangPorts = portRange{20000, 29999}

// ephemeralRangeFile is where Linux keeps the range it hands out.
const ephemeralRangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// portRange is a span of port numbers, both ends included.
type portRange struct{ lo, hi int }

func (r portRange) size() int { return r.hi - r.lo + 1 }

// linuxEphemeral is Linux's default range, assumed where the file cannot be
// read.
var linuxEphemeral = portRange{32768, 60999}

// ephemeralRange is the kernel's range of ports for outgoing connections.
func ephemeralRange() portRange {
	b, err := os.ReadFile(ephemeralRangeFile)
	if err != nil {
		return linuxEphemeral
	}
	r, err := parsePortRange(string(b))
	if err != nil {
		return linuxEphemeral
	}
	return r
}

// parsePortRange reads ip_local_port_range's "LOW<whitespace>HIGH".
func parsePortRange(s string) (portRange, error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return portRange{}, fmt.Errorf("port range %q: want two numbers", s)
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err := errors.Join(err1, err2); err != nil || lo < 1 || hi > highestPort || lo > hi {
		return portRange{}, fmt.Errorf("port range %q: want 1 <= LOW <= HIGH <= %d", s, highestPort)
	}
	return portRange{lo, hi}, nil
}

// pickable are the ranges ports are picked from: from lowestPicked to the
// top, without the ephemeral range and gangPorts. Empty when those cover it
// all.
func pickable(ephemeral portRange) []portRange {
	var out []portRange
	for _, r := range []portRange{{lowestPicked, ephemeral.lo - 1}, {max(ephemeral.hi+1, lowestPicked), highestPort}} {
		out = append(out, without(r, gangPorts)...)
	}
	return out
}

// without is what is left of r once the ports of hole are taken out.
func without(r, hole portRange) []portRange {
	var out []portRange
	for _, part := range []portRange{{r.lo, min(r.hi, hole.lo-1)}, {max(r.lo, hole.hi+1), r.hi}} {
		if part.size() > 0 {
			out = append(out, part)
		}
	}
	return out
}

// pickPorts resolves the frontend address and picks free internal ports.
func pickPorts(frontendAddr string) (ports, error) {
	frontend, err := reserveAddr("frontend", frontendAddr)
	if err != nil {
		return ports{}, err
	}
	free, err := freePorts(loopback, 6)
	if err != nil {
		return ports{}, err
	}
	return ports{frontend: frontend, frontendHTTP: free[0], history: free[1], matching: free[2], worker: free[3],
		internalFrontend: free[4], internalFrontendHTTP: free[5]}, nil
}

// reserveAddr checks that addr can be bound and returns it with port 0
// replaced by a free port outside the ephemeral range. The port is
// released again before the server binds it; startMu keeps other servers
// in this process from taking it in between. role names the address in
// errors.
func reserveAddr(role, addr string) (string, error) {
	out, l, err := holdAddr(role, addr)
	if err != nil {
		return "", err
	}
	return out, l.Close()
}

// holdAddr is reserveAddr that keeps the port bound: the caller closes the
// listener just before its server binds the address, so that nothing,
// in this process or another, can take the port while the server starts.
func holdAddr(role, addr string) (string, net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", nil, fmt.Errorf("devserver: %s address %q: %w", role, addr, err)
	}
	switch host {
	case "localhost":
		host = loopback
	case "":
		host = "0.0.0.0"
	}
	if net.ParseIP(host) == nil {
		return "", nil, fmt.Errorf("devserver: %s address %q: host must be an IP address", role, addr)
	}
	if port == "0" {
		l, err := listenPicked(host, pickable(ephemeralRange()))
		if err != nil {
			return "", nil, err
		}
		return net.JoinHostPort(host, strconv.Itoa(l.Addr().(*net.TCPAddr).Port)), l, nil
	}
	addr = net.JoinHostPort(host, port)
	l, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return "", nil, fmt.Errorf("devserver: %s %w: %s: is another refuel worker or Temporal dev server running? "+
			"Choose another address with the flag or environment variable that sets it", role, ErrAddrInUse, addr)
	}
	if err != nil {
		return "", nil, fmt.Errorf("devserver: %s address %s: %w", role, addr, err)
	}
	return addr, l, nil
}

// FreePort is a port free on host now and outside the kernel's ephemeral
// range, so no outgoing connection is given it later: for a server that
// must bind the same port again after it has been down a while.
func FreePort(host string) (int, error) {
	free, err := freePorts(host, 1)
	if err != nil {
		return 0, err
	}
	return free[0], nil
}

// freePorts returns n distinct free ports on host, outside the kernel's
// ephemeral range. All n listeners are open at once, so no port is
// returned twice.
func freePorts(host string, n int) ([]int, error) {
	ranges := pickable(ephemeralRange())
	ports := make([]int, 0, n)
	for range n {
		l, err := listenPicked(host, ranges)
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// listenPicked listens on a random port of ranges that is free on host.
// With no ranges (an ephemeral range that covers every port) the kernel
// picks, and bindAttempts is what is left against the race.
func listenPicked(host string, ranges []portRange) (net.Listener, error) {
	total := 0
	for _, r := range ranges {
		total += r.size()
	}
	if total == 0 {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("devserver: pick a free port on %s: %w", host, err)
		}
		return l, nil
	}
	var lastErr error
	for range picksPerPort {
		port := nthPort(ranges, rand.IntN(total))
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err == nil {
			return l, nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("devserver: no free port on %s in %v after %d tries: %w", host, ranges, picksPerPort, lastErr)
}

// nthPort is the i-th port of ranges counted in order.
func nthPort(ranges []portRange, i int) int {
	for _, r := range ranges {
		if i < r.size() {
			return r.lo + i
		}
		i -= r.size()
	}
	panic("devserver: port index out of ranges")
}
