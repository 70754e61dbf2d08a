package capacitypool

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/pool"
	"refuel/workflows"
	"refuel/workflows/workload"
)

// A machine of the team's joins the base group with `worker join`: its
// process serves attempts on the machine's own task queue, as an
// instance's agent does, and keeps one BaseNode workflow (one per
// machine name, so a machine that restarts is the same machine) told
// that it is there. The workflow admits the join (the control plane
// checks the token), runs NodePresence on the machine for as long as it
// is in the pool (a machine whose heartbeats stop is lost after the
// heartbeat timeout), and tells the capacity pool each change: ready,
// draining, lost, left.

// BaseNodeID is the workflow ID of the machine named name: the same for
// every process that joins under the name, so a rejoin is one machine.
func BaseNodeID(name string) string { return "refuel-node-" + name }

// NodeTaskQueue is the task queue a joined machine serves attempts on.
func NodeTaskQueue(name string) string { return "refuel-node-" + name }

// JoinRequest is a machine joining: what it is, and its proof (see
// pool.JoinProof) for the session of its process.
type JoinRequest struct {
	Node    pool.Node `json:"node"`
	Session string    `json:"session"`
	Proof   string    `json:"proof"`
}

// NodeChange tells the pool what became of a joined machine.
type NodeChange struct {
	Node  pool.Node           `json:"node"`
	State admission.NodeState `json:"state"`
}

// BaseNodeStatus is the BaseNode workflow's status query, and what a
// join answers.
type BaseNodeStatus struct {
	Node      pool.Node           `json:"node"`
	State     admission.NodeState `json:"state"`
	TaskQueue string              `json:"task_queue"`
	Session   string              `json:"session,omitempty"`
	// Joins counts the processes that joined under the name.
	Joins    int       `json:"joins"`
	JoinedAt time.Time `json:"joined_at,omitzero"`
	// LastSeen is set when the machine was lost: when it was last heard.
	// While it is in the pool its presence's last heartbeat says it.
	LastSeen         time.Time     `json:"last_seen,omitzero"`
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout,omitempty"`
	// Drained is the operator's drain, until an undrain: a machine lost
	// while draining and joined again comes back draining, not ready.
	Drained bool `json:"drained,omitempty"`
}

// presenceStartTimeout is the least time a joined process has to take up
// its presence.
const presenceStartTimeout = 30 * time.Second

// joinWait is how long a BaseNode workflow started by a join waits for
// that join to be admitted; a refused one ends it.
const joinWait = time.Minute

