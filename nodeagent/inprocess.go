package nodeagent

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"refuel/activities"
	"refuel/pkg/agent"
	"refuel/pkg/cloud/local"
	"refuel/pkg/cloud/metadata"
	"refuel/pkg/trainer"
	"refuel/workflows"
)

// Virtual starts the node agents of virtual instances inside this
// process. Each is the node agent a process runs, worker and activities
// alike, on its instance's own task queue, but on the one client
// connection it is given rather than one of its own; its demo trainer runs
// in-process (trainer.Embedded, the same code as `worker trainer`), and it
// hears its notices from its metadata service directly. A job's own
// command still runs as a process. Safe for concurrent use.
type Virtual struct {
	Client client.Client
	// DefaultStoreURL is the checkpoint store for jobs whose spec names none.
	DefaultStoreURL string
	// DemoStepTime paces the demo trainer.
	DemoStepTime time.Duration
	Logger       *zap.Logger

	mu     sync.Mutex
	agents map[*virtualAgent]struct{}
}

var _ local.VirtualAgent = (*virtualAgent)(nil)

// virtualAgent is one virtual instance's node agent.
type virtualAgent struct {
	v       *Virtual
	machine *agent.Machine
	stop    func()
	once    sync.Once
	done    chan struct{}
}

// Start starts the agent of the instance l describes and returns once it
// serves its task queue: local.LauncherConfig.StartVirtual.
func (v *Virtual) Start(ctx context.Context, l local.AgentLaunch) (local.VirtualAgent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	log := v.Logger
	if log == nil {
		log = zap.NewNop()
	}
	machine := agent.NewMachine()
	node := &activities.Node{
		InstanceID: l.InstanceID, Dir: l.Dir, DefaultStoreURL: v.DefaultStoreURL, Signaler: v.Client,
		DemoStepTime: v.DemoStepTime, Logger: log.With(zap.String("instance", l.InstanceID)), ProgressSignal: workflows.SignalProgress,
		DemoTrainer: trainer.Embedded, Notices: notices{l.Metadata}, Machine: machine, SharedHost: true,
	}
	w := worker.New(v.Client, l.TaskQueue, workerOptions())
	register(w, node)
	if err := w.Start(); err != nil {
		return nil, err
	}
	a := &virtualAgent{v: v, machine: machine, stop: w.Stop, done: make(chan struct{})}
	v.mu.Lock()
	if v.agents == nil {
		v.agents = map[*virtualAgent]struct{}{}
	}
	v.agents[a] = struct{}{}
	v.mu.Unlock()
	return a, nil
}

// Running is how many virtual agents run now.
func (v *Virtual) Running() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.agents)
}

// Kill ends the agent at once: the machine first, so that a training
// under way is killed rather than stopped gracefully by the worker's own
// shutdown, then the worker.
func (a *virtualAgent) Kill() {
	a.once.Do(func() {
		a.machine.Kill()
		a.stop()
		a.v.mu.Lock()
		delete(a.v.agents, a)
		a.v.mu.Unlock()
		close(a.done)
	})
	<-a.done
}

func (a *virtualAgent) Done() <-chan struct{} { return a.done }

// notices reads an instance's metadata service as an agent.NoticeSource.
type notices struct{ meta *metadata.Service }

func (n notices) Pending() (interruption, rebalance *agent.Notice, changed <-chan struct{}) {
	action, at, changed := n.meta.Watch()
	if action != nil {
		interruption = &agent.Notice{Action: action.Action, Time: action.Time}
	}
	if at != nil {
		rebalance = &agent.Notice{Action: "rebalance", Time: *at}
	}
	return interruption, rebalance, changed
}
