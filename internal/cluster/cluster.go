// Package cluster connects refuel's binaries to a Temporal cluster: an
// external one named by the standard TEMPORAL_* environment and profiles
// (address, namespace, TLS, API key), or the embedded dev server.
package cluster

import (
	"context"
	"fmt"
	"os"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
)

// Defaults of the embedded stack (design section 3).
const (
	DefaultNamespace    = "default"
	DefaultFrontendAddr = "127.0.0.1:7233"
	DefaultUIAddr       = "127.0.0.1:8233"
	DefaultMetricsAddr  = "127.0.0.1:9464"
)

// Target says which cluster to talk to. Empty fields fall back to the
// TEMPORAL_* environment and the active profile, then to the defaults.
type Target struct {
	Address   string
	Namespace string
}

// External reports whether an external cluster is configured, by flag,
// TEMPORAL_ADDRESS or a profile; otherwise the embedded server is used.
func External(t Target) bool {
	if t.Address != "" || os.Getenv("TEMPORAL_ADDRESS") != "" {
		return true
	}
	opts, err := envconfig.LoadDefaultClientOptions()
	return err == nil && opts.HostPort != ""
}

// Options resolves the client options for a target.
func Options(t Target) (client.Options, error) {
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return client.Options{}, fmt.Errorf("temporal client settings (TEMPORAL_* environment or profile): %w", err)
	}
	if t.Address != "" {
		opts.HostPort = t.Address
	}
	if opts.HostPort == "" {
		opts.HostPort = DefaultFrontendAddr
	}
	if t.Namespace != "" {
		opts.Namespace = t.Namespace
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	return opts, nil
}

// Dial connects and checks the connection, with an error that says what
// to fix when nothing answers.
func Dial(ctx context.Context, opts client.Options) (client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("cannot reach Temporal at %s (namespace %s): %w; start the stack with `make run` or `go run ./worker`, or set TEMPORAL_ADDRESS", opts.HostPort, opts.Namespace, err)
	}
	return c, nil
}
