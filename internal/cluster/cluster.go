// Package cluster connects refuel's binaries to a Temporal cluster: an
// external one named by the standard TEMPORAL_* environment and profiles
// (address, namespace, TLS, API key), or the embedded dev server.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"

	"refuel/internal/codec"
)

// Defaults of the embedded stack (docs/contracts.md).
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
	// CodecKeys is the key file payloads are encrypted with (see package
	// codec); default the REFUEL_CODEC_KEYS variable; none encrypts nothing.
	CodecKeys string
	// Env, when not nil, stands in for the process's environment as the
	// source of the TEMPORAL_* settings and REFUEL_CODEC_KEYS, so stacks
	// with different settings can run side by side in one process.
	Env map[string]string
}

// lookup is where t's settings come from.
func (t Target) lookup() envconfig.EnvLookup {
	if t.Env == nil {
		return envconfig.EnvLookupOS
	}
	return mapLookup(t.Env)
}

func (t Target) getenv(key string) string {
	v, _ := t.lookup().LookupEnv(key)
	return v
}

// External reports whether an external cluster is configured, by flag,
// TEMPORAL_ADDRESS or a profile; otherwise the embedded server is used.
func External(t Target) bool {
	if t.Address != "" || t.getenv("TEMPORAL_ADDRESS") != "" {
		return true
	}
	prof, err := loadProfile(t)
	return err == nil && prof.Address != ""
}

// Profile resolves the client settings for a target: the active profile
// and the TEMPORAL_* environment, then t's address and namespace, then the
// defaults.
func Profile(t Target) (envconfig.ClientConfigProfile, error) {
	prof, err := loadProfile(t)
	if err != nil {
		return prof, fmt.Errorf("temporal client settings (TEMPORAL_* environment or profile): %w", err)
	}
	if t.Address != "" {
		prof.Address = t.Address
	}
	if prof.Address == "" {
		prof.Address = DefaultFrontendAddr
	}
	if t.Namespace != "" {
		prof.Namespace = t.Namespace
	}
	if prof.Namespace == "" {
		prof.Namespace = DefaultNamespace
	}
	return prof, nil
}

func loadProfile(t Target) (envconfig.ClientConfigProfile, error) {
	return envconfig.LoadClientConfigProfile(envconfig.LoadClientConfigProfileOptions{EnvLookup: t.lookup()})
}

// Options resolves the client options for a target, encrypting payloads
// when it has codec keys.
func Options(t Target) (client.Options, error) {
	prof, err := Profile(t)
	if err != nil {
		return client.Options{}, err
	}
	opts, err := prof.ToClientOptions(envconfig.ToClientOptionsRequest{})
	if err != nil {
		return client.Options{}, fmt.Errorf("temporal client settings (TEMPORAL_* environment or profile): %w", err)
	}
	c, err := Codec(t)
	if err != nil || c == nil {
		return opts, err
	}
	codec.Apply(&opts, c)
	return opts, nil
}

// CodecKeysFile is the key file of t, "" when it has none.
func CodecKeysFile(t Target) string {
	if t.CodecKeys != "" {
		return t.CodecKeys
	}
	return t.getenv(codec.EnvKeys)
}

// Codec is the payload codec of t's key file, nil without one. A key file
// that cannot be read is an error: never a silent fall back to plaintext.
func Codec(t Target) (*codec.Codec, error) {
	path := CodecKeysFile(t)
	if path == "" {
		return nil, nil
	}
	keys, err := codec.ReadKeys(path)
	if err != nil {
		return nil, fmt.Errorf("--codec-keys (env %s): %w", codec.EnvKeys, err)
	}
	return codec.New(keys)
}

// ConnectEnv is the environment another refuel process (a node agent)
// needs to connect as t does: every TEMPORAL_* variable of t's source
// (address, namespace, TLS files, API key, profile file) and the codec
// key file. Nothing else of this process's environment is in it.
func ConnectEnv(t Target) ([]string, error) {
	var env []string
	for _, kv := range t.lookup().Environ() {
		if strings.HasPrefix(kv, "TEMPORAL_") {
			env = append(env, kv)
		}
	}
	if path := CodecKeysFile(t); path != "" {
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("--codec-keys %s: %w", path, err)
		}
		env = append(env, codec.EnvKeys+"="+abs)
	}
	slices.Sort(env)
	return env, nil
}

// mapLookup is an environment held in a map.
type mapLookup map[string]string

func (m mapLookup) Environ() []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

func (m mapLookup) LookupEnv(key string) (string, bool) {
	v, ok := m[key]
	return v, ok
}

// Dial connects and checks the connection, with an error that says what
// to fix when nothing answers or the cluster refuses the credentials.
func Dial(ctx context.Context, opts client.Options) (client.Client, error) {
	return dial(ctx, opts, false)
}

// DialToCreate connects like Dial to a cluster where the namespace may
// not exist yet, for whoever is about to create it: a namespace the
// cluster does not know is no error (the credentials were accepted).
func DialToCreate(ctx context.Context, opts client.Options) (client.Client, error) {
	return dial(ctx, opts, true)
}

func dial(ctx context.Context, opts client.Options, mayBeMissing bool) (client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, opts)
	var denied *serviceerror.PermissionDenied
	if errors.As(err, &denied) {
		return nil, refused(opts, err)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot reach Temporal at %s (namespace %s): %w; start the stack with `make run` or `go run ./worker`, or set TEMPORAL_ADDRESS", opts.HostPort, opts.Namespace, err)
	}
	// A cluster may let anyone ask for its health and check credentials
	// only on real calls; a first one shows whether they are accepted. A
	// server that just started may not know the namespace for a moment.
	for {
		_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: opts.Namespace})
		var nsNotFound *serviceerror.NamespaceNotFound
		var notFound *serviceerror.NotFound
		switch {
		case err == nil, mayBeMissing && (errors.As(err, &nsNotFound) || errors.As(err, &notFound)):
			return c, nil
		case errors.As(err, &denied):
			c.Close()
			return nil, refused(opts, err)
		case !errors.As(err, &nsNotFound) && !errors.As(err, &notFound) || ctx.Err() != nil:
			c.Close()
			return nil, fmt.Errorf("Temporal at %s, namespace %s: %w", opts.HostPort, opts.Namespace, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// refused says that the cluster turned the credentials down, and which
// settings carry them.
func refused(opts client.Options, err error) error {
	return fmt.Errorf("Temporal at %s refused refuel's credentials: %w; set TEMPORAL_API_KEY to a key the cluster accepts (and TEMPORAL_TLS_CLIENT_CERT_PATH and _KEY_PATH where it wants client certificates)", opts.HostPort, err)
}
