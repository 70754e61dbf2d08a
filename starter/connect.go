package main

import (
	"context"
	"errors"
	"flag"
	"io"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"refuel/internal/cluster"
	"refuel/internal/telemetry"
)

// connFlags are the connection flags every command that talks to
// Temporal takes.
type connFlags struct {
	address, namespace *string
}

func addConnFlags(fs *flag.FlagSet) connFlags {
	return connFlags{
		address:   fs.String("temporal-address", "", "Temporal frontend host:port (default TEMPORAL_ADDRESS, profile, or 127.0.0.1:7233)"),
		namespace: fs.String("namespace", "", "Temporal namespace (default TEMPORAL_NAMESPACE or default)"),
	}
}

func (f connFlags) dial(ctx context.Context) (client.Client, error) {
	opts, err := f.options()
	if err != nil {
		return nil, err
	}
	return cluster.Dial(ctx, opts)
}

// dialToCreate connects for `starter setup`, whose namespace may not
// exist yet.
func (f connFlags) dialToCreate(ctx context.Context) (client.Client, error) {
	opts, err := f.options()
	if err != nil {
		return nil, err
	}
	return cluster.DialToCreate(ctx, opts)
}

func (f connFlags) options() (client.Options, error) {
	opts, err := cluster.Options(cluster.Target{Address: *f.address, Namespace: *f.namespace})
	opts.Logger = telemetry.SDKLogger(zap.NewNop())
	return opts, err
}

// parse parses flags that may come before or after positional args, as
// users type them (`status my-job --json`).
// A mistake is a usage error, reported once by main with a pointer to
// -h, rather than followed by every flag.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	if !wantsHelp(args) {
		fs.SetOutput(io.Discard)
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// resolvedNamespace is the namespace dial connects to.
func (f connFlags) resolvedNamespace() string {
	opts, err := cluster.Options(cluster.Target{Address: *f.address, Namespace: *f.namespace})
	if err != nil {
		return cluster.DefaultNamespace
	}
	return opts.Namespace
}
