package nodeagent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"refuel/workflows/capacitypool"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"refuel/activities"
	"refuel/internal/cluster"
	"refuel/internal/telemetry"
	"refuel/jobs"
	"refuel/pkg/admission"
	"refuel/pkg/pool"
	"refuel/workflows"
)

// JoinMain runs `worker join`: the machine joins the deployment's base
// group under its name and serves attempts on its own task queue, as an
// instance's node agent does, until SIGTERM or SIGINT; then it drains
// (its runs checkpoint and move) within the stop timeout and leaves. It
// returns the process exit code: 1 when the join is refused.
func JoinMain(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("join", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		name         = fs.String("name", "", "the machine's name in the base group, e.g. gpu-node-01 (default: --kube-node)")
		gpus         = fs.Int("gpus", 0, "GPUs the machine offers; 0 reads them from --kube-node, or counts them with nvidia-smi")
		kubeNode     = fs.String("kube-node", "", "the Kubernetes node this pod runs on: --gpus from its allocatable nvidia.com/gpu (in-cluster)")
		instanceType = fs.String("instance-type", "", "what runs' resources.instance_types match; default gpu.<N>x")
		zone         = fs.String("zone", "", "where the machine is (rack, data centre), for runs' resources.zones")
		price        = fs.Float64("price-per-hour", 0, "what an hour of the machine costs (amortised or reserved), for cost reports")
		tokenFile    = fs.String("token-file", os.Getenv("REFUEL_JOIN_TOKEN_FILE"), "the deployment's join token, as the pools file's base.token_file holds it (env REFUEL_JOIN_TOKEN_FILE)")
		readyFile    = fs.String("ready-file", "", "file created once the machine joined and serves its task queue")
		stopTimeout  = fs.Duration("stop-timeout", 2*time.Minute, "on SIGTERM, how long the machine's runs have to checkpoint and move before it leaves")
		shared       = addAgentFlags(fs)
	)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: worker join --name NAME --gpus N [--instance-type T] [--zone Z] [--price-per-hour P] [--token-file F] [flags]\n\n"+
			"Joins this machine to the deployment's base group while the process runs, and serves runs' attempts on it.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *name == "" {
		*name = *kubeNode // a DaemonSet's machine is its node
	}
	if *gpus == 0 {
		n, err := machineGPUs(*kubeNode)
		if err != nil {
			fmt.Fprintf(stderr, "join: --gpus not given and %v: give --gpus N\n", err)
			return 2
		}
		*gpus = n
	}
	if *instanceType == "" {
		*instanceType = "gpu." + strconv.Itoa(*gpus) + "x"
	}
	node := pool.Node{Name: *name, InstanceType: *instanceType, GPUs: *gpus, Zone: *zone, PricePerHour: *price}
	if err := pool.ValidateJoining(node); err != nil {
		fmt.Fprintln(stderr, "join:", err)
		return 2
	}
	var token []byte
	if *tokenFile != "" {
		var err error
		if token, err = pool.ReadToken(*tokenFile); err != nil {
			fmt.Fprintln(stderr, "join:", err)
			return 2
		}
	}
	log, err := telemetry.NewLogger(*shared.logLevel, false)
	if err != nil {
		fmt.Fprintln(stderr, "join:", err)
		return 2
	}
	log = log.With(zap.String("node", node.Name))
	self, err := os.Executable()
	if err != nil {
		log.Error("cannot find own executable", zap.Error(err))
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	m := &machine{
		node: node, token: token, session: newSession(), stopTimeout: *stopTimeout, readyFile: *readyFile, log: log,
		target: shared.target(),
		agent:  shared.node(log, self, nil),
	}
	err = m.run(ctx)
	var refused *RefusedError
	switch {
	case errors.As(err, &refused):
		fmt.Fprintln(stderr, "join:", err)
		return 1
	case err != nil:
		log.Error("machine stopped", zap.Error(err))
		return 1
	}
	return 0
}

// RefusedError says the deployment refused the machine: it gets no work.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return e.Reason }

// machine is a joining machine's process.
type machine struct {
	node        pool.Node
	token       []byte
	session     string
	stopTimeout time.Duration
	readyFile   string
	target      cluster.Target
	agent       *activities.Node
	log         *zap.Logger
}

