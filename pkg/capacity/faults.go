package capacity

// Fault is why a run lost an attempt on capacity it held, as Class is why
// it could not get capacity. Its name is the external one: a run's
// status.failures[].class and, but for instance-lost, its restarts key.
type Fault string

const (
	// TrainerFault: the trainer exited with an error.
	TrainerFault Fault = "trainer"
	// AgentFault: the node agent never picked the attempt up, or failed
	// on its side (a checkpoint store it cannot reach).
	AgentFault Fault = "agent"
	// InstanceLost: the instance went silent; taken without notice, or dead.
	InstanceLost Fault = "instance-lost"
	// ControlPlane: the cluster was away or slow, never the instance.
	ControlPlane Fault = "control-plane"
	// NodeLost: a base machine that joined the pool went silent.
	NodeLost Fault = "node-lost"
	// CheckpointFault: none of the run's checkpoints verifies; training
	// again from step 0 would throw its work away silently. The node
	// agent fails an attempt with an application error of this type.
	CheckpointFault Fault = "checkpoint"
)

// Faults lists every fault, in the order the docs present them.
var Faults = []Fault{TrainerFault, AgentFault, InstanceLost, ControlPlane, NodeLost, CheckpointFault}

// Cure is what a run's recovery does with the instance a fault struck
// to train again: give it back as lost, or as failed, and train from
// the latest checkpoint on another; keep it and attach again; or end the
// run, which no instance cures.
type Cure int

const (
	// NewInstance: give the instance back as lost (a preemption without
	// notice) and train from the latest checkpoint on another.
	NewInstance Cure = iota
	// RestartTrainer: give the instance back as failed and start the
	// trainer again from the latest checkpoint, on another instance
	// after a backoff.
	RestartTrainer
	// Reattach: keep the instance and attach to the attempt again; the
	// trainer trains on.
	Reattach
	// OtherMachine: give the base machine back; the pool places the run
	// on another.
	OtherMachine
	// NoCure: the run ends; nothing it could acquire cures the fault.
	NoCure
)

// FaultRemedy says what a fault counts against and what cures it.
type FaultRemedy struct {
	// Restarts: the fault counts against the spec's max_restarts.
	Restarts bool
	// Preemption: the fault is booked as a preemption without notice
	// (status.preemptions, last_preemption, the zone avoided next): the
	// instance is given up as lost, whether it died or its agent did.
	Preemption bool
	// Teaches: an instance given back for it teaches the market memory
	// (stock logs, checkpoint logs and the policies fed by them).
	Teaches bool
	Cure    Cure
	// Key is the fault's key in status.restarts, which counts it each
	// time the run trains again after it; "" for a fault not counted
	// there (one that ends the run).
	Key string
	// Verdict and Type name how a run that ran out of restarts on this
	// fault failed (its error's message and type); only with Restarts.
	Verdict, Type string
}

// faultRemedies is the one table of what each fault counts against.
var faultRemedies = map[Fault]FaultRemedy{
	TrainerFault: {Restarts: true, Teaches: true, Cure: RestartTrainer, Key: "trainer",
		Verdict: "the trainer keeps failing", Type: "TrainerFailed"},
	AgentFault: {Restarts: true, Preemption: true, Teaches: true, Cure: NewInstance, Key: "agent",
		Verdict: "the node agent keeps failing (check that the instance reaches Temporal and the checkpoint store)", Type: "AgentFailed"},
	InstanceLost: {Restarts: true, Preemption: true, Teaches: true, Cure: NewInstance, Key: "instance_lost",
		Verdict: "instances keep going silent", Type: "InstanceLost"},
	ControlPlane:    {Cure: Reattach, Key: "control-plane"},
	NodeLost:        {Cure: OtherMachine, Key: "node-lost"},
	CheckpointFault: {Teaches: true, Cure: NoCure, Type: "checkpoint"},
}

// Remedy is what a fault counts against and what cures it. A fault this
// build does not know is handled as InstanceLost, the fault the run
// knows least about.
func (f Fault) Remedy() FaultRemedy {
	return faultRemedies[f.Known()]
}

// Known is the fault as this build handles it: itself, or InstanceLost
// for a fault it does not know.
func (f Fault) Known() Fault {
	if _, ok := faultRemedies[f]; ok {
		return f
	}
	return InstanceLost
}

// FaultOfKey is the fault status.restarts counts under key.
func FaultOfKey(key string) (Fault, bool) {
	for _, f := range Faults {
		if k := faultRemedies[f].Key; k != "" && k == key {
			return f, true
		}
	}
	return "", false
}

// Teaches reports whether an instance given back for reason (a release
// reason or a fault) teaches the market memory anything: every reason
// but a fault whose remedy says it does not.
func Teaches(reason string) bool {
	r, ok := faultRemedies[Fault(reason)]
	return !ok || r.Teaches
}
