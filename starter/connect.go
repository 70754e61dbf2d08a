package main

import (
	"context"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.uber.org/zap"

	"refuel/internal/cluster"
	"refuel/internal/codec"
	"refuel/internal/telemetry"
)

// clientFlags are the connection flags of every command that talks to
// Temporal: one set, so each takes the same names. Each left empty falls
// back to the standard Temporal client environment and profile.
type clientFlags struct {
	address, namespace        string
	tls                       bool
	tlsCert, tlsKey, tlsCA    string
	tlsServerName, apiKeyFile string
	codecKeys                 string
}

// clientFlagNames are the flags clientFlags adds, for tests and help.
var clientFlagNames = []string{"temporal-address", "namespace", "tls", "tls-cert-path", "tls-key-path", "tls-ca-path", "tls-server-name", "api-key-file", "codec-keys"}

// addClientFlags gives cmd the connection flags.
func addClientFlags(cmd *cobra.Command) *clientFlags {
	f := &clientFlags{}
	fs := cmd.Flags()
	fs.StringVar(&f.address, "temporal-address", "", "Temporal frontend host:port (default TEMPORAL_ADDRESS, profile, or 127.0.0.1:7233)")
	fs.StringVar(&f.namespace, "namespace", "", "Temporal namespace (default TEMPORAL_NAMESPACE or default)")
	fs.BoolVar(&f.tls, "tls", false, "connect with TLS (default TEMPORAL_TLS; implied by the other --tls flags and an API key)")
	fs.StringVar(&f.tlsCert, "tls-cert-path", "", "client certificate, PEM (default TEMPORAL_TLS_CLIENT_CERT_PATH)")
	fs.StringVar(&f.tlsKey, "tls-key-path", "", "client certificate's private key, PEM (default TEMPORAL_TLS_CLIENT_KEY_PATH)")
	fs.StringVar(&f.tlsCA, "tls-ca-path", "", "CA that signed the server's certificate, PEM (default TEMPORAL_TLS_SERVER_CA_CERT_PATH, else the system's)")
	fs.StringVar(&f.tlsServerName, "tls-server-name", "", "name the server's certificate must carry (default TEMPORAL_TLS_SERVER_NAME, else the address's host)")
	fs.StringVar(&f.apiKeyFile, "api-key-file", "", "file holding the API key (default TEMPORAL_API_KEY); a file keeps it out of the process list")
	fs.StringVar(&f.codecKeys, "codec-keys", "", "payload encryption keys, lines ID:BASE64KEY, the worker's (env "+codec.EnvKeys+")")
	for _, name := range []string{"tls-cert-path", "tls-key-path", "tls-ca-path", "api-key-file", "codec-keys"} {
		_ = fs.SetAnnotation(name, cobra.BashCompFilenameExt, nil)
	}
	return f
}

// target is the cluster the flags name. The TLS and API-key flags go in
// as the TEMPORAL_* settings they stand for, over this process's own.
func (f *clientFlags) target() (cluster.Target, error) {
	t := cluster.Target{Address: f.address, Namespace: f.namespace, CodecKeys: f.codecKeys}
	set := map[string]string{}
	if f.tls {
		set["TEMPORAL_TLS"] = "true"
	}
	for env, v := range map[string]string{
		"TEMPORAL_TLS_CLIENT_CERT_PATH":    f.tlsCert,
		"TEMPORAL_TLS_CLIENT_KEY_PATH":     f.tlsKey,
		"TEMPORAL_TLS_SERVER_CA_CERT_PATH": f.tlsCA,
		"TEMPORAL_TLS_SERVER_NAME":         f.tlsServerName,
	} {
		if v != "" {
			set[env], set["TEMPORAL_TLS"] = v, "true"
		}
	}
	if f.codecKeys != "" {
		if _, err := os.Stat(f.codecKeys); err != nil {
			return t, &FlagError{"codec-keys", err.Error(), "give the worker's key file, lines ID:BASE64KEY"}
		}
	}
	if f.apiKeyFile != "" {
		b, err := os.ReadFile(f.apiKeyFile)
		if err != nil {
			return t, &FlagError{"api-key-file", err.Error(), "give a readable file holding the key"}
		}
		key := strings.TrimSpace(string(b))
		if key == "" {
			return t, &FlagError{"api-key-file", f.apiKeyFile + " is empty", "put the API key in it"}
		}
		set["TEMPORAL_API_KEY"] = key
	}
	if len(set) == 0 {
		return t, nil
	}
	t.Env = map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			t.Env[k] = v
		}
	}
	for k, v := range set {
		t.Env[k] = v
	}
	return t, nil
}

func (f *clientFlags) options() (client.Options, error) {
	t, err := f.target()
	if err != nil {
		return client.Options{}, err
	}
	opts, err := cluster.Options(t)
	opts.Logger = telemetry.SDKLogger(zap.NewNop())
	return opts, err
}

func (f *clientFlags) dial(ctx context.Context) (client.Client, error) {
	opts, err := f.options()
	if err != nil {
		return nil, err
	}
	return cluster.Dial(ctx, opts)
}

// dialToCreate connects for `starter setup`, whose namespace may not
// exist yet.
func (f *clientFlags) dialToCreate(ctx context.Context) (client.Client, error) {
	opts, err := f.options()
	if err != nil {
		return nil, err
	}
	return cluster.DialToCreate(ctx, opts)
}

// resolvedNamespace is the namespace dial connects to.
func (f *clientFlags) resolvedNamespace() string {
	opts, err := f.options()
	if err != nil {
		return cluster.DefaultNamespace
	}
	return opts.Namespace
}

// dataConverter decodes payloads as this binary's client does.
func (f *clientFlags) dataConverter() converter.DataConverter {
	opts, err := f.options()
	if err != nil || opts.DataConverter == nil {
		return converter.GetDefaultDataConverter()
	}
	return opts.DataConverter
}

// withClient dials, runs fn with the client and closes it.
func (f *clientFlags) withClient(ctx context.Context, fn func(client.Client) error) error {
	c, err := f.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(c)
}
