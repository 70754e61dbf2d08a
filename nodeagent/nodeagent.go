// Package nodeagent is the node agent's process: it connects to Temporal
// and serves the training activity on its instance's own task queue, so
// the workflow talks to exactly this machine. The worker binary runs it
// as `worker agent`; clouds start one per instance.
package nodeagent

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"refuel/activities"
	"refuel/internal/cluster"
	"refuel/internal/telemetry"
	"refuel/workflows"
)

// Main runs the agent with command-line args until SIGTERM or SIGINT and
// returns the process exit code.
func Main(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		instanceID = fs.String("instance-id", "", "the instance this agent runs on (required)")
		taskQueue  = fs.String("task-queue", "", "the instance's own task queue (required)")
		metaURL    = fs.String("metadata-endpoint", "", "instance metadata endpoint to watch for interruption notices; empty watches none")
		gceMeta    = fs.String("gce-metadata-host", os.Getenv("GCE_METADATA_HOST"), "Compute Engine metadata server (host:port; default GCE_METADATA_HOST) whose instance/preempted is watched for the preemption, instead of --metadata-endpoint")
		readyFile  = fs.String("ready-file", "", "file created once the agent serves its task queue")
		shared     = addAgentFlags(fs)
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *instanceID == "" || *taskQueue == "" {
		fmt.Fprintln(stderr, "agent: --instance-id and --task-queue are required")
		return 2
	}
	log, err := telemetry.NewLogger(*shared.logLevel, false)
	if err != nil {
		fmt.Fprintln(stderr, "agent:", err)
		return 2
	}
	log = log.With(zap.String("instance", *instanceID))
	self, err := os.Executable()
	if err != nil {
		log.Error("cannot find own executable", zap.Error(err))
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, log, agentConfig{
		target: shared.target(), taskQueue: *taskQueue, readyFile: *readyFile,
		node: shared.node(log, self, func(n *activities.Node) {
			n.InstanceID, n.MetadataEndpoint, n.GCEMetadataHost = *instanceID, *metaURL, *gceMeta
		}),
	}); err != nil {
		log.Error("agent stopped", zap.Error(err))
		return 1
	}
	return 0
}

// agentFlags are the flags an instance's agent and a joining machine
// share: where the cluster is, where scratch files and checkpoints go,
// the demo trainer's pace and the log level.
type agentFlags struct {
	dir, address, namespace, storeURL, logLevel *string
	stepTime                                    *time.Duration
}

func addAgentFlags(fs *flag.FlagSet) agentFlags {
	return agentFlags{
		dir:       fs.String("dir", ".", "scratch directory for checkpoints and logs"),
		address:   fs.String("temporal-address", "", "Temporal frontend host:port (default: TEMPORAL_ADDRESS or profile)"),
		namespace: fs.String("namespace", "", "Temporal namespace (default: TEMPORAL_NAMESPACE or default)"),
		storeURL:  fs.String("checkpoint-url", "", "checkpoint store for jobs whose spec names none"),
		stepTime:  fs.Duration("demo-step-time", 100*time.Millisecond, "pace of the demo trainer's steps"),
		logLevel:  fs.String("log-level", "info", "debug, info, warn or error"),
	}
}

func (f agentFlags) target() cluster.Target {
	return cluster.Target{Address: *f.address, Namespace: *f.namespace}
}

// node is the agent the flags describe, run by the executable self;
// with sets what only one kind of agent has.
func (f agentFlags) node(log *zap.Logger, self string, with func(*activities.Node)) *activities.Node {
	n := &activities.Node{
		Dir: *f.dir, DefaultStoreURL: *f.storeURL, SelfCommand: []string{self}, DemoStepTime: *f.stepTime,
		Logger: log, ProgressSignal: workflows.SignalProgress,
	}
	if with != nil {
		with(n)
	}
	return n
}

// workerOptions are a node agent's: one job at a time (the instance is
// the job's), though a second RunTraining may attach to its attempt and
// StopTraining come in beside them; one poller, since tasks are few.
// RunTraining heartbeats through the client, at the cadence its run asks
// for, not through the SDK's throttled heartbeats, whose failure would
// cancel it.
func workerOptions() worker.Options {
	return worker.Options{
		MaxConcurrentActivityExecutionSize: 4, MaxConcurrentActivityTaskPollers: 1, DisableWorkflowWorker: true,
	}
}

// register puts the node's activities on its worker.
func register(w worker.Registry, node *activities.Node) {
	w.RegisterActivityWithOptions(node.RunTraining, activity.RegisterOptions{Name: activities.RunTrainingName})
	w.RegisterActivityWithOptions(node.StopTraining, activity.RegisterOptions{Name: activities.StopTrainingName})
}

type agentConfig struct {
	target    cluster.Target
	taskQueue string
	readyFile string
	node      *activities.Node
}

func run(ctx context.Context, log *zap.Logger, cfg agentConfig) error {
	opts, err := cluster.Options(cfg.target)
	if err != nil {
		return err
	}
	opts.Logger = telemetry.SDKLogger(log.Named("sdk"))
	c, err := cluster.Dial(ctx, opts)
	if err != nil {
		return err
	}
	defer c.Close()
	cfg.node.Signaler = c
	w := worker.New(c, cfg.taskQueue, workerOptions())
	register(w, cfg.node)
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	if cfg.readyFile != "" {
		if err := os.WriteFile(cfg.readyFile, []byte(time.Now().Format(time.RFC3339Nano)), 0o644); err != nil {
			return err
		}
	}
	log.Info("node agent serving", zap.String("task_queue", cfg.taskQueue))
	<-ctx.Done()
	return nil
}