// BaseNode is the workflow of one joined machine, named in its ID.
func BaseNode(ctx workflow.Context, name string) error {
	n := &baseNode{Status: BaseNodeStatus{Node: pool.Node{Name: name}, TaskQueue: NodeTaskQueue(name)}, rejoined: workflow.NewBufferedChannel(ctx, 1)}
	if err := n.handlers(ctx, name); err != nil {
		return err
	}
	if ok, err := workflow.AwaitWithTimeout(ctx, joinWait, func() bool { return n.Status.Session != "" }); err != nil || !ok {
		// Refused, or never asked: nothing joined.
		_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
		return err
	}
	drain := workflow.GetSignalChannelWithOptions(ctx, workflows.SignalDrain, workflow.SignalChannelOptions{Description: workflows.HandlerDescriptions[workflows.SignalDrain]})
	undrain := workflow.GetSignalChannelWithOptions(ctx, workflows.SignalUndrain, workflow.SignalChannelOptions{Description: workflows.HandlerDescriptions[workflows.SignalUndrain]})
	for {
		session := n.Status.Session
		pctx, cancel := workflow.WithCancel(ctx)
		presence := workflow.ExecuteActivity(workload.Titled(presenceOptions(pctx, n.Status), "machine "+name+" is in the pool"),
			activities.NodePresenceName, activities.PresenceInput{Session: session})
		n.rejoined.ReceiveAsync(nil) // this session's join, already taken up
		var ended bool
		var lost error
		for n.Status.Session == session && !ended {
			sel := workflow.NewSelector(ctx)
			sel.AddFuture(presence, func(f workflow.Future) { ended, lost = true, f.Get(ctx, nil) })
			sel.AddReceive(drain, func(c workflow.ReceiveChannel, _ bool) {
				c.Receive(ctx, nil)
				n.Status.Drained = true
				n.set(ctx, admission.NodeDraining)
			})
			sel.AddReceive(undrain, func(c workflow.ReceiveChannel, _ bool) {
				c.Receive(ctx, nil)
				n.Status.Drained = false
				n.set(ctx, admission.NodeReady)
			})
			sel.AddReceive(n.rejoined, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
			sel.Select(ctx)
		}
		cancel()
		if !ended {
			continue // joined again: the new process is the machine now
		}
		var canceled *temporal.CanceledError
		if lost == nil || errors.As(lost, &canceled) && ctx.Err() != nil {
			n.set(ctx, admission.NodeLeft)
			_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
			return nil
		}
		workflow.GetLogger(ctx).Warn("base machine lost: silent past its heartbeat timeout", "node", name, "error", lost)
		n.Status.LastSeen = workflow.Now(ctx).Add(-n.Status.HeartbeatTimeout)
		n.set(ctx, admission.NodeLost)
		if err := workflow.Await(ctx, func() bool { return n.Status.Session != session }); err != nil {
			return err
		}
	}
}

// baseNode is the BaseNode workflow's state.
type baseNode struct {
	Status BaseNodeStatus
	// rejoined wakes the loop when another process joined as the machine.
	rejoined workflow.Channel
}

func (n *baseNode) handlers(ctx workflow.Context, name string) error {
	if err := workflow.SetQueryHandlerWithOptions(ctx, workflows.QueryStatus, func() (BaseNodeStatus, error) { return n.Status, nil },
		workflow.QueryHandlerOptions{Description: "the machine, its state (ready, draining, lost), its joins"}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, workflows.UpdateJoin, func(ctx workflow.Context, req JoinRequest) (BaseNodeStatus, error) {
		return n.Join(ctx, req)
	}, workflow.UpdateHandlerOptions{
		Description: workflows.HandlerDescriptions[workflows.UpdateJoin],
		Validator: func(_ workflow.Context, req JoinRequest) error {
			if req.Node.Name != name {
				return errors.New("join refused: machine " + req.Node.Name + " asked to join as " + name)
			}
			if req.Session == "" || req.Proof == "" {
				return errors.New("join refused: a join needs a session and a proof of the deployment's token")
			}
			return pool.ValidateJoining(req.Node)
		},
	})
}

// Join admits a machine whose proof the control plane accepts: it is
// ready (or stays draining), under the new session.
func (n *baseNode) Join(ctx workflow.Context, req JoinRequest) (BaseNodeStatus, error) {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var terms activities.JoinTerms
	ask := activities.JoinAsk{Name: req.Node.Name, Session: req.Session, Proof: req.Proof}
	if err := workflow.ExecuteLocalActivity(lctx, activities.VerifyJoinName, ask).Get(ctx, &terms); err != nil {
		var app *temporal.ApplicationError
		if errors.As(err, &app) {
			return BaseNodeStatus{}, temporal.NewNonRetryableApplicationError(app.Error(), activities.JoinRefused, nil)
		}
		return BaseNodeStatus{}, err
	}
	st := &n.Status
	st.Node, st.HeartbeatTimeout = req.Node, terms.HeartbeatTimeout
	st.Joins++
	st.JoinedAt, st.LastSeen = workflow.Now(ctx), time.Time{}
	state := admission.NodeReady
	if st.State == admission.NodeDraining || st.Drained {
		state = admission.NodeDraining
	}
	workflow.GetLogger(ctx).Info("base machine joined", "node", req.Node.Name, "gpus", req.Node.GPUs, "joins", st.Joins)
	// The pool hears of the join before the new session's presence
	// starts: a presence that ends at once must not tell it "left"
	// ahead of "ready".
	n.set(ctx, state)
	st.Session = req.Session
	n.rejoined.SendAsync(true)
	return *st, nil
}

// set records the machine's state and tells the capacity pool. A pool
// that is not running (no pools file) is logged: nothing is placed on
// the machine until one runs and the machine joins again.
func (n *baseNode) set(ctx workflow.Context, st admission.NodeState) {
	n.Status.State = st
	ch := NodeChange{Node: n.Status.Node, State: st}
	if err := workflow.SignalExternalWorkflow(ctx, workflows.PoolWorkflowID, "", workflows.SignalPoolNode, ch).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("capacity pool not told of a base machine", "node", ch.Node.Name, "state", st, "error", err)
	}
}

// presenceOptions run NodePresence on the machine's queue: lost after
// the heartbeat timeout, or when no process of the machine takes it up
// within presenceStartTimeout (a process polls moments after its join,
// but a busy machine may take seconds); never retried, as a process
// that finds itself lost joins anew.
func presenceOptions(ctx workflow.Context, st BaseNodeStatus) workflow.Context {
	hb := st.HeartbeatTimeout
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              st.TaskQueue,
		ScheduleToStartTimeout: max(hb, presenceStartTimeout),
		StartToCloseTimeout:    100 * 365 * 24 * time.Hour,
		HeartbeatTimeout:       hb,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
		WaitForCancellation:    false,
	})
}

// RunsOn lists the requests holding GPUs on the base machine name, in
// the pool's status: what a drain waits to see gone.
func RunsOn(st Status, name string) []string {
	out := []string{}
	for _, a := range st.Running {
		if a.Layer != admission.BaseLayer {
			continue
		}
		on := a.Node == name
		for _, n := range a.Nodes {
			on = on || n.Node == name
		}
		if on {
			out = append(out, a.Request.ID)
		}
	}
	return out
}
