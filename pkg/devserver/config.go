package devserver

import (
	"context"
	"net"
	"strconv"
	"time"

	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/membership/static"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/temporal"
	"google.golang.org/grpc"
)

// Store names in the server's configuration; one SQLite database is both.
const (
	executionsStore = "executions"
	visibilityStore = "visibility"
)

// serverOptions assembles a single-process cluster: every service in this
// process, found through static hosts instead of a gossip ring (so there is
// no membership port), one history shard, the stores openDatabase prepared.
// With TLS or API keys on the frontend, an internal frontend on loopback
// serves the server's own system workers (schedules, batch operations),
// which have neither a client certificate nor a key.
func serverOptions(p ports, db stores, logger serverLogger, sec security) []temporal.ServerOption {
	frontendHost, frontendPortText, _ := net.SplitHostPort(p.frontend)
	frontendPort, _ := strconv.Atoi(frontendPortText)

	// Services reach a frontend that listens on all interfaces through
	// loopback.
	frontendInternal := dialable(p.frontend)
	frontendHTTPAddr := net.JoinHostPort(loopback, strconv.Itoa(p.frontendHTTP))

	conf := &config.Config{
		Persistence: config.Persistence{
			DefaultStore:     executionsStore,
			VisibilityStore:  visibilityStore,
			NumHistoryShards: 1,
			DataStores:       map[string]config.DataStore{executionsStore: {SQL: db.executions}, visibilityStore: {SQL: db.visibility}},
		},
		ClusterMetadata: &cluster.Config{
			FailoverVersionIncrement: 10,
			MasterClusterName:        clusterName,
			CurrentClusterName:       clusterName,
			ClusterInformation: map[string]cluster.ClusterInformation{
				clusterName: {
					Enabled:                true,
					InitialFailoverVersion: 1,
					RPCAddress:             frontendInternal,
					HTTPAddress:            frontendHTTPAddr,
				},
			},
		},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services: map[string]config.Service{
			string(primitives.FrontendService): {RPC: config.RPC{GRPCPort: frontendPort, HTTPPort: p.frontendHTTP, BindOnIP: frontendHost}},
			string(primitives.HistoryService):  {RPC: config.RPC{GRPCPort: p.history, BindOnIP: loopback}},
			string(primitives.MatchingService): {RPC: config.RPC{GRPCPort: p.matching, BindOnIP: loopback}},
			string(primitives.WorkerService):   {RPC: config.RPC{GRPCPort: p.worker, BindOnIP: loopback}},
		},
		Archival: config.Archival{
			History:    config.HistoryArchival{State: "disabled"},
			Visibility: config.VisibilityArchival{State: "disabled"},
		},
		NamespaceDefaults: config.NamespaceDefaults{
			Archival: config.ArchivalNamespaceDefaults{
				History:    config.HistoryArchivalNamespaceDefaults{State: "disabled"},
				Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"},
			},
		},
		PublicClient: config.PublicClient{HostPort: frontendInternal},
		Global: config.Global{
			Membership: config.Membership{
				MaxJoinDuration:  30 * time.Second,
				BroadcastAddress: loopback,
			},
			TLS: sec.tls.serverTLS(),
		},
	}
	staticHosts := map[primitives.ServiceName]static.Hosts{
		primitives.FrontendService: static.SingleLocalHost(frontendInternal),
		primitives.HistoryService:  hostOf(p.history),
		primitives.MatchingService: hostOf(p.matching),
		primitives.WorkerService:   hostOf(p.worker),
	}
	if sec.enabled() {
		internal := hostPort(p.internalFrontend)
		conf.Services[string(primitives.InternalFrontendService)] = config.Service{RPC: config.RPC{GRPCPort: p.internalFrontend, HTTPPort: p.internalFrontendHTTP, BindOnIP: loopback}}
		staticHosts[primitives.InternalFrontendService] = static.SingleLocalHost(internal)
		// With an internal frontend the server's clients find it themselves.
		conf.PublicClient = config.PublicClient{}
		info := conf.ClusterMetadata.ClusterInformation[clusterName]
		info.RPCAddress, info.HTTPAddress = internal, hostPort(p.internalFrontendHTTP)
		conf.ClusterMetadata.ClusterInformation[clusterName] = info
	}

	opts := []temporal.ServerOption{
		temporal.WithConfig(conf),
		temporal.ForServices(services(sec.enabled())),
		temporal.WithStaticHosts(staticHosts),
		temporal.WithLogger(logger),
		temporal.WithDynamicConfigClient(dynamicConfig()),
	}
	if len(sec.apiKeys) > 0 {
		claims := newAPIKeyClaims(sec.apiKeys)
		opts = append(opts,
			temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claims }),
			temporal.WithAuthorizer(authorization.NewDefaultAuthorizer()))
	}
	return opts
}

// security is what guards the public frontend.
type security struct {
	tls     TLS
	apiKeys []string
}

func (s security) enabled() bool { return s.tls.Enabled() || len(s.apiKeys) > 0 }

// services are the services to run: the default ones, and the internal
// frontend when the public one is guarded.
func services(guarded bool) []string {
	if !guarded {
		return temporal.DefaultServices
	}
	return append(append([]string{}, temporal.DefaultServices...), string(primitives.InternalFrontendService))
}

func hostOf(port int) static.Hosts { return static.SingleLocalHost(hostPort(port)) }

func hostPort(port int) string { return net.JoinHostPort(loopback, strconv.Itoa(port)) }

// dynamicConfig tunes the server for one user on one machine.
func dynamicConfig() dynamicconfig.StaticClient {
	return dynamicconfig.StaticClient{
		// The Web UI and `starter status` list workflows often; the default
		// of 10 visibility requests per second makes the UI stutter.
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,
		// The default cache of 128k workflows is sized for a server host, not
		// a laptop running a few dozen jobs.
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key(): 8192,
		// Task queue partitions spread load over matching hosts; with one
		// host they only forward tasks between partitions, which delayed the
		// first workflow task by a second or more in tests.
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): 1,
	}
}

// counting is the server option that tells onRequest of each frontend
// request; none when onRequest is nil.
func counting(onRequest func(method string)) []temporal.ServerOption {
	if onRequest == nil {
		return nil
	}
	return []temporal.ServerOption{temporal.WithChainedFrontendGrpcInterceptors(
		func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			onRequest(info.FullMethod)
			return handler(ctx, req)
		})}
}