// run joins, serves until ctx ends, then drains and leaves. It polls
// the machine's task queue only once the join was admitted, so a refused
// machine never takes an attempt.
func (m *machine) run(ctx context.Context) error {
	opts, err := cluster.Options(m.target)
	if err != nil {
		return err
	}
	opts.Logger = telemetry.SDKLogger(m.log.Named("sdk"))
	c, err := cluster.Dial(ctx, opts)
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := m.join(ctx, c)
	if err != nil {
		return err
	}
	m.agent.Signaler = c
	leaving := make(chan struct{})
	presence := &activities.Presence{Leaving: leaving}
	presence.SetSession(m.session)
	w := worker.New(c, st.TaskQueue, worker.Options{
		MaxConcurrentActivityExecutionSize: 8, MaxConcurrentActivityTaskPollers: 2, DisableWorkflowWorker: true,
		WorkerStopTimeout: m.stopTimeout,
		// The SDK holds heartbeats back to 0.8 of the timeout, which
		// leaves a fifth of it for a slow network or a busy cluster: let
		// the presence's beats, a third of the timeout apart, through.
		MaxHeartbeatThrottleInterval: max(st.HeartbeatTimeout/3, 100*time.Millisecond),
	})
	register(w, m.agent)
	w.RegisterActivityWithOptions(presence.Serve, activity.RegisterOptions{Name: activities.NodePresenceName})
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	if m.readyFile != "" {
		if err := os.WriteFile(m.readyFile, []byte(time.Now().Format(time.RFC3339Nano)), 0o644); err != nil {
			return err
		}
	}
	m.log.Info("joined the base group; serving", zap.String("task_queue", st.TaskQueue), zap.Int("gpus", m.node.GPUs), zap.Int("joins", st.Joins))
	m.stayJoined(ctx, c, presence, max(st.HeartbeatTimeout, time.Second))
	m.leave(c)
	close(leaving)
	return nil
}

// stayJoined looks at the machine's membership every so often until ctx
// ends: a machine the pool counted lost while its process ran (the
// cluster did not hear it for a while) joins again, as a restarted one
// would.
func (m *machine) stayJoined(ctx context.Context, c client.Client, presence *activities.Presence, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		v, err := c.QueryWorkflow(ctx, capacitypool.BaseNodeID(m.node.Name), "", workflows.QueryStatus)
		var st capacitypool.BaseNodeStatus
		if err != nil || v.Get(&st) != nil || st.State != admission.NodeLost && st.State != admission.NodeLeft {
			continue
		}
		m.log.Warn("the pool counted this machine lost while it ran; joining again")
		m.session = newSession()
		presence.SetSession(m.session)
		if _, err := m.join(ctx, c); err != nil {
			m.log.Error("joining again failed; trying on", zap.Error(err))
		}
	}
}

// join admits the machine through its BaseNode workflow, started if it
// is not running: one workflow per name, so a restarted machine rejoins
// as the same machine.
func (m *machine) join(ctx context.Context, c client.Client) (capacitypool.BaseNodeStatus, error) {
	id := capacitypool.BaseNodeID(m.node.Name)
	_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: workflows.TaskQueue, WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, workflows.BaseNodeName, m.node.Name)
	if err != nil {
		return capacitypool.BaseNodeStatus{}, fmt.Errorf("start the machine's workflow: %w", err)
	}
	req := capacitypool.JoinRequest{Node: m.node, Session: m.session, Proof: pool.JoinProof(m.token, m.node.Name, m.session)}
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: id, UpdateName: workflows.UpdateJoin, Args: []any{req}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var st capacitypool.BaseNodeStatus
	if err == nil {
		err = h.Get(ctx, &st)
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) || err != nil && strings.Contains(err.Error(), "join refused") {
		msg := err.Error()
		if app != nil {
			msg = app.Error()
		}
		return st, &RefusedError{Reason: msg}
	}
	return st, err
}

// leave drains the machine (its runs checkpoint and move, nothing new
// comes) and waits, within the stop timeout, until nothing runs on it.
func (m *machine) leave(c client.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), m.stopTimeout)
	defer cancel()
	m.log.Info("stopping: draining the machine first", zap.Duration("stop_timeout", m.stopTimeout))
	if err := jobs.Drain(ctx, c, m.node.Name); err != nil {
		m.log.Warn("cannot drain; leaving at once", zap.Error(err))
		return
	}
	err := jobs.WaitEmpty(ctx, c, m.node.Name, 500*time.Millisecond, nil)
	if err != nil {
		m.log.Warn("left before its runs moved; they recover elsewhere from their checkpoints", zap.Error(err))
		return
	}
	m.log.Info("drained; leaving the base group")
}

// machineGPUs reads the GPUs of the machine: from its Kubernetes node
// when it is one, else from nvidia-smi.
func machineGPUs(kubeNode string) (int, error) {
	if kubeNode == "" {
		return countGPUs()
	}
	k, err := inCluster()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return k.nodeGPUs(ctx, kubeNode)
}

// countGPUs asks nvidia-smi how many GPUs the machine has.
func countGPUs() (int, error) {
	out, err := exec.Command("nvidia-smi", "--query-gpu=index", "--format=csv,noheader").Output()
	if err != nil {
		return 0, fmt.Errorf("nvidia-smi: %w", err)
	}
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(line) != "" {
			n++
		}
	}
	if n == 0 {
		return 0, errors.New("nvidia-smi lists no GPUs")
	}
	return n, nil
}

// newSession names this process's membership: a restarted machine joins
// under a new one, so what was scheduled for the old is told apart.
func newSession() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
