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
)

// Faults lists every fault, in the order the docs present them.
var Faults = []Fault{TrainerFault, AgentFault, InstanceLost, ControlPlane, NodeLost}

// Cure is what lets a run train again after a fault.
type Cure int

const (
	// NewInstance: give the instance back and acquire another.
	NewInstance Cure = iota
	// RestartTrainer: start the trainer again from the latest checkpoint.
	RestartTrainer
	// Reattach: attach to the attempt again; the trainer trains on.
	Reattach
	// OtherMachine: the pool moves the run to another machine.
	OtherMachine
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
	// Verdict and Type name how a run that ran out of restarts on this
	// fault failed (its error's message and type); only with Restarts.
	Verdict, Type string
}

// faultRemedies is the one table of what each fault counts against.
var faultRemedies = map[Fault]FaultRemedy{
	TrainerFault: {Restarts: true, Teaches: true, Cure: RestartTrainer,
		Verdict: "the trainer keeps failing", Type: "TrainerFailed"},
	AgentFault: {Restarts: true, Preemption: true, Teaches: true, Cure: NewInstance,
		Verdict: "the node agent keeps failing (check that the instance reaches Temporal and the checkpoint store)", Type: "AgentFailed"},
	InstanceLost: {Restarts: true, Preemption: true, Teaches: true, Cure: NewInstance,
		Verdict: "instances keep going silent", Type: "InstanceLost"},
	ControlPlane: {Cure: Reattach},
	NodeLost:     {Cure: OtherMachine},
}

// Remedy is what a fault counts against and what cures it. A fault this
// build does not know is handled as InstanceLost, the fault the run
// knows least about.
func (f Fault) Remedy() FaultRemedy {
	if r, ok := faultRemedies[f]; ok {
		return r
	}
	return faultRemedies[InstanceLost]
}

// Teaches reports whether an instance given back for reason (a release
// reason or a fault) teaches the market memory anything: every reason
// but a fault whose remedy says it does not.
func Teaches(reason string) bool {
	r, ok := faultRemedies[Fault(reason)]
	return !ok || r.Teaches
}
