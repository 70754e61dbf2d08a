package devserver

import (
	"errors"
	"fmt"
	"net"
	"strconv"
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
// replaced by a free port. The port is released again before the server
// binds it; startMu keeps other servers in this process from taking it in
// between. role names the address in errors.
func reserveAddr(role, addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("devserver: %s address %q: %w", role, addr, err)
	}
	switch host {
	case "localhost":
		host = loopback
	case "":
		host = "0.0.0.0"
	}
	if net.ParseIP(host) == nil {
		return "", fmt.Errorf("devserver: %s address %q: host must be an IP address", role, addr)
	}
	addr = net.JoinHostPort(host, port)

	l, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return "", fmt.Errorf("devserver: %s %w: %s: is another refuel worker or Temporal dev server running? "+
			"Choose another address with the flag or environment variable that sets it", role, ErrAddrInUse, addr)
	}
	if err != nil {
		return "", fmt.Errorf("devserver: %s address %s: %w", role, addr, err)
	}
	defer l.Close()
	return net.JoinHostPort(host, strconv.Itoa(l.Addr().(*net.TCPAddr).Port)), nil
}

// freePorts returns n distinct free ports on host. All n listeners are open
// at once, so the kernel cannot hand out the same port twice.
func freePorts(host string, n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("devserver: pick a free port on %s: %w", host, err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
