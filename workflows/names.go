// Package workflows holds refuel's deterministic orchestration: the story
// of a training run, of the janitor and of an injected interruption. Side
// effects happen only in activities; decisions come from pkg/ functions.
package workflows

import (
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"refuel/pkg/serving"
)

// Names in the external contract (docs/contracts.md). Add, never rename.
const (
	TaskQueue = "refuel"

	TrainingRunName = "TrainingRun"
	SignalPause     = "pause"
	SignalResume    = "resume"
	UpdatePriority  = "set-priority"
	// UpdateBudget is the set-budget update: a run's budget in USD, 0 for
	// none.
	UpdateBudget = "set-budget"
	QueryStatus  = "status"
	// SignalProgress carries activities.Progress from a run's node agent.
	SignalProgress = "progress"

	InferenceServiceName = "InferenceService"
	// SignalMetrics carries autoscale.Metrics: a service's observed load.
	SignalMetrics = "metrics"
	// ServiceReplicaName is one replica of a service with a command: a
	// workload running the model server, started by its InferenceService
	// as a child, workflow ID the replica's id.
	ServiceReplicaName = "ServiceReplica"
	// SignalReplica carries a replica's report (inference.ReplicaReport)
	// from its ServiceReplica to its service.
	SignalReplica = "replica"
	// SignalReplicaDrain asks a ServiceReplica to drain (no payload): it
	// takes no new requests, finishes those it holds within the
	// service's drain_timeout, then stops and gives its instance back.
	SignalReplicaDrain = "drain-replica"
	// SignalReplicaPromote takes a ServiceReplica started as a warm-pool
	// entry into service (no payload): it starts its stopped instance,
	// if it stopped it, and runs the model server.
	SignalReplicaPromote = "promote-replica"

	// DevEnvironmentName is a development environment's workflow: input
	// one DevSpec as JSON, workflow ID the spec's id. It answers
	// QueryStatus with a devenv.Status, takes SignalResume (acquire
	// again, restore the workspace) and UpdatePriority as a run does, and
	// the signals below.
	DevEnvironmentName = "DevEnvironment"
	// SignalStop suspends an environment (no payload): its workspace is
	// saved, its instance released, and it waits, spending nothing, for
	// SignalResume.
	SignalStop = "stop"
	// SignalTouch counts as activity now (no payload): the idle clock
	// starts again.
	SignalTouch = "touch"
	// SignalDelete ends an environment (devenv.DeleteRequest): its
	// instance released, its workspace deleted from the store unless the
	// request keeps it.
	SignalDelete = "delete"

	// SignalInstanceTaken carries InstanceTaken from the control plane
	// to a training run: the cloud took one of the run's instances.
	SignalInstanceTaken = "instance-taken"

	InjectInterruptionName = "InjectInterruption"
	JanitorName            = "Janitor"
)

// InstanceTaken is what the instance-taken signal carries: the cloud
// took an instance back at the end of its interruption notice, as a
// cloud's instance-state event says. The control plane sends it to the
// run the instance is tagged with (capacity.TagRun).
type InstanceTaken struct {
	InstanceID string `json:"instance_id"`
}

// HandlerDescriptions say what each signal, update and query does, for
// the Web UI and `temporal workflow metadata`.
var HandlerDescriptions = map[string]string{
	SignalPause:           "checkpoint, give the instance back and wait, spending nothing",
	SignalResume:          "acquire again and go on from the latest checkpoint",
	SignalProgress:        "a node agent's report: restored, checkpoint, interruption notice",
	SignalMetrics:         "observed load of a service: QPS, queue length, GPU utilisation",
	SignalReplica:         "a replica's state: starting, ready (with its endpoint and model-load time), draining, gone",
	SignalReplicaDrain:    "take no new requests, finish those in flight within drain_timeout, then give the instance back",
	SignalReplicaPromote:  "a warm-pool replica goes into service: start its stopped instance and run the model server",
	serving.SignalTraffic: "what the service's balancer measured: rate, in flight, queued, latency, errors, SLO share",
	UpdatePriority:        "change the priority (0..100): a queued run moves at once",
	UpdateBudget:          "change a run's budget in USD (0 for none): a run waiting over budget goes on",
	QueryStatus:           "state, progress, instance, cost, failures",
	SignalStop:            "save the workspace, give the instance back and wait, spending nothing",
	SignalTouch:           "count as activity now: the idle clock starts again",
	SignalDelete:          "give the instance back and end, deleting the workspace unless asked to keep it",

	SignalCapacityGranted: "the capacity pool granted a base machine or a burst pool",
	SignalYield:           "the capacity pool asks for its capacity back: checkpoint, release, requeue",
	SignalInstanceTaken:   "the cloud took one of the run's instances at the end of its notice: the run recovers from its latest checkpoint at once",
	SignalPoolConfigure:   "the pools file in force",
	SignalPoolRequest:     "queue a request for one instance",
	SignalPoolBind:        "which offering an allocation's instance was acquired on",
	SignalPoolRelease:     "capacity given back for good",
	SignalPoolYielded:     "a yielding holder stopped: queue it again",
	SignalPoolPriority:    "a queued request's priority changed",
	SignalPoolPause:       "hold a queued request",
	SignalPoolResume:      "let a held request be admitted again",
	SignalPoolNode:        "a joined base machine is ready, draining, lost or left",
	UpdateJoin:            "a machine joins the base group (worker join); refused without the deployment's token",
	SignalDrain:           "move the machine's runs off it and place nothing new there",
	SignalUndrain:         "the machine takes runs again",
}

// Search attributes operators filter runs by in the Web UI and CLI.
var (
	AttrTeam     = temporal.NewSearchAttributeKeyKeyword("RefuelTeam")
	AttrTier     = temporal.NewSearchAttributeKeyKeyword("RefuelTier")
	AttrPriority = temporal.NewSearchAttributeKeyInt64("RefuelPriority")
	AttrState    = temporal.NewSearchAttributeKeyKeyword("RefuelState")
	AttrMarket   = temporal.NewSearchAttributeKeyKeyword("RefuelMarket")
	AttrCostUSD  = temporal.NewSearchAttributeKeyFloat64("RefuelCostUSD")
)

// SearchAttributeTypes are the attributes above with their types, as the
// dev server and `starter setup` register them.
var SearchAttributeTypes = map[string]enums.IndexedValueType{
	AttrTeam.GetName():     enums.INDEXED_VALUE_TYPE_KEYWORD,
	AttrTier.GetName():     enums.INDEXED_VALUE_TYPE_KEYWORD,
	AttrPriority.GetName(): enums.INDEXED_VALUE_TYPE_INT,
	AttrState.GetName():    enums.INDEXED_VALUE_TYPE_KEYWORD,
	AttrMarket.GetName():   enums.INDEXED_VALUE_TYPE_KEYWORD,
	AttrCostUSD.GetName():  enums.INDEXED_VALUE_TYPE_DOUBLE,
}

// Names of the BaseNode workflow and what it hears.
const (
	BaseNodeName = "BaseNode"
	// UpdateJoin carries JoinRequest: a `worker join` process admitting
	// its machine. It fails, naming why, for a machine that is refused.
	UpdateJoin = "join"
	// SignalDrain moves the machine's runs off it and places nothing new
	// there; SignalUndrain makes it ready again. No payload.
	SignalDrain   = "drain"
	SignalUndrain = "undrain"
	// SignalPoolNode carries NodeChange to the capacity pool.
	SignalPoolNode = "base-node"
)
